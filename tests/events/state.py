"""Reading the pipeline's state straight from Postgres (as the owner) for assertions: per-file statuses and chunk
counts, the invariants that must hold at every moment, and a snapshot to compare runs. For stores on Qdrant the
invariants include Qdrant: every file with nothing queued for it has exactly its chunks as points."""

from __future__ import annotations

from typing import Any

from chalicelib.store.db import connect

_FILES = """
SELECT sf.tenant_id, s.name, f.filename, sf.file_id, sf.status, sf.last_error, sf.chunk_count, sf.attributes,
       sf.attempts
FROM vector_store_files sf JOIN files f ON f.id = sf.file_id JOIN vector_stores s ON s.id = sf.vector_store_id
ORDER BY 1, 2, 3"""
_CHUNKS_PER_FILE = """
SELECT sf.vector_store_id, sf.file_id, sf.chunk_count, count(c.id), count(DISTINCT c.chunk_index),
       coalesce(max(c.chunk_index), -1)
FROM vector_store_files sf LEFT JOIN chunks c ON c.vector_store_id = sf.vector_store_id AND c.file_id = sf.file_id
GROUP BY 1, 2, 3"""
_STORE_TOTALS = """
SELECT s.id, s.chunk_count, (SELECT count(*) FROM chunks c WHERE c.vector_store_id = s.id),
       s.usage_bytes, (SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files sf WHERE sf.vector_store_id = s.id)
FROM vector_stores s"""


# Each file of a Qdrant store with no sync queued for it, with its chunk ids (files whose chunks are all gone too).
_QDRANT_FILES = """
SELECT s.tenant_id, s.id, s.name, f.file_id, s.embedding_dim,
       coalesce((SELECT array_agg(c.id) FROM chunks c WHERE c.vector_store_id = s.id AND c.file_id = f.file_id), '{}')
FROM vector_stores s
JOIN (SELECT vector_store_id, file_id FROM vector_store_files
      UNION SELECT vector_store_id, file_id FROM chunks) AS f ON f.vector_store_id = s.id
WHERE s.backend = 'qdrant' AND NOT EXISTS (SELECT 1 FROM vector_index_outbox q
                                           WHERE q.vector_store_id = s.id AND q.file_id IN (f.file_id, ''))"""


def _qdrant_points(settings, tenant: str, store: str, file_id: str, dim: int) -> list[int]:
    """The ids of the file's points in Qdrant, ascending."""
    from chalicelib import deps
    from chalicelib.qdrant import DENSE, TENANT_FIELD, collection_name

    flt = {"must": [{"key": TENANT_FIELD, "match": {"value": tenant}},
                    {"key": "vector_store_id", "match": {"value": store}},
                    {"key": "file_id", "match": {"value": file_id}}]}
    [found] = deps.qdrant(settings).query_batch(collection_name(settings, dim), [
        {"query": [1.0] * dim, "using": DENSE, "filter": flt, "limit": 10_000, "params": {"exact": True}}])
    return sorted(point for point, _ in found)


def files(settings) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``{(tenant, store name, filename): {file_id, status, last_error, chunk_count, attributes, attempts}}``."""
    with connect(settings) as conn:
        rows = conn.execute(_FILES).fetchall()
    return {(t, s, f): {"file_id": fid, "status": st, "last_error": le, "chunk_count": n, "attributes": a,
                        "attempts": at}
            for t, s, f, fid, st, le, n, a, at in rows}


def check_invariants(settings) -> None:
    """Every file's chunk rows are exactly its recorded count, indexed 0..n-1 once each (one version, never a
    mix); every store's chunk_count and usage equal its rows'; failed/cancelled files have no chunks."""
    with connect(settings) as conn:
        for store, file_id, recorded, rows, distinct, top in conn.execute(_CHUNKS_PER_FILE).fetchall():
            assert rows == recorded == distinct == top + 1, (store, file_id, recorded, rows, distinct, top)
        for store, counted, rows, usage, file_usage in conn.execute(_STORE_TOTALS).fetchall():
            assert counted == rows and usage == file_usage, (store, counted, rows, usage, file_usage)
        bad = conn.execute("SELECT count(*) FROM vector_store_files sf JOIN chunks c USING (vector_store_id, file_id) "
                           "WHERE sf.status IN ('failed', 'cancelled')").fetchone()[0]
        assert bad == 0
    check_qdrant(settings)


def check_qdrant(settings, store_names: tuple[str, ...] | None = None) -> None:
    """Every file of a Qdrant store (of those named, when given) with no sync queued for it has exactly its chunks
    as points in the Qdrant ``settings`` reach."""
    with connect(settings) as conn:
        for tenant, store, name, file_id, dim, ids in conn.execute(_QDRANT_FILES).fetchall():
            if store_names is None or name in store_names:
                points = _qdrant_points(settings, tenant, store, file_id, dim)
                assert points == sorted(ids), (store, file_id, points, ids)


def snapshot(settings) -> dict[str, Any]:
    """Everything a duplicate delivery must not change: files (status, counts, attempts), chunk ids and texts."""
    with connect(settings) as conn:
        chunks = conn.execute("SELECT id, vector_store_id, file_id, chunk_index, md5(text), attributes FROM chunks "
                              "ORDER BY id").fetchall()
        stores = conn.execute("SELECT id, name, chunk_count, usage_bytes FROM vector_stores ORDER BY id").fetchall()
        jobs = conn.execute("SELECT vector_store_id, file_id, version, status, batches_done FROM ingest_jobs "
                            "ORDER BY 1, 2, 3").fetchall()
        staged = conn.execute("SELECT count(*) FROM staged_chunks").fetchone()[0]
    return {"files": files(settings), "chunks": chunks, "stores": stores, "jobs": jobs, "staged": staged}
