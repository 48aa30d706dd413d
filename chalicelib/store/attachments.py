"""Attachments of files to vector stores (OpenAI's ``vector_store.file``): their rows, their processing lease, and
the one transition every change of their chunks goes through.

**The transition** (:func:`_transition`): lock the store (serialises writers of one store, which keeps the BM25
statistics race-free), change the attachment rows (complete, fail, settle, cancel, detach — each a guarded
statement that returns the files it changed and by how much their usage changed), delete those files' chunks,
insert the new ones (completion only) and add the usage changes to the store's ``usage_bytes``, in one
transaction. So a search never sees a half-written file, and no
failed, cancelled or detached file keeps searchable chunks. Lock order everywhere: ingestion version row
(:mod:`chalicelib.store.ingest_jobs`) → store row → attachment row.

**The lease** (:func:`claim`, OPENAI-COMPAT.md §7.1): claiming an ``in_progress`` attachment sets
``lease_expires_at = now() + lease`` and increments ``attempts``; that attempt number names the processing run (the
ingestion *version*) and guards its final write (:func:`complete`, :func:`fail` with ``attempt``). A lease that
expires means the worker is gone: the file may be claimed again until ``max_attempts`` claims have expired, then
:func:`settle` fails it with ``last_error = {"code": "server_error", ...}``. Attempt numbers only grow (re-attaching
moves ``attempt_base`` instead of resetting them), so a stale worker's guard can never match a newer claim.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.errors import NotFoundError
from chalicelib.store import chunks as chunk_rows
from chalicelib.store.chunks import Chunk
from chalicelib.store.db import atomic, one, pipeline
from chalicelib.store.paging import Page, keyset, trim
from chalicelib.wire import FileStatus, LastError, StaticChunkingStrategy

__all__ = [
    "StoreFile",
    "attach",
    "cancel_batch_files",
    "claim",
    "complete",
    "detach",
    "fail",
    "find_by_name",
    "get",
    "list_all",
    "list_page",
    "matching_files",
    "settle",
    "update_attributes",
]


@dataclass(frozen=True, slots=True)
class StoreFile:
    """A file attached to a vector store, joined with the file's name. ``last_error`` is set when ``status ==
    "failed"``; ``usage_bytes`` is what its chunks occupy (text bytes + 4 bytes per dimension)."""

    vector_store_id: str
    file_id: str
    filename: str
    status: FileStatus
    last_error: LastError | None
    attributes: dict[str, Any]
    chunking_strategy: StaticChunkingStrategy
    content_sha256: str | None
    chunk_count: int
    usage_bytes: int
    created_at: datetime
    updated_at: datetime


_KEY = "tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"
_COLUMNS = """sf.vector_store_id, sf.file_id, f.filename, sf.status, sf.last_error, sf.attributes,
    sf.chunking_strategy, sf.content_sha256, sf.chunk_count, sf.usage_bytes, sf.created_at, sf.updated_at"""
_UPSERT = """
INSERT INTO vector_store_files (tenant_id, vector_store_id, file_id, status, attributes, chunking_strategy)
VALUES (%(tenant)s, %(store)s, %(file)s, 'in_progress', %(attributes)s, %(strategy)s)
ON CONFLICT (vector_store_id, file_id) DO UPDATE
SET status = 'in_progress', last_error = NULL, attributes = EXCLUDED.attributes,
    chunking_strategy = EXCLUDED.chunking_strategy, attempts = vector_store_files.attempts + 1,
    attempt_base = vector_store_files.attempts + 1, lease_expires_at = NULL, updated_at = now()"""
_GET = f"""
SELECT {_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND sf.file_id = %(file)s"""
_BY_NAME = f"""
SELECT {_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND f.filename = %(filename)s
ORDER BY sf.created_at DESC LIMIT 1"""
_LIST = f"""
SELECT {_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s ORDER BY sf.created_at, sf.file_id"""
_PAGE = f"""
SELECT {_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s
  AND (%(status)s::text IS NULL OR sf.status = %(status)s)
  AND (%(batch)s::text IS NULL OR sf.file_id IN (SELECT file_id FROM file_batch_files
                                                 WHERE tenant_id = %(tenant)s AND batch_id = %(batch)s))
  AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
# The newest attachment of each of the given names (as find_by_name picks it), counted when final.
_FINAL_COUNT = """
SELECT count(*) FROM (
    SELECT DISTINCT ON (f.filename) sf.status FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
    WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND f.filename = ANY(%(names)s)
    ORDER BY f.filename, sf.created_at DESC, sf.file_id DESC) AS newest
WHERE status IN ('completed', 'failed', 'cancelled')"""
# The caller's attachments of some stores whose attributes satisfy a filter, and how many chunks each holds.
_MATCHING_FILES = """
SELECT file_id, chunk_count FROM vector_store_files
WHERE tenant_id = %(matching_tenant)s AND vector_store_id = ANY(%(matching_stores)s) AND chunk_count > 0
  AND ({filter})"""
_UPDATE_ATTRIBUTES = f"UPDATE vector_store_files SET attributes = %(attributes)s, updated_at = now() WHERE {_KEY}"
_CLAIM = f"""
UPDATE vector_store_files SET attempts = attempts + 1, lease_expires_at = now() + make_interval(secs => %(lease)s),
    updated_at = now()
WHERE {_KEY} AND status = 'in_progress'
  AND (lease_expires_at IS NULL OR lease_expires_at < now()) AND attempts - attempt_base < %(max_attempts)s
RETURNING attempts"""
# Completion and failure only apply to a row still in_progress under the caller's attempt (when given): a cancelled
# file, or one a newer attempt took over after this worker's lease expired, is left alone.
_GUARD = " AND (%(attempt)s::int IS NULL OR (status = 'in_progress' AND attempts = %(attempt)s::int))"
# Every statement that changes attachment rows returns each changed file with the change of its usage_bytes (the
# subquery reads the row as it was before the statement), which the store's usage_bytes follows.
_CHANGED = """file_id, usage_bytes - (SELECT o.usage_bytes FROM vector_store_files o
    WHERE o.vector_store_id = {row}.vector_store_id AND o.file_id = {row}.file_id)"""
_COMPLETE = f"""
UPDATE vector_store_files SET status = 'completed', last_error = NULL, chunk_count = %(chunks)s,
    usage_bytes = %(usage)s, content_sha256 = %(sha256)s, lease_expires_at = NULL, updated_at = now()
WHERE {_KEY}{_GUARD} RETURNING {_CHANGED.format(row="vector_store_files")}"""
_FAIL = f"""
UPDATE vector_store_files SET status = 'failed', last_error = %(error)s, chunk_count = 0, usage_bytes = 0,
    lease_expires_at = NULL, updated_at = now()
WHERE {_KEY}{_GUARD} RETURNING {_CHANGED.format(row="vector_store_files")}"""
# Stuck: the last allowed lease expired, or nobody claimed the file for unclaimed_after seconds (no worker runs).
_STUCK = """status = 'in_progress' AND (
    (lease_expires_at < now() AND attempts - attempt_base >= %(max_attempts)s)
    OR (lease_expires_at IS NULL AND %(unclaimed_after)s::float8 IS NOT NULL
        AND updated_at < now() - make_interval(secs => %(unclaimed_after)s::float8)))"""
_FIND_STUCK = f"""
SELECT tenant_id, vector_store_id, file_id, lease_expires_at IS NULL FROM vector_store_files
WHERE {_STUCK}
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) AND (%(store)s::text IS NULL OR vector_store_id = %(store)s)
LIMIT %(limit)s"""
_FAIL_STUCK = f"""
UPDATE vector_store_files SET status = 'failed', last_error = %(error)s, chunk_count = 0, usage_bytes = 0,
    lease_expires_at = NULL, updated_at = now()
WHERE {_KEY} AND {_STUCK} RETURNING {_CHANGED.format(row="vector_store_files")}"""
_CANCEL_BATCH_FILES = f"""
UPDATE vector_store_files sf SET status = 'cancelled', lease_expires_at = NULL, chunk_count = 0, usage_bytes = 0,
    updated_at = now()
FROM file_batch_files b
WHERE b.tenant_id = %(tenant)s AND b.batch_id = %(batch)s AND sf.tenant_id = b.tenant_id
  AND sf.vector_store_id = b.vector_store_id AND sf.file_id = b.file_id AND sf.status = 'in_progress'
RETURNING sf.{_CHANGED.format(row="sf")}"""
_DETACH = f"DELETE FROM vector_store_files WHERE {_KEY} RETURNING file_id, -usage_bytes"
# A detached file's processing versions (with their staged chunks and batch markers) go with it: a later attachment
# numbers its versions afresh, and a late message of an old version must find nothing to do.
_FORGET_VERSIONS = f"DELETE FROM ingest_jobs WHERE {_KEY}"
# Files settled per call (the rest wait for the next housekeeping pass or read).
SETTLE_LIMIT = 1000


def attach(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *,
           attributes: dict[str, Any], chunking_strategy: StaticChunkingStrategy) -> None:
    """Attach (or re-attach) a file to a store with status ``in_progress`` (a re-attach starts a new attempt
    range: :func:`claim` counts from it)."""
    conn.execute(_UPSERT, {"tenant": tenant_id, "store": store_id, "file": file_id,
                           "attributes": Jsonb(attributes), "strategy": Jsonb(chunking_strategy)})


def get(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> StoreFile:
    """The attachment of ``file_id`` to ``store_id``.

    Raises:
        NotFoundError: the file is not attached to that store (for this tenant).
    """
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "store": store_id, "file": file_id}).fetchone()
    if row is None:
        raise _not_attached(store_id, file_id)
    return row


def find_by_name(conn: psycopg.Connection, tenant_id: str, store_id: str, filename: str) -> StoreFile | None:
    """The newest attachment in ``store_id`` of a file named ``filename``, or None."""
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        return cur.execute(_BY_NAME, {"tenant": tenant_id, "store": store_id, "filename": filename}).fetchone()


def list_all(conn: psycopg.Connection, tenant_id: str, store_id: str) -> list[StoreFile]:
    """All attachments of a store, oldest first."""
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        return cur.execute(_LIST, {"tenant": tenant_id, "store": store_id}).fetchall()


def count_final(conn: psycopg.Connection, tenant_id: str, store_id: str, filenames: Sequence[str]) -> int:
    """How many of ``filenames`` are attached to the store with a final status (completed, failed, cancelled),
    each name counted by its newest attachment."""
    return int(one(conn.execute(_FINAL_COUNT, {"tenant": tenant_id, "store": store_id, "names": list(filenames)}))[0])


def list_page(conn: psycopg.Connection, tenant_id: str, store_id: str, page: Page, *,
              status: FileStatus | None = None, batch_id: str | None = None) -> tuple[list[StoreFile], bool]:
    """One page of a store's attachments ``(rows, has_more)``, optionally only ``status`` ones or a batch's."""
    where, order, params = keyset(page, "sf.file_id")
    query = sql.SQL(_PAGE).format(keyset=where, order=order)
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        rows = cur.execute(query, {"tenant": tenant_id, "store": store_id, "status": status, "batch": batch_id,
                                   **params}).fetchall()
    return trim(page, rows)


def matching_files(conn: psycopg.Connection, tenant_id: str, store_ids: Sequence[str], where: sql.Composable,
                   params: dict[str, Any]) -> dict[str, int]:
    """The files of the tenant's stores ``store_ids`` whose attributes satisfy ``where`` (an SQL boolean over a jsonb
    column ``attributes``, e.g. ``search.filters.compile_filter``'s, with its named ``params``) and that hold
    chunks: ``{file id: chunk count}``. A chunk carries its file's attributes (:func:`update_attributes` keeps the
    copies in step), so a filter's chunks lie in these files. One statement over the attachments (one row per file),
    not the chunks."""
    statement = sql.SQL(_MATCHING_FILES).format(filter=where)
    rows = conn.execute(statement, {**params, "matching_tenant": tenant_id, "matching_stores": list(store_ids)})
    return {str(file_id): int(count) for file_id, count in rows.fetchall()}


def update_attributes(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                      attributes: dict[str, Any]) -> StoreFile:
    """Replace an attachment's attributes and its chunks' copies (which filters read) in one transaction.

    Raises:
        NotFoundError: the file is not attached to the store.
    """
    with conn.transaction():
        params = {"tenant": tenant_id, "store": store_id, "file": file_id, "attributes": Jsonb(attributes)}
        if conn.execute(_UPDATE_ATTRIBUTES, params).rowcount == 0:
            raise _not_attached(store_id, file_id)
        chunk_rows.set_attributes(conn, tenant_id, store_id, file_id, attributes)
    return get(conn, tenant_id, store_id, file_id)


def claim(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, lease_s: float,
          max_attempts: int) -> int | None:
    """Claim one ``in_progress`` attachment for ``lease_s`` seconds; returns the attempt number (the version), or
    None when it is not claimable (not ``in_progress``, leased by a live worker, or out of attempts)."""
    row = conn.execute(_CLAIM, {"tenant": tenant_id, "store": store_id, "file": file_id, "lease": lease_s,
                                "max_attempts": max_attempts}).fetchone()
    return row[0] if row else None


def complete(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, chunks: Sequence[Chunk],
             vectors: Sequence[Any], dim: int, content_sha256: str, attempt: int | None) -> bool:
    """Swap a file's chunks for ``chunks`` with ``vectors`` (n × ``dim``) and mark it ``completed``; with
    ``attempt``, only if it is still ``in_progress`` under that attempt. Returns whether it completed now (False:
    cancelled, detached or taken over meanwhile; nothing is written). Two round trips: the guarded update, then
    the chunks and the store's usage with the commit."""
    params = {"tenant": tenant_id, "store": store_id, "file": file_id, "chunks": len(chunks),
              "usage": chunk_rows.usage_bytes(chunks, dim), "sha256": content_sha256, "attempt": attempt}

    def write_chunks(conn: psycopg.Connection) -> None:
        chunk_rows.insert_file_chunks(conn, tenant_id, store_id, file_id, chunks, vectors, dim=dim)

    return bool(_transition(conn, tenant_id, store_id, lambda: _returning(conn, _COMPLETE, params), write_chunks))


def fail(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, error: LastError,
         attempt: int | None = None) -> bool:
    """Mark a file ``failed`` with ``last_error = error`` and remove its chunks; with ``attempt``, only if it is
    still ``in_progress`` under that attempt. Returns whether it failed now."""
    params = {"tenant": tenant_id, "store": store_id, "file": file_id, "attempt": attempt, "error": Jsonb(error)}
    return bool(_transition(conn, tenant_id, store_id, lambda: _returning(conn, _FAIL, params)))


def settle(conn: psycopg.Connection, *, max_attempts: int, tenant_id: str | None = None,
           store_id: str | None = None, unclaimed_after_s: float | None = None) -> int:
    """Fail every stuck file — its last allowed lease expired (its workers died), or, with ``unclaimed_after_s``
    (seconds), no worker claimed it for that long — with ``last_error.code = "server_error"``. Scoped to a tenant
    and/or store when given (settle-on-read), else every tenant's (run as the owner); at most
    :data:`SETTLE_LIMIT` per call. Returns how many were failed."""
    query = {"max_attempts": max_attempts, "tenant": tenant_id, "store": store_id,
             "unclaimed_after": unclaimed_after_s, "limit": SETTLE_LIMIT}
    failed = 0
    for tenant, store, file_id, unclaimed in conn.execute(_FIND_STUCK, query).fetchall():
        message = (f"No worker picked the file up within {unclaimed_after_s:.0f} seconds." if unclaimed else
                   f"Processing did not finish after {max_attempts} attempts (the worker stopped).")
        params = {**query, "tenant": tenant, "store": store, "file": file_id,
                  "error": Jsonb({"code": "server_error", "message": message})}
        failed += len(_transition(conn, tenant, store, functools.partial(_returning, conn, _FAIL_STUCK, params)))
    return failed


def cancel_batch_files(conn: psycopg.Connection, tenant_id: str, store_id: str, batch_id: str) -> list[str]:
    """Cancel the batch's files still ``in_progress`` (removing any chunks an earlier attachment left); returns
    their ids. Cancelling twice changes nothing."""
    params = {"tenant": tenant_id, "batch": batch_id}
    return _transition(conn, tenant_id, store_id, lambda: _returning(conn, _CANCEL_BATCH_FILES, params))


def detach(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> bool:
    """Remove a file from a store with its chunks, their statistics and its processing versions; False if it was
    not attached."""
    params = {"tenant": tenant_id, "store": store_id, "file": file_id}

    def change() -> list[tuple[str, int]]:
        conn.execute(_FORGET_VERSIONS, params)
        # Chunks first, while the row they reference exists: its deletion would cascade to them unaccounted.
        chunk_rows.delete_file_chunks(conn, tenant_id, store_id, [file_id])
        return _returning(conn, _DETACH, params)

    return bool(_transition(conn, tenant_id, store_id, change, chunks_deleted=True))


def _transition(conn: psycopg.Connection, tenant_id: str, store_id: str,
                change: Callable[[], list[tuple[str, int]]],
                write_chunks: Callable[[psycopg.Connection], None] | None = None, *,
                chunks_deleted: bool = False) -> list[str]:
    """The one transition: lock the store → ``change`` the attachment rows (returns the files it changed, each
    with the change of its ``usage_bytes``) → delete those files' chunks (unless ``change`` did) →
    ``write_chunks`` (completion) → add the changes to the store's ``usage_bytes``. Nothing past the change runs
    when it changed no row. Pipelined: the lock goes with the change, the rest with the commit."""
    with atomic(conn), pipeline(conn):
        chunk_rows.lock_store(conn, tenant_id, store_id)
        changed = change()
        if changed:
            if not chunks_deleted:
                chunk_rows.delete_file_chunks(conn, tenant_id, store_id, [file_id for file_id, _ in changed])
            if write_chunks is not None:
                write_chunks(conn)
            delta = sum(d for _, d in changed)
            if delta or write_chunks is not None:
                chunk_rows.add_usage(conn, tenant_id, store_id, delta, touch=write_chunks is not None)
    return [file_id for file_id, _ in changed]


def _returning(conn: psycopg.Connection, statement: str, params: dict[str, Any]) -> list[tuple[str, int]]:
    """``(file_id, usage change in bytes)`` of the rows ``statement`` changed."""
    return [(row[0], int(row[1])) for row in conn.execute(statement, params).fetchall()]


def _not_attached(store_id: str, file_id: str) -> NotFoundError:
    return NotFoundError(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
