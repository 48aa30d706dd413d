"""The generic sync: make every backend that keeps its own copy of a store's candidates (any backend not
``in_postgres``) equal to Postgres, through the transactional outbox.

Postgres is the record, and every change to such a store's chunks queues the file in the same transaction, with
the store's backend (the triggers of migrations 0023 and 0026, :mod:`chalicelib.store.vector_index_outbox`),
whichever path made it: an ingest's swap, an SQS redelivery, a re-ingest under the same file id, a detach or
delete, an attribute update, a store deleted, expired or moved to another backend. Syncing an entry, in one
transaction holding the file's advisory lock:

1. read the entry's ``seq`` and the store's row;
2. hand the file to the writer of the backend the entry names (:meth:`~chalicelib.search.backends.VectorBackend.
   write_file`: upsert its points, delete its others; none at all when the store is on another backend now), or
   the whole store to ``delete_store`` (a deleted store's entry, ``file_id`` ``''``);
3. remove the entry unless the file was queued again after step 1 read its ``seq`` — that change is synced next.

Every step is idempotent, so a sync interrupted anywhere (a crash, a backend outage) is simply run again. Until a
file is synced the backend may hold points of chunks that are gone; they are never returned, because a candidate
resolves to a chunk only through Postgres.

Who syncs — the call sites name no backend:

- inside the transaction that swaps a file's chunks in and marks it ``completed``: :func:`lock_ahead` before the
  swap, :func:`write_ahead` after it (the points written before the commit, so the file is searchable the moment it
  shows ``completed``; migration 0024 records that);
- after any write that changed chunks: :func:`after_write` (the file's, store's or tenant's queued entries, now);
- everything else (retries after a failure): the ``sync_vector_index`` job, :func:`sync_pending`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from chalicelib.config import Settings
from chalicelib.errors import EngramError
from chalicelib.search.backends import VectorBackend, for_backend
from chalicelib.store import vector_index_outbox as outbox

__all__ = ["PENDING_BATCH", "SyncCounts", "after_write", "index_state", "lock_ahead", "settle", "sync_pending",
           "write_ahead"]

logger = logging.getLogger("engram.search.sync")

# Entries one call of sync_pending reads at a time.
PENDING_BATCH = 100


@dataclass(slots=True)
class SyncCounts:
    """What a sync did: entries ``synced``, entries that ``failed`` (kept, with their error), ``skipped`` (another
    sync held them), and ``points`` upserted."""

    synced: int = 0
    failed: int = 0
    skipped: int = 0
    points: int = 0

    def add(self, other: SyncCounts) -> None:
        """Add ``other``'s counts to these."""
        self.synced += other.synced
        self.failed += other.failed
        self.skipped += other.skipped
        self.points += other.points

    def as_dict(self) -> dict[str, int]:
        """The counts by name (a job's result)."""
        return {"synced_files": self.synced, "failed_files": self.failed, "skipped_files": self.skipped,
                "points": self.points}


def _writer(settings: Settings, backend: str, dimension: int) -> VectorBackend:
    return for_backend(backend, settings, dimension)


def sync_pending(conn: psycopg.Connection, settings: Settings, *, limit: int = PENDING_BATCH,
                 tenant_id: str | None = None, store_id: str | None = None, file_id: str | None = None,
                 wait: bool = False) -> SyncCounts:
    """Sync up to ``limit`` queued entries (oldest first; one tenant's, store's or file's when given) on ``conn``
    (autocommit: each entry is its own transaction). An entry another sync is working on is skipped, or with
    ``wait`` (a caller whose own change must be visible when it returns) synced once that sync ends. A failing
    entry is kept with its error and counted; the rest go on.

    Raises:
        psycopg.Error: the database failed (the entries not synced stay queued).
    """
    counts = SyncCounts()
    for entry in outbox.pending(conn, limit=limit, tenant_id=tenant_id, store_id=store_id, file_id=file_id):
        try:
            with conn.transaction():
                claimed = outbox.claim(conn, entry, wait=wait)
                if claimed is None:
                    counts.skipped += 1
                    continue
                counts.points += _sync(conn, settings, entry, upsert=not claimed.written)
                outbox.done(conn, entry, claimed.seq)
            counts.synced += 1
        except EngramError as error:
            counts.failed += 1
            logger.warning("%s sync of %s/%s failed: %s", entry.backend, entry.vector_store_id, entry.file_id or "*",
                           error)
            outbox.failed(conn, entry, f"{type(error).__name__}: {error}")
    return counts


