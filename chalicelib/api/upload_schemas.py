"""Request bodies of the Uploads API (``/v1/uploads``), as pydantic models: strict types, the SDK's fields
(``upload_create_params.py``, ``upload_complete_params.py``) and no others (400 ``unknown_parameter``, as in
:mod:`chalicelib.api.schemas`). ``purpose`` is checked by :func:`chalicelib.store.uploads.create`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from chalicelib.validation import RequestBody

MAX_FILENAME_CHARS = 255
MAX_MIME_TYPE_CHARS = 255
MAX_PARTS = 10_000  # part_ids per completion (64 MB parts would reach OpenAI's 8 GB upload limit at 128)


_Body = RequestBody


class UploadExpiresAfter(_Body):
    """``expires_after`` of the File made at completion: ``{"anchor": "created_at", "seconds": 3600..2592000}``."""

    anchor: Literal["created_at"]
    seconds: int = Field(ge=3600, le=2_592_000)


class CreateUpload(_Body):
    """``POST /v1/uploads``: ``bytes`` is the total size the parts will add up to."""

    bytes: int = Field(ge=0)
    filename: str = Field(min_length=1, max_length=1024)
    mime_type: str = Field(min_length=1, max_length=MAX_MIME_TYPE_CHARS)
    purpose: str = Field(min_length=1, max_length=64)
    expires_after: UploadExpiresAfter | None = None


class CompleteUpload(_Body):
    """``POST /v1/uploads/{id}/complete``: the parts in file order, and optionally the whole file's hex MD5."""

    part_ids: list[Annotated[str, Field(max_length=128)]] = Field(max_length=MAX_PARTS)
    md5: str | None = Field(default=None, max_length=64)
