"""HNSW over ``vector(384)`` vs ``halfvec(384)`` on one ``search.py`` database: index size, build time, recall@10
and latency of the vector leg's HNSW statement (unfiltered: the big store; ``store 1%``: the small store through
the iterative scan), interleaved per query. Run through ``search.py --index-compare``.

An index of the other type is built beside the database's own (same ``m``, ``ef_construction``,
``maintenance_work_mem``; the build time of the database's own is ``search.py``'s) and dropped afterwards; both statements are the vector leg's (``search.vector``: the SET LOCALs and the query in one
pipelined round trip), differing only in the cast the ORDER BY uses, which picks the index. pgvector stores a
halfvec element in 2 bytes instead of 4 (IEEE half precision: ~3 significant digits), so its graph pages hold twice
the vectors; distances are computed in half precision, so recall may drop.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from common import percentile
from search import DIM, K, WARMUP, auto_mwm, exact_top_k, log, mb, rls_connection

from chalicelib.search.vector import ITERATIVE_MAX_SCAN_TUPLES, MAX_EF_SEARCH
from chalicelib.store import vector_stores
from chalicelib.store.db import connect, one

_CREATE = """CREATE INDEX {name} ON chunks USING hnsw ((embedding::{kind}({dim})) {kind}_cosine_ops)
WITH (m = {m}, ef_construction = {efc}) WHERE embedding_dim = {dim}"""
_QUERY = """SELECT id, (embedding::{kind}({dim}) <=> %(q)s::vector::{kind}({dim})) AS d FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = ANY(%(stores)s) AND embedding_dim = {dim}
ORDER BY (embedding::{kind}({dim}) <=> %(q)s::vector::{kind}({dim})) LIMIT %(limit)s"""
LIMITS = (10, 100)


def _size(conn: psycopg.Connection, name: str) -> int:
    return int(one(conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)))[0])


def _search(conn: psycopg.Connection, kind: str, q: np.ndarray, stores: list[str], limit: int, ef: int) -> list[int]:
    statement = sql.SQL(_QUERY.format(kind=kind, dim=DIM))
    with conn.pipeline(), conn.transaction():
        conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef)))
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        conn.execute(sql.SQL("SET LOCAL hnsw.max_scan_tuples = {}").format(sql.Literal(ITERATIVE_MAX_SCAN_TUPLES)))
        cursor = conn.execute(statement, {"q": q, "tenant": "bench", "stores": stores, "limit": limit})
    return [int(r[0]) for r in sorted(cursor.fetchall(), key=lambda r: r[1])]


def run(url: str, settings: Any, vectors: np.ndarray, queries: np.ndarray, layout: Any, args: Any) -> dict[str, Any]:
    """Build the other type's index, measure both, drop it; returns the comparison (also printed)."""
    out: dict[str, Any] = {}
    n = len(vectors)
    with connect(replace(settings, database_url=url)) as owner:
        own = vector_stores.hnsw_index(owner, DIM).kind
        other = "vector" if own == "halfvec" else "halfvec"
        name = f"chunks_hnsw_{DIM}_{other}_compare"
        owner.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
        owner.execute(sql.SQL("SET maintenance_work_mem = {}").format(
            sql.Literal(args.maintenance_work_mem or auto_mwm(n))))
        owner.execute(sql.SQL("SET max_parallel_maintenance_workers = {}").format(sql.Literal(args.build_workers)))
        started = time.perf_counter()
        owner.execute(_CREATE.format(name=name, kind=other, dim=DIM, m=vector_stores.HNSW_M,
                                     efc=vector_stores.HNSW_EF_CONSTRUCTION))
        out[f"{other}_build_s"] = round(time.perf_counter() - started, 1)
        out[f"{own}_index_bytes"] = _size(owner, vector_stores.hnsw_index_name(DIM))
        out[f"{other}_index_bytes"] = _size(owner, name)
        owner.execute("ANALYZE chunks")
    log(f"  {other} index built beside the {own} one in {out[f'{other}_build_s']}s: halfvec "
        f"{mb(out['halfvec_index_bytes'])}, vector {mb(out['vector_index_bytes'])} (ratio "
        f"{out['halfvec_index_bytes'] / out['vector_index_bytes']:.2f})")
    try:
        conn = rls_connection(url, settings)
        scopes = {"all": ([layout.big.id], np.arange(layout.n_small, n), layout.big.chunk_count),
                  "store 1%": ([layout.small.id], np.arange(0, layout.n_small), layout.small.chunk_count)}
        timed = queries[WARMUP:]
        for case, (stores, rows, scope_rows) in scopes.items():
            top, kth = exact_top_k(rows, vectors, timed, K)
            share = scope_rows / n
            for limit in LIMITS:
                ef = min(MAX_EF_SEARCH, max(settings.hnsw_ef_search, limit, int(np.ceil(2 * limit / share))))
                for q in queries[:WARMUP]:
                    for kind in ("vector", "halfvec"):
                        _search(conn, kind, q, stores, limit, ef)
                times: dict[str, list[float]] = {"vector": [], "halfvec": []}
                recall: dict[str, list[float]] = {"vector": [], "halfvec": []}
                for qi, q in enumerate(timed):
                    for kind in ("vector", "halfvec"):
                        t0 = time.perf_counter()
                        got = _search(conn, kind, q, stores, limit, ef)
                        times[kind].append(1000 * (time.perf_counter() - t0))
                        d = 1.0 - vectors[_rows_of(conn, got[:K])] @ q
                        recall[kind].append(float(np.sum(d <= kth[qi] + 1e-6)) / min(K, len(rows)))
                row = {kind: {"p50_ms": round(percentile(times[kind], 50), 2),
                              "p95_ms": round(percentile(times[kind], 95), 2),
                              "recall@10": round(float(np.mean(recall[kind])), 4)} for kind in times}
                out[f"{case}@{limit}"] = row
                log(f"  {case:8s} limit {limit:3d} ef {ef:4d}: " + "; ".join(
                    f"{kind} p50 {r['p50_ms']:.2f} ms p95 {r['p95_ms']:.2f} ms recall@10 {r['recall@10']:.4f}"
                    for kind, r in row.items()))
        conn.close()
    finally:
        with connect(replace(settings, database_url=url)) as owner:
            owner.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))
    return out


_ROWS: dict[int, int] = {}


def _rows_of(conn: psycopg.Connection, ids: list[int]) -> np.ndarray:
    """Generated row numbers of chunk ids (file name = first row, plus the chunk index), cached."""
    missing = [i for i in ids if i not in _ROWS]
    if missing:
        for cid, filename, index in conn.execute(
                "SELECT c.id, f.filename, c.chunk_index FROM chunks c JOIN files f ON f.id = c.file_id "
                "WHERE c.id = ANY(%s)", (missing,)).fetchall():
            _ROWS[int(cid)] = int(filename[3:11]) + int(index)
    return np.array([_ROWS[i] for i in ids], dtype=np.int64)
