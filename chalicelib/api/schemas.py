"""Request bodies of the OpenAI-compatible API, as pydantic models (OPENAI-COMPAT.md §1–3).

Every field the official SDK sends for a route is declared (its ``*_create_params.py`` / ``*_update_params.py``);
any other is refused with OpenAI's 400 ``unknown_parameter`` (:class:`chalicelib.validation.RequestBody`), as
OpenAI's API does. Types are strict (no ``"5"`` for 5). ``chunking_strategy``, ``filters`` and ``ranking_options``
are passed through as JSON and checked, unknown fields included, by the modules that interpret them
(:mod:`chalicelib.ingest.chunk`, :mod:`chalicelib.search`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from chalicelib.validation import RequestBody
from chalicelib.wire import Attributes, Metadata

MAX_NAME_CHARS = 256
MAX_STORE_FILE_IDS = 500  # SPEC: vector store create file_ids maxItems
MAX_BATCH_FILES = 2000  # SPEC: file batch file_ids / files 1..2000
MAX_QUERY_CHARS = 4096
MAX_QUERIES = 16


Query = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
QueryList = Annotated[list[Query], Field(min_length=1, max_length=MAX_QUERIES)]


_Body = RequestBody


class StoreExpiresAfter(_Body):
    """``{"anchor": "last_active_at", "days": 1..365}``."""

    anchor: Literal["last_active_at"]
    days: int = Field(ge=1, le=365)


class CreateVectorStore(_Body):
    """``POST /v1/vector_stores``; every field optional."""

    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    description: str | None = Field(default=None, max_length=512)
    file_ids: list[Annotated[str, Field(max_length=128)]] | None = Field(default=None, max_length=MAX_STORE_FILE_IDS)
    chunking_strategy: dict[str, Any] | None = None
    expires_after: StoreExpiresAfter | None = None
    metadata: Metadata | None = None


class UpdateVectorStore(_Body):
    """``POST /v1/vector_stores/{id}``; only the fields sent change (``model_fields_set``), null clears."""

    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    expires_after: StoreExpiresAfter | None = None
    metadata: Metadata | None = None


class CreateVectorStoreFile(_Body):
    """``POST /v1/vector_stores/{id}/files``."""

    file_id: str = Field(max_length=128)
    attributes: Attributes | None = None
    chunking_strategy: dict[str, Any] | None = None


class UpdateVectorStoreFile(_Body):
    """``POST /v1/vector_stores/{id}/files/{file_id}``: ``attributes`` is required and nullable."""

    attributes: Attributes | None


class BatchFile(_Body):
    """One entry of a file batch's ``files``."""

    file_id: str = Field(max_length=128)
    attributes: Attributes | None = None
    chunking_strategy: dict[str, Any] | None = None


class CreateFileBatch(_Body):
    """``POST /v1/vector_stores/{id}/file_batches``: exactly one of ``file_ids`` (top-level ``attributes`` and
    ``chunking_strategy`` apply to each) or ``files`` (per-file values; top-level ones ignored)."""

    file_ids: list[Annotated[str, Field(max_length=128)]] | None = Field(default=None, min_length=1,
                                                                         max_length=MAX_BATCH_FILES)
    files: list[BatchFile] | None = Field(default=None, min_length=1, max_length=MAX_BATCH_FILES)
    attributes: Attributes | None = None
    chunking_strategy: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> CreateFileBatch:
        if self.file_ids is None and self.files is None:
            raise PydanticCustomError("missing_required_parameter",
                                      "Missing required parameter: one of 'file_ids' or 'files'.")
        if self.file_ids is not None and self.files is not None:
            raise PydanticCustomError("invalid_value", "Provide only one of 'file_ids' or 'files', not both.")
        return self

    def entries(self) -> list[BatchFile]:
        """The batch as per-file entries, top-level values applied to ``file_ids``."""
        if self.files is not None:
            return list(self.files)
        return [BatchFile(file_id=f, attributes=self.attributes, chunking_strategy=self.chunking_strategy)
                for f in self.file_ids or []]


# Engram's additions to each search result, asked for by name (``include``; chalicelib.api.objects.search_page).
SearchInclude = Literal["score_details", "chunk"]


class SearchRequest(_Body):
    """``POST /v1/vector_stores/{id}/search``; ``include`` is Engram's (without it the page is OpenAI's)."""

    query: Query | QueryList
    max_num_results: int = Field(default=10, ge=1, le=50)
    rewrite_query: bool = False
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] | None = None
    include: Annotated[list[SearchInclude], Field(max_length=4)] | None = None


class FileExpiresAfter(_Body):
    """Files API ``expires_after``: ``{"anchor": "created_at", "seconds": 3600..2592000}``."""

    model_config = ConfigDict(extra="forbid", strict=False, defer_build=True)  # multipart form fields arrive as strings

    anchor: Literal["created_at"]
    seconds: int = Field(ge=3600, le=2_592_000)


class FileExpiresAfterForm(_Body):
    """The upload form's ``expires_after`` as one field, so errors name ``expires_after.seconds`` (not ``seconds``)."""

    model_config = ConfigDict(extra="forbid", strict=False, defer_build=True)

    expires_after: FileExpiresAfter
