"""The Qdrant backend's writer: make Qdrant's points of one file (or one store) equal to Postgres.

What the generic sync (:mod:`chalicelib.search.backends.sync`) and ``engram stores reindex`` call through the
port's writer (:class:`~chalicelib.search.backends.qdrant.QdrantBackend`). A point's id is its chunk's id; its
payload the tenant, store, file and attributes (:mod:`qdrant_points`); its vectors the chunk's embedding, read
back from the tenant's embedding cache (a vector missing there is embedded again, with the store's model), and its
BM25 term weights. Every step is idempotent: upsert the file's points, then delete the file's others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.errors import ConfigurationError
from chalicelib.qdrant import TENANT_FIELD, QdrantTransport, collection_name
from chalicelib.search.backends.qdrant_points import point
from chalicelib.store import embedding_cache
from chalicelib.store import vector_index_outbox as outbox

__all__ = ["UPSERT_BATCH", "store_scope", "write_file"]

# Points per upsert request (Qdrant's default request limit is 32 MiB: 256 384-d points are ~0.5 MB of JSON).
UPSERT_BATCH = 256


def write_file(conn: psycopg.Connection, settings: Settings, transport: QdrantTransport, tenant_id: str,
               store_id: str, store: outbox.StoreRow, file_id: str, *, points: bool = True, upsert: bool = True,
               delete_stale: bool = True) -> int:
    """Make Qdrant's points of one file equal to its chunks in Postgres (none when ``points`` is False): upsert
    them (unless ``upsert`` is False: they are already), then delete the file's others (unless ``delete_stale``
    is False). Returns the points upserted. (The adapter's ``write_file``.)

    Raises:
        QdrantError: Qdrant failed (nothing in Postgres changed; running it again finishes the job).
        ConfigurationError / UpstreamError: see :func:`_vectors`.
    """
    name = collection_name(settings, store.embedding_dim)
    scope = [*store_scope(tenant_id, store_id), {"key": "file_id", "match": {"value": file_id}}]
    if not points:
        ids: list[int] = []
    elif not upsert:
        ids = outbox.chunk_ids(conn, tenant_id, store_id, file_id)
    else:
        # vectors from the cache and the store's average length as it is now (after the swap), in one statement
        rows, avgdl = outbox.chunks_and_avgdl(conn, tenant_id, store_id, file_id, model=store.embedding_model)
        ids = [r.id for r in rows]
        if rows:
            transport.ensure_collection(name, store.embedding_dim)
            missing = [r.text for r in rows if r.vector is None]
            fetched = iter(_vectors(conn, settings, tenant_id, store, missing) if missing else [])
            vectors = [_floats(r.vector) if r.vector is not None else next(fetched) for r in rows]
            built = [point(r.id, tenant_id, store_id, file_id, v, r.terms, r.length, avgdl or store.avgdl,
                           r.attributes)
                     for r, v in zip(rows, vectors, strict=True)]
            for start in range(0, len(built), UPSERT_BATCH):
                transport.upsert(name, built[start:start + UPSERT_BATCH])
    if delete_stale:
        transport.delete(name, {"must": scope, "must_not": [{"has_id": ids}]} if ids else {"must": scope})
    return len(ids) if upsert else 0


def store_scope(tenant_id: str, store_id: str) -> list[dict[str, Any]]:
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
