"""The Qdrant backend's write half: make Qdrant's points of each queued file equal to its chunks in Postgres.

Postgres is the record, and every change to a Qdrant store's chunks queues the file in the same transaction (the
triggers of migration 0023, :mod:`chalicelib.store.vector_index_outbox`), whichever path made it: an ingest's swap,
an SQS redelivery, a re-ingest under the same file id, a detach or delete, an attribute update, a store deleted or
expired. Syncing an entry, in one transaction holding the file's advisory lock:

1. read the entry's ``seq``, then the file's chunks (their ids, lexemes, attributes) and their vectors from the
   tenant's embedding cache (a vector missing there is embedded again, with the store's model);
2. upsert their points (point id = chunk id), then delete the file's other points (an older version's);
3. remove the entry unless the file was queued again after step 1 read its ``seq`` — that change is synced next.

Every step is idempotent, so a sync interrupted anywhere (a crash, a Qdrant outage) is simply run again. Until a
file is synced Qdrant may hold points of chunks that are gone; they are never returned, because a candidate
resolves to a chunk only through Postgres (:mod:`chalicelib.search.backends`).

Who syncs: the ingestion path, twice — inside the transaction that swaps a file's chunks in and marks it
``completed`` it upserts their points before the commit (:func:`lock_ahead`, :func:`write_ahead`), so a file is
searchable the moment it shows ``completed``; after the commit :func:`sync_file` deletes the older version's points
(the entry records that its points are written: migration 0024) — and the ``sync_vector_index`` job for everything
else (deletes, attribute updates, retries after a failure).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.errors import ConfigurationError, EngramError
from chalicelib.qdrant import TENANT_FIELD, QdrantTransport, collection_name
from chalicelib.search.backends.qdrant_points import point
from chalicelib.store import embedding_cache
from chalicelib.store import vector_index_outbox as outbox

__all__ = ["UPSERT_BATCH", "SyncCounts", "lock_ahead", "sync_file", "sync_pending", "write_ahead", "write_file"]

logger = logging.getLogger("engram.search.qdrant")

# Points per upsert request (Qdrant's default request limit is 32 MiB: 256 384-d points are ~0.5 MB of JSON).
UPSERT_BATCH = 256
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

    def as_dict(self) -> dict[str, int]:
        """The counts by name (a job's result)."""
        return {"synced_files": self.synced, "failed_files": self.failed, "skipped_files": self.skipped,
                "points": self.points}


def sync_pending(conn: psycopg.Connection, settings: Settings, *, limit: int = PENDING_BATCH,
                 tenant_id: str | None = None, store_id: str | None = None, file_id: str | None = None,
                 transport: QdrantTransport | None = None, wait: bool = False) -> SyncCounts:
    """Sync up to ``limit`` queued entries (oldest first; one tenant's, store's or file's when given) on ``conn``
    (autocommit: each entry is its own transaction). An entry another sync is working on is skipped, or with
    ``wait`` (a caller whose own change must be visible when it returns) synced once that sync ends. A failing
    entry is kept with its error and counted; the rest go on.

    Raises:
        psycopg.Error: the database failed (the entries not synced stay queued).
    """
    counts = SyncCounts()
    target = transport or deps.qdrant(settings)
    for entry in outbox.pending(conn, limit=limit, tenant_id=tenant_id, store_id=store_id, file_id=file_id):
        try:
            with conn.transaction():
                claimed = outbox.claim(conn, entry, wait=wait)
                if claimed is None:
                    counts.skipped += 1
                    continue
                counts.points += _sync(conn, settings, target, entry, upsert=not claimed.written)
                outbox.done(conn, entry, claimed.seq)
            counts.synced += 1
        except EngramError as error:
            counts.failed += 1
            logger.warning("Qdrant sync of %s/%s failed: %s", entry.vector_store_id, entry.file_id or "*", error)
            outbox.failed(conn, entry, f"{type(error).__name__}: {error}")
    return counts


def sync_file(conn: psycopg.Connection, settings: Settings, store_id: str, file_id: str) -> SyncCounts:
    """Sync one file now if it is queued (right after its chunks were swapped in); a failure stays queued for the
    ``sync_vector_index`` job and is not raised (the file's chunks are committed either way). Inside a caller's
    transaction nothing happens: what it queued is not committed yet, and Qdrant must never hold points of chunks a
    rollback could take back without their entry (the job syncs them once committed)."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return SyncCounts()
    return sync_pending(conn, settings, limit=1, store_id=store_id, file_id=file_id, wait=True)


def lock_ahead(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> bool:
    """Inside the transaction about to swap a file's chunks in, before it writes them: when the store lives on
    Qdrant, take the file's sync lock (waiting for a sync of it to end) and return True. Taken before the swap's
    triggers queue the file, so it and a sync, which locks then removes the entry, never wait on each other."""
    store = outbox.store(conn, tenant_id, store_id)
    return store is not None and store.backend == "qdrant" and outbox.lock(conn, store_id, file_id)


def write_ahead(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str, file_id: str) -> int:
    """Inside the transaction that swapped a file's chunks in, holding :func:`lock_ahead`'s lock: upsert their
    points before it commits and record that in its entry, leaving the older version's points to the
    :func:`sync_file` after the commit (a rollback leaves points of no chunk, never returned). Returns the points
    upserted; a Qdrant failure is logged, not raised (the sync after the commit writes them, or the job does)."""
    store = outbox.store(conn, tenant_id, store_id)
    if store is None or store.backend != "qdrant":
        return 0
    try:
        upserted = write_file(conn, settings, deps.qdrant(settings), tenant_id, store_id, store, file_id,
                              delete_stale=False)
    except EngramError as error:
        logger.warning("Qdrant write of %s/%s before its commit failed (synced later): %s", store_id, file_id, error)
        return 0
    outbox.written(conn, store_id, file_id)
    return upserted


def _sync(conn: psycopg.Connection, settings: Settings, transport: QdrantTransport, entry: outbox.Entry, *,
          upsert: bool) -> int:
    """Make the entry's points match Postgres (its current points already upserted unless ``upsert``); returns
    the points upserted."""
    if entry.file_id == "":  # the store is gone: all its points go
        if entry.embedding_dim:
            transport.delete(collection_name(settings, entry.embedding_dim),
                             {"must": _store_scope(entry.tenant_id, entry.vector_store_id)})
        return 0
    store = outbox.store(conn, entry.tenant_id, entry.vector_store_id)
    if store is None:
        return 0  # deleted: its own entry removes every point
    return write_file(conn, settings, transport, entry.tenant_id, entry.vector_store_id, store, entry.file_id,
                      points=store.backend == "qdrant", upsert=upsert)  # moved back to pgvector: its points go


def write_file(conn: psycopg.Connection, settings: Settings, transport: QdrantTransport, tenant_id: str,
               store_id: str, store: outbox.StoreRow, file_id: str, *, points: bool = True, upsert: bool = True,
               delete_stale: bool = True) -> int:
    """Make Qdrant's points of one file equal to its chunks in Postgres (none when ``points`` is False): upsert
    them (unless ``upsert`` is False: they are already), then delete the file's others (unless ``delete_stale``
    is False). Returns the points upserted. Also what ``engram stores reindex`` runs per file.

    Raises:
        QdrantError: Qdrant failed (nothing in Postgres changed; running it again finishes the job).
        ConfigurationError / UpstreamError: see :func:`_vectors`.
    """
    name = collection_name(settings, store.embedding_dim)
    scope = [*_store_scope(tenant_id, store_id), {"key": "file_id", "match": {"value": file_id}}]
    if not points:
        ids: list[int] = []
    elif not upsert:
        ids = outbox.chunk_ids(conn, tenant_id, store_id, file_id)
    else:
        rows = outbox.chunks(conn, tenant_id, store_id, file_id)
        ids = [r.id for r in rows]
        if rows:
            transport.ensure_collection(name, store.embedding_dim)
            vectors = _vectors(conn, settings, tenant_id, store, [r.text for r in rows])
            built = [point(r.id, tenant_id, store_id, file_id, v, r.terms, r.length, store.avgdl, r.attributes)
                     for r, v in zip(rows, vectors, strict=True)]
            for start in range(0, len(built), UPSERT_BATCH):
                transport.upsert(name, built[start:start + UPSERT_BATCH])
    if delete_stale:
        transport.delete(name, {"must": scope, "must_not": [{"has_id": ids}]} if ids else {"must": scope})
    return len(ids) if upsert else 0


def _store_scope(tenant_id: str, store_id: str) -> list[dict[str, Any]]:
    return [{"key": TENANT_FIELD, "match": {"value": tenant_id}},
            {"key": "vector_store_id", "match": {"value": store_id}}]


def _vectors(conn: psycopg.Connection, settings: Settings, tenant_id: str, store: outbox.StoreRow,
             texts: Sequence[str]) -> list[Any]:
    """The texts' vectors from the tenant's embedding cache; those missing (a cache entry purged) are embedded
    again with the configured embedder, which must be the store's model.

    Raises:
        ConfigurationError: vectors are missing and the configured embedder is not the store's model.
        UpstreamError: embedding them failed.
    """
    hashes = [embedding_cache.text_hash(t) for t in texts]
    cached = embedding_cache.lookup(conn, tenant_id, store.embedding_model, hashes)
    missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in cached}
    if missing:
        embedder = deps.embedder(settings)
        if embedder.model != store.embedding_model:
            raise ConfigurationError(f"{len(missing)} vectors of model {store.embedding_model!r} are not in the "
                                     f"embedding cache, and the configured embedder is {embedder.model!r}.")
        fresh = list(zip(missing, embedder.embed(list(missing.values())), strict=True))
        embedding_cache.store(conn, tenant_id, store.embedding_model, fresh)
        cached.update(fresh)
    return [_floats(cached[h]) for h in hashes]


def _floats(vector: Any) -> list[float]:
    """A vector (pgvector ``Vector``, numpy array or list) as floats."""
    values = vector.to_list() if hasattr(vector, "to_list") else vector
    return [float(x) for x in values]
