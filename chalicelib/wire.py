"""Shapes that cross module boundaries: OpenAI's value types as validated annotations, statuses as ``Literal``\\s and
wire objects as ``TypedDict``\\s. Plain value types, importable from every layer (the HTTP edge, the domain, the
event handlers) without pulling in any of them.

Limits follow OpenAI's vector-store and Responses contracts (OPENAI-COMPAT.md §2–4): at most 16 metadata or
attribute pairs, keys of 1–64 characters, string values of at most 512 characters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from pydantic import AfterValidator

__all__ = [
    "FILE_PURPOSES",
    "MAX_KEY_CHARS",
    "MAX_PAIRS",
    "MAX_VALUE_CHARS",
    "Attributes",
    "BatchStatus",
    "ErrorBody",
    "FileCounts",
    "FilePurpose",
    "FileSearchResult",
    "FileStatus",
    "ItemStatus",
    "LastError",
    "Metadata",
    "ResponseStatus",
    "StaticChunking",
    "StaticChunkingStrategy",
    "UploadStatus",
    "VectorStoreStatus",
    "check_pairs",
]

# OpenAI's limits on metadata and attributes (OPENAI-COMPAT.md §2 and §3).
MAX_PAIRS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512

# The purposes a file (or an upload) may be created with: OpenAI's Files API enum; the SDK's vector-store helpers
# use "assistants".
FilePurpose = Literal["assistants", "batch", "fine-tune", "vision", "user_data", "evals"]
FILE_PURPOSES: tuple[FilePurpose, ...] = get_args(FilePurpose)
# A vector-store file's status (OpenAI's ``vector_store.file.status``).
FileStatus = Literal["in_progress", "completed", "failed", "cancelled"]
# A file batch's status (``vector_store.files_batch.status``).
BatchStatus = Literal["in_progress", "completed", "failed", "cancelled"]
# A vector store's status (``vector_store.status``).
VectorStoreStatus = Literal["expired", "in_progress", "completed"]
# An upload's status (``upload.status``).
UploadStatus = Literal["pending", "completed", "cancelled", "expired"]
# A response's status (``response.status``); Engram produces in_progress, completed, incomplete and failed.
ResponseStatus = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]
# A response output item's status: messages and function calls are in_progress/completed/incomplete, a
# file_search_call also searching/failed.
ItemStatus = Literal["in_progress", "searching", "completed", "incomplete", "failed"]


class LastError(TypedDict):
    """``last_error`` of a failed file or job: OpenAI's ``code`` (``server_error``, ``invalid_file``,
    ``unsupported_file``, ``rate_limit_exceeded``) and a human ``message``."""

    code: str
    message: str


class FileCounts(TypedDict):
    """``file_counts`` of a vector store or a file batch: files per status, and their ``total``."""

    in_progress: int
    completed: int
    failed: int
    cancelled: int
    total: int


class StaticChunking(TypedDict):
    """The ``static`` member of a chunking strategy: sizes in the embedder's tokens."""

    max_chunk_size_tokens: int
    chunk_overlap_tokens: int


class StaticChunkingStrategy(TypedDict):
    """``chunking_strategy`` as a vector-store file records and returns it: ``{"type": "static", "static": {...}}``
    (a requested ``auto`` is reported resolved)."""

    type: Literal["static"]
    static: StaticChunking


class FileSearchResult(TypedDict):
    """One entry of a ``file_search_call``'s ``results``: the file, its name, the relevance ``score`` (0–1), the
    chunk ``text`` and the file's ``attributes``. Engram's own search fills every field; a result replayed by a
    client (a previous output sent back as input) may carry None for any of them."""

    file_id: str | None
    filename: str | None
    score: float | None
    text: str | None
    attributes: dict[str, Any] | None


class ErrorBody(TypedDict):
    """The inside of OpenAI's error envelope ``{"error": ErrorBody}``."""

    message: str
    type: str
    param: str | None
    code: str | None


def check_pairs(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Enforce OpenAI's metadata/attribute limits on ``value`` (None passes).

    Raises:
        ValueError: more than :data:`MAX_PAIRS` pairs, a key outside 1–:data:`MAX_KEY_CHARS` characters, or a
            string value longer than :data:`MAX_VALUE_CHARS` (pydantic turns it into a 400 naming the field).
    """
    if value is None:
        return None
    if len(value) > MAX_PAIRS:
        raise ValueError(f"at most {MAX_PAIRS} key-value pairs are allowed, got {len(value)}")
    for key, item in value.items():
        if not key or len(key) > MAX_KEY_CHARS:
            raise ValueError(f"keys must be 1 to {MAX_KEY_CHARS} characters long")
        if isinstance(item, str) and len(item) > MAX_VALUE_CHARS:
            raise ValueError(f"string values must be at most {MAX_VALUE_CHARS} characters long (key {key[:64]!r})")
    return value


# Object metadata: up to 16 string pairs (vector stores, responses, and Engram's own objects).
Metadata = Annotated[dict[str, str], AfterValidator(check_pairs)]
# Vector-store file attributes: up to 16 pairs of strings, numbers or booleans (filterable).
Attributes = Annotated[dict[str, bool | int | float | str], AfterValidator(check_pairs)]
