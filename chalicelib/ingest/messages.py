"""The ingestion pipeline's messages (rows of :mod:`chalicelib.dispatch.table`): ids only — chunk texts stay in
Postgres — a few hundred bytes each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from chalicelib.dispatch.port import Message

__all__ = ["BatchMessage", "FileMessage"]


@dataclass(frozen=True, slots=True)
class FileMessage(Message):
    """Process version ``version`` (already claimed) of ``file_id`` in ``vector_store_id``: parse, chunk, then embed
    (inline) or stage and fan out embedding batches. Body ``{"type": "ingest.file", "v": 1, "tenant",
    "vector_store_id", "file_id", "version"}``."""

    kind: ClassVar[str] = "ingest.file"
    vector_store_id: str
    file_id: str
    version: int


@dataclass(frozen=True, slots=True)
class BatchMessage(Message):
    """Embed batch ``batch`` (0-based) of version ``version`` of a file. Body ``{"type": "embed.batch", "v": 1,
    "tenant", "vector_store_id", "file_id", "version", "batch"}``."""

    kind: ClassVar[str] = "embed.batch"
    vector_store_id: str
    file_id: str
    version: int
    batch: int
