"""File batches (OpenAI ``vector_store.files_batch``): a set of files attached to a store in one request.

A batch stores only its membership; its ``file_counts`` and status are computed from the member files'
``vector_store_files`` rows, so they always equal the per-file statuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import class_row

from chalicelib import ids
from chalicelib.errors import NotFoundError
from chalicelib.store.db import one
from chalicelib.wire import BatchStatus, FileCounts

_INSERT = """INSERT INTO file_batches (id, tenant_id, vector_store_id) VALUES (%(id)s, %(tenant)s, %(store)s)
RETURNING id, tenant_id, vector_store_id, created_at, cancelled_at"""
_ADD_FILES = """INSERT INTO file_batch_files (batch_id, tenant_id, vector_store_id, file_id)
SELECT %(batch)s, %(tenant)s, %(store)s, unnest(%(files)s::text[]) ON CONFLICT DO NOTHING"""
_GET = """SELECT id, tenant_id, vector_store_id, created_at, cancelled_at FROM file_batches
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND id = %(id)s"""
_COUNTS = """
SELECT count(*) FILTER (WHERE sf.status = 'in_progress'), count(*) FILTER (WHERE sf.status = 'completed'),
       count(*) FILTER (WHERE sf.status = 'failed'), count(*) FILTER (WHERE sf.status = 'cancelled'), count(*)
FROM file_batch_files b JOIN vector_store_files sf
  ON sf.vector_store_id = b.vector_store_id AND sf.file_id = b.file_id AND sf.tenant_id = b.tenant_id
WHERE b.tenant_id = %(tenant)s AND b.batch_id = %(id)s"""
# Only a batch with work left is cancelled (OpenAI returns a finished batch unchanged).
_CANCEL = """UPDATE file_batches b SET cancelled_at = coalesce(b.cancelled_at, now())
WHERE b.tenant_id = %(tenant)s AND b.vector_store_id = %(store)s AND b.id = %(id)s AND EXISTS (
    SELECT 1 FROM file_batch_files bf JOIN vector_store_files vf
      ON vf.vector_store_id = bf.vector_store_id AND vf.file_id = bf.file_id
    WHERE bf.batch_id = b.id AND vf.tenant_id = %(tenant)s AND vf.status = 'in_progress')"""


@dataclass(frozen=True, slots=True)
class Batch:
    """A row of ``file_batches``."""

    id: str
    tenant_id: str
    vector_store_id: str
    created_at: datetime
    cancelled_at: datetime | None


def create(conn: psycopg.Connection, tenant_id: str, store_id: str, file_ids: list[str]) -> Batch:
    """Record a batch of ``file_ids`` (already attached to ``store_id`` in the same transaction)."""
    with conn.cursor(row_factory=class_row(Batch)) as cur:
        batch = one(cur.execute(_INSERT, {"id": ids.new_id(ids.FILE_BATCH), "tenant": tenant_id,
                                          "store": store_id}))
    conn.execute(_ADD_FILES, {"batch": batch.id, "tenant": tenant_id, "store": store_id, "files": file_ids})
    return batch


def get(conn: psycopg.Connection, tenant_id: str, store_id: str, batch_id: str) -> Batch:
    """The batch ``batch_id`` of ``store_id``.

    Raises:
        NotFoundError: no such batch in that store for this tenant.
    """
    with conn.cursor(row_factory=class_row(Batch)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "store": store_id, "id": batch_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No file batch found with id '{batch_id}' in vector store '{store_id}'.",
                            param="batch_id")
    return row


def file_counts(conn: psycopg.Connection, tenant_id: str, batch_id: str) -> FileCounts:
    """``{"in_progress", "completed", "failed", "cancelled", "total"}`` over the batch's member files."""
    in_progress, completed, failed, cancelled, total = one(conn.execute(
        _COUNTS, {"tenant": tenant_id, "id": batch_id}))
    return {"in_progress": in_progress, "completed": completed, "failed": failed, "cancelled": cancelled,
            "total": total}


def status(batch: Batch, counts: FileCounts) -> BatchStatus:
    """OpenAI's batch status: ``cancelled`` once cancelled, ``in_progress`` while a member is, else ``completed``
    (a batch whose files all failed is ``failed``)."""
    if batch.cancelled_at is not None:
        return "cancelled"
    if counts["in_progress"]:
        return "in_progress"
    if counts["total"] and counts["failed"] == counts["total"]:
        return "failed"
    return "completed"


def cancel(conn: psycopg.Connection, tenant_id: str, store_id: str, batch_id: str) -> Batch:
    """Cancel a batch: its files still ``in_progress`` become ``cancelled`` (and lose any chunks an earlier
    attachment left), in one transaction. A batch with nothing in progress (finished, or already cancelled) is
    returned unchanged.

    Raises:
        NotFoundError: no such batch.
    """
    from chalicelib.store import attachments

    with conn.transaction():
        get(conn, tenant_id, store_id, batch_id)
        conn.execute(_CANCEL, {"tenant": tenant_id, "store": store_id, "id": batch_id})
        attachments.cancel_batch_files(conn, tenant_id, store_id, batch_id)
    return get(conn, tenant_id, store_id, batch_id)