def after_write(conn: psycopg.Connection, settings: Settings, *, tenant_id: str | None = None,
                store_id: str | None = None, file_id: str | None = None) -> SyncCounts:
    """The after-write hook: sync now what a committed write queued (its file's, store's or tenant's entries), so
    searches see the change at once, waiting for a sync of the same file that is under way. A failure stays queued
    for the ``sync_vector_index`` job and is not raised (the write is committed either way); a store whose backend is
    ``in_postgres`` has nothing queued (one indexed lookup). Inside a caller's transaction nothing happens: what it
    queued is not committed yet, and a backend must never hold points of chunks a rollback could take back without
    their entry (the job syncs them once committed)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return SyncCounts()
    return sync_pending(conn, settings, tenant_id=tenant_id, store_id=store_id, file_id=file_id, wait=True)


def lock_ahead(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str,
               file_id: str) -> outbox.StoreRow | None:
    """Inside the transaction about to swap a file's chunks in, before it writes them: when the store's backend
    keeps its own copy, take the file's sync lock (waiting for a sync of it to end) and return the store's row —
    truthy: hand it to :func:`write_ahead` —, else None. Taken before the swap's triggers queue the file, so it and
    a sync, which locks then removes the entry, never wait on each other. One statement (issue 33 §4: the row and
    the lock together, the row reused by the write)."""
    store, locked = outbox.store_locked(conn, tenant_id, store_id, file_id)
    return store if locked else None


def write_ahead(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str, file_id: str, *,
                store: outbox.StoreRow | None = None) -> int:
    """Inside the transaction that swapped a file's chunks in, holding :func:`lock_ahead`'s lock: write their points
    before it commits and record that in its entry, leaving the older version's points to the :func:`after_write`
    after the commit (a rollback leaves points of no chunk, never returned). ``store``: what :func:`lock_ahead`
    returned (else it is read again). Returns the points upserted; a backend failure is logged, not raised (the
    sync after the commit writes them, or the job does)."""
    store = store or outbox.store(conn, tenant_id, store_id)
    if store is None:
        return 0
    writer = _writer(settings, store.backend, store.embedding_dim)
    if writer.in_postgres:
        return 0
    try:
        upserted = writer.write_file(conn, tenant_id, store_id, store, file_id, delete_stale=False)
    except EngramError as error:
        logger.warning("%s write of %s/%s before its commit failed (synced later): %s", store.backend, store_id,
                       file_id, error)
        return 0
    outbox.written(conn, store_id, file_id)
    return upserted


def settle(conn: psycopg.Connection, settings: Settings) -> None:
    """Let every backend that keeps its own copy build what was written since its last build (per embedding
    dimension of its stores): what every path that writes calls when it is done (the ``sync_vector_index`` job,
    ``engram ingest``, a store's move, the benchmarks' loads). Cheap when nothing was written.

    Raises:
        EngramError: a backend failed (or cannot be reached from this process: the embedded engine held by
            another one, whose ``sync_vector_index`` job builds it).
    """
    for backend, dims in outbox.external_dimensions(conn).items():
        _writer(settings, backend, dims[0]).settle(dims)


def index_state(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str) -> dict[str, object]:
    """The state of a store's candidates in its backend, for people: ``{"backend", "indexed" (bool or None:
    unknown here), "points" (int or None), "pending_files" (files queued for the backend's writer), "detail"}``
    (:meth:`VectorBackend.index_state`); None values when the store does not exist."""
    store = outbox.store(conn, tenant_id, store_id)
    if store is None:
        return {"backend": None, "indexed": None, "points": None, "pending_files": 0, "detail": "no such store"}
    state = _writer(settings, store.backend, store.embedding_dim).index_state(conn, tenant_id, store_id, store)
    return {"backend": store.backend, "indexed": state.indexed, "points": state.points,
            "pending_files": outbox.pending_count(conn, tenant_id=tenant_id, store_id=store_id),
            "detail": state.detail}


def _sync(conn: psycopg.Connection, settings: Settings, entry: outbox.Entry, *, upsert: bool) -> int:
    """Make the entry's points match Postgres (its current points already written unless ``upsert``); returns the
    points upserted."""
    if entry.file_id == "":  # the store is gone (or moved away): all its points go
        if entry.embedding_dim:
            _writer(settings, entry.backend, entry.embedding_dim).delete_store(entry.tenant_id, entry.vector_store_id,
                                                                               entry.embedding_dim)
        return 0
    store = outbox.store(conn, entry.tenant_id, entry.vector_store_id)
    if store is None:
        return 0  # deleted: its own entry removes every point
    writer = _writer(settings, entry.backend, store.embedding_dim)
    return writer.write_file(conn, entry.tenant_id, entry.vector_store_id, store, entry.file_id,
                             points=store.backend == entry.backend, upsert=upsert)  # moved away: its points go
