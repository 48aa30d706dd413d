"""Store rows → OpenAI wire objects (OPENAI-COMPAT.md §1–3): exact field names, ``object`` literals and integer
Unix-second timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chalicelib.search.service import SearchHit
from chalicelib.store.attachments import StoreFile
from chalicelib.store.batches import Batch
from chalicelib.store.batches import status as batch_status
from chalicelib.store.files import FileRow
from chalicelib.store.vector_stores import VectorStore, is_expired
from chalicelib.wire import FileCounts, VectorStoreStatus


def unix(value: datetime | None) -> int | None:
    """A timestamp as integer Unix seconds (None stays None)."""
    return None if value is None else int(value.timestamp())


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def file_object(row: FileRow) -> dict[str, Any]:
    """A ``file`` object. ``status`` is deprecated but still required: always ``processed`` (bytes are stored at
    upload; ingestion status lives on the vector-store file)."""
    body = {"id": row.id, "object": "file", "bytes": row.bytes, "created_at": unix(row.created_at),
            "filename": row.filename, "purpose": row.purpose, "status": "processed", "status_details": None}
    if row.expires_at is not None:
        body["expires_at"] = unix(row.expires_at)
    return body


def vector_store_object(store: VectorStore, counts: FileCounts) -> dict[str, Any]:
    """A ``vector_store`` object; ``status`` is ``expired`` past ``expires_at``, ``in_progress`` while any file
    is, else ``completed``."""
    status: VectorStoreStatus
    if is_expired(store, now()):
        status = "expired"
    elif counts["in_progress"]:
        status = "in_progress"
    else:
        status = "completed"
    body = {"id": store.id, "object": "vector_store", "created_at": unix(store.created_at),
            "name": store.name if store.name is not None else "", "usage_bytes": store.usage_bytes,
            "file_counts": counts, "status": status, "expires_at": unix(store.expires_at),
            "last_active_at": unix(store.last_active_at), "metadata": store.metadata}
    if store.expires_after:
        body["expires_after"] = store.expires_after
    return body


def store_file_object(row: StoreFile) -> dict[str, Any]:
    """A ``vector_store.file`` object; its ``id`` is the File's id."""
    return {"id": row.file_id, "object": "vector_store.file", "usage_bytes": row.usage_bytes,
            "created_at": unix(row.created_at), "vector_store_id": row.vector_store_id, "status": row.status,
            "last_error": row.last_error if row.status == "failed" else None,
            "chunking_strategy": row.chunking_strategy, "attributes": row.attributes}


def batch_object(batch: Batch, counts: FileCounts) -> dict[str, Any]:
    """A ``vector_store.files_batch`` object (note ``files_batch``: the SDK's Literal and the SPEC)."""
    return {"id": batch.id, "object": "vector_store.files_batch", "created_at": unix(batch.created_at),
            "vector_store_id": batch.vector_store_id, "status": batch_status(batch, counts), "file_counts": counts}


def cursor_page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """A cursor list: ``first_id``/``last_id`` are the first and last objects *returned* (None when empty)."""
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


def deleted(object_id: str, kind: str) -> dict[str, Any]:
    """A deletion acknowledgement such as ``{"id", "object": "vector_store.deleted", "deleted": true}``."""
    return {"id": object_id, "object": kind, "deleted": True}


def search_page(queries: list[str], hits: list[SearchHit]) -> dict[str, Any]:
    """A ``vector_store.search_results.page``; scores are similarities in [0, 1]."""
    return {"object": "vector_store.search_results.page", "search_query": queries,
            "data": [{"file_id": h.file_id, "filename": h.filename, "score": h.score, "attributes": h.attributes,
                      "content": [{"type": "text", "text": h.text}]} for h in hits],
            "has_more": False, "next_page": None}
