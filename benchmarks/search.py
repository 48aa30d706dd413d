"""Vector-search latency and recall@10 against exact search, on synthetic 384-d vectors, through Engram's real
write path and vector leg.

Per size N (``--sizes``, default ``10000,100000``; 1,000,000 works too but needs ~1.5 GB of vectors in RAM and
~2.5 GB on disk, a few minutes of loading and a long HNSW build — 100k took 45 s on 2 busy cores, so expect
10–30 min — with ``maintenance_work_mem`` ≈ 2.5 GB, set automatically, so the graph fits in memory) one database ``engram_bench_search_<N>`` on the
configured server (``DATABASE_URL``, else the embedded Postgres under ``ENGRAM_DATA_DIR``) holds one tenant with

* a big store of 99 % of the rows (the unfiltered case) and
* a small store of 1 % of the rows (the filtered case: the search is scoped to one store, so with HNSW the
  other 99 % of the index must be filtered away),

each written as files of at most ``ROWS_PER_FILE`` chunks through ``attachments.complete`` (one INSERT; the
triggers keep the BM25 statistics), the transaction the ingestion engine uses, with short synthetic texts.
The HNSW index (``vector_stores.ensure_hnsw_index``) is dropped before the bulk load and built afterwards with
``maintenance_work_mem`` and ``max_parallel_maintenance_workers`` raised; its build time is reported. A re-run
reuses a database whose stores already hold the same data (generator, seed and row counts match).

Data: vectors are *clustered*, not uniform noise, because real embeddings are clustered and of low intrinsic
dimension (uniform noise in 384-d is an unrealistically hard, structureless case for HNSW). Each vector is one of
``CENTROIDS`` random unit centroids (cluster sizes Dirichlet-skewed) plus Gaussian noise whose per-axis standard
deviation decays as a power law (a few dominant directions; a different random axis permutation per cluster),
with noise norm ≈ ``NOISE_NORM`` (cosine to its centroid ≈ 0.7), then normalised to unit length. Queries
(``--queries``, default 200, plus 20 warm-up queries that are not timed) are fresh draws from the same
distribution — near the data, never equal to a stored vector. numpy, fixed seed (``--seed``).

Measured through ``chalicelib.search.vector.vector_search`` with the configured ``hnsw_ef_search`` and
``exact_scan_max_rows`` (``ENGRAM_HNSW_EF_SEARCH``, ``ENGRAM_EXACT_SCAN_MAX_ROWS``), at two limits: k = 10, and
100 = what ``search.service.search`` asks the vector leg for when a client wants ≤ 50 results
(``max(MIN_CANDIDATES, 2 · limit)``), of which recall@10 scores the first 10. Cases:

* ``unfiltered`` — the big store;
* ``filtered``   — the small store (exact scan while it holds ≤ ``exact_scan_max_rows`` chunks);
* ``filtered_hnsw`` (diagnostic) — the small store with ``exact_scan_max_rows = 0``, i.e. forced through the
  HNSW pass (ef scaled by the scope's share) and its exact fallback.

``paths`` counts the passes vector_search made per query (``hnsw``, ``exact``, ``hnsw+exact`` = HNSW came up
short and the exact fallback ran); the planner may still answer the HNSW statement from the btree when the scope
is small (``--explain`` prints each case's plan).

Ground truth is exact cosine top-10 in numpy over the store's vectors. recall@10 counts a returned row as a hit
when its exact distance is ≤ the true 10th distance + 1e-6 (tie-tolerant; equal to set recall without ties).
The full ``search()`` path (embedding, keyword leg, fusion, fetch) is not timed: it needs an embedder, and the
vector leg is what scales with N.

    ./dev python benchmarks/search.py --sizes 10000,100000
    cd benchmarks && python search.py --sizes 100000 --ef-sweep 40,100,200,400
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from common import bench_settings, percentile

import chalicelib.search.vector as vector_leg
from chalicelib.store.chunks import Chunk
from chalicelib.search.service import MIN_CANDIDATES
from chalicelib.search.vector import VectorScope, vector_search
from chalicelib.store import attachments
from chalicelib.store import files as file_rows
from chalicelib.store import vector_stores
from chalicelib.store.db import capabilities, connect, database_url
from chalicelib.store.migrate import migrate

GENERATOR = "clustered-v1"  # bump when the data generator changes: stored databases are then rebuilt
DIM = 384
CENTROIDS = 300
NOISE_NORM = 1.0  # expected |noise| before normalising; cosine(vector, centroid) ≈ 1 / sqrt(1 + NOISE_NORM²)
NOISE_DECAY = 0.7  # per-axis noise std ∝ (axis rank)^-NOISE_DECAY
SMALL_SHARE = 0.01  # the filtered store's share of the rows
ROWS_PER_FILE = 5000  # chunks per file (one COPY each)
MIN_FILES_PER_STORE = 4
TENANT = "bench"
K = 10
WARMUP = 20
TARGET_SIZE, TARGET_RECALL, TARGET_P95_MS = 100_000, 0.95, 20.0
# The same statement search.service uses to size ef_search (chunks of this dimension in all stores).
_INDEXED_ROWS = "SELECT coalesce(sum(chunk_count), 0) FROM vector_stores WHERE embedding_dim = %s"
_VOCAB_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "du", "ga", "ho", "ji", "ze", "fu", "be"]


# ---------------------------------------------------------------------------------------------------- data


def generate(seed: int, n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(vectors n × DIM, cluster label per vector, queries n_queries × DIM)``, float32, unit length."""
    rng = np.random.default_rng(seed)
    centroids = _normalise(rng.standard_normal((CENTROIDS, DIM), dtype=np.float32))
    weights = rng.dirichlet(np.ones(CENTROIDS))
    perms = np.stack([rng.permutation(DIM) for _ in range(CENTROIDS)]).astype(np.int16)
    std = (np.arange(1, DIM + 1, dtype=np.float32) ** -NOISE_DECAY)
    std *= NOISE_NORM / math.sqrt(float(np.sum(std ** 2)))

    def draw(stream: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty((count, DIM), dtype=np.float32)
        labels = stream.choice(CENTROIDS, size=count, p=weights).astype(np.int32)
        for lo in range(0, count, 100_000):
            hi = min(count, lo + 100_000)
            noise = stream.standard_normal((hi - lo, DIM), dtype=np.float32) * std
            noise = np.take_along_axis(noise, perms[labels[lo:hi]].astype(np.intp), axis=1)
            out[lo:hi] = _normalise(centroids[labels[lo:hi]] + noise)
        return out, labels

    vectors, labels = draw(np.random.default_rng([seed, n, 1]), n)
    queries, _ = draw(np.random.default_rng([seed, n, 2]), n_queries)
    return vectors, labels, queries


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def texts_for(seed: int, start: int, labels: np.ndarray) -> list[str]:
    """Short synthetic texts (~10 words) for rows ``start…start+len(labels)-1``; cluster-flavoured vocabulary."""
    rng = np.random.default_rng([seed, start, 3])
    vocab = [a + b + c for a in _VOCAB_SYLLABLES for b in _VOCAB_SYLLABLES for c in _VOCAB_SYLLABLES[:8]]
    words = (len(vocab) * rng.random((len(labels), 8)) ** 3).astype(int)  # Zipf-like: low ranks frequent
    return [f"row {start + i} topic {vocab[(int(lab) * 7) % len(vocab)]} " + " ".join(vocab[w] for w in ws)
            for i, (lab, ws) in enumerate(zip(labels, words))]


def exact_top_k(store_rows: np.ndarray, vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k over ``vectors[store_rows]``: ``(rows q × k nearest first, distance of the k-th)``."""
    best_d = np.full((len(queries), 0), np.inf, dtype=np.float32)
    best_r = np.zeros((len(queries), 0), dtype=np.int64)
    for lo in range(0, len(store_rows), 200_000):
        rows = store_rows[lo:lo + 200_000]
        d = 1.0 - queries @ vectors[rows].T
        take = min(k, d.shape[1])
        part = np.argpartition(d, take - 1, axis=1)[:, :take]
        best_d = np.concatenate([best_d, np.take_along_axis(d, part, axis=1)], axis=1)
        best_r = np.concatenate([best_r, rows[part]], axis=1)
        order = np.argsort(best_d, axis=1)[:, :k]
        best_d, best_r = np.take_along_axis(best_d, order, axis=1), np.take_along_axis(best_r, order, axis=1)
    return best_r, best_d[:, -1]


# ------------------------------------------------------------------------------------------------- database


def database_for(settings: Any, name: str) -> str:
    """URL of database ``name`` on the configured server, created (and migrated) if missing."""
    base = database_url(settings)
    with psycopg.connect(base, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(base, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


def drop_database(settings: Any, name: str) -> None:
    with psycopg.connect(database_url(settings), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@dataclass
class Layout:
    big: vector_stores.VectorStore
    small: vector_stores.VectorStore
    load_s: float | None  # None: reused
    build_s: float | None
    notices: list[str]


def store_names(n: int) -> tuple[str, str]:
    return f"search-{n}-big", f"search-{n}-small"


def layout_matches(conn: psycopg.Connection, n: int, n_small: int, seed: int) -> tuple[Any, Any] | None:
    """The two stores when they already hold exactly this data set, else None."""
    stores = {s.name: s for s in vector_stores.list_all(conn, TENANT)}
    big, small = (stores.get(name) for name in store_names(n))
    if big is None or small is None or len(stores) != 2:
        return None
    for store, rows in ((big, n - n_small), (small, n_small)):
        meta = store.metadata
        if (meta.get("generator"), meta.get("seed"), meta.get("rows")) != (GENERATOR, seed, rows) \
                or store.chunk_count != rows:
            return None
    (total,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return (big, small) if total == n else None


def index_valid(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s", (vector_stores.hnsw_index_name(DIM),)).fetchone()
    return bool(row and row[0])


def load_store(conn: psycopg.Connection, store: vector_stores.VectorStore, rows: np.ndarray, vectors: np.ndarray,
               labels: np.ndarray, seed: int) -> None:
    """Write ``vectors[rows]`` into ``store`` as files of ≤ ROWS_PER_FILE chunks, the way process_file does."""
    per_file = max(1, min(ROWS_PER_FILE, math.ceil(len(rows) / MIN_FILES_PER_STORE)))
    for lo in range(0, len(rows), per_file):
        part = rows[lo:lo + per_file]
        start = int(part[0])  # rows of a store are contiguous: the file name records where they start
        texts = texts_for(seed, start, labels[part])
        chunks, offset = [], 0
        for i, text in enumerate(texts):
            chunks.append(Chunk(i, text, len(text.split()) + 2, offset, offset + len(text)))
            offset += len(text) + 2
        data = f"synthetic rows {start}..{start + len(part) - 1}".encode()
        with conn.transaction():
            file_id = file_rows.create_file(conn, TENANT, filename=f"row{start:08d}.txt", data=data).id
            attachments.attach(conn, TENANT, store.id, file_id, attributes={},
                               chunking_strategy={"type": "synthetic"})
        attachments.complete(conn, TENANT, store.id, file_id, chunks=chunks, vectors=vectors[part], dim=DIM,
                             content_sha256=file_rows.sha256_hex(data), attempt=None)


def build_index(conn: psycopg.Connection, maintenance_work_mem: str, workers: int) -> tuple[float, list[str]]:
    notices: list[str] = []
    handler = lambda diag: notices.append(f"{diag.severity}: {diag.message_primary}")
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_stores.hnsw_index_name(DIM))))
    conn.add_notice_handler(handler)
    try:
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        conn.execute(sql.SQL("SET max_parallel_maintenance_workers = {}").format(sql.Literal(workers)))
        started = time.perf_counter()
        vector_stores.ensure_hnsw_index(conn, DIM)
        elapsed = time.perf_counter() - started
        conn.execute("RESET maintenance_work_mem")
        conn.execute("RESET max_parallel_maintenance_workers")
    finally:
        conn.remove_notice_handler(handler)
    return elapsed, notices


def prepare(settings: Any, n: int, seed: int, vectors: np.ndarray, labels: np.ndarray, args: argparse.Namespace
            ) -> tuple[psycopg.Connection, Layout]:
    """Connection to size ``n``'s database, with its data loaded and indexed (reused when already there)."""
    name = f"engram_bench_search_{n}"
    n_small = max(1, round(n * SMALL_SHARE))
    url = database_for(settings, name)
    conn = connect(replace(settings, database_url=url))
    found = None if args.rebuild else layout_matches(conn, n, n_small, seed)
    if found is not None:
        big, small = found
        build_s, notices = None, []
        if not index_valid(conn):
            print(f"  reusing {n:,} rows; HNSW index missing: building", flush=True)
            build_s, notices = build_index(conn, args.maintenance_work_mem or auto_mwm(n), args.build_workers)
        else:
            print(f"  reusing {n:,} rows already in database {name}", flush=True)
        return conn, Layout(big, small, None, build_s, notices)
    conn.close()
    drop_database(settings, name)
    url = database_for(settings, name)
    conn = connect(replace(settings, database_url=url))
    big_name, small_name = store_names(n)
    # Rows [0, n_small) form the small store: rows are i.i.d., so this is a random 1 % of the distribution.
    small = vector_stores.create(conn, TENANT, name=small_name, model="synthetic-384", dim=DIM,
                                 metadata={"generator": GENERATOR, "seed": seed, "rows": n_small})
    big = vector_stores.create(conn, TENANT, name=big_name, model="synthetic-384", dim=DIM,
                               metadata={"generator": GENERATOR, "seed": seed, "rows": n - n_small})
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_stores.hnsw_index_name(DIM))))
    started = time.perf_counter()
    load_store(conn, small, np.arange(0, n_small), vectors, labels, seed)
    load_store(conn, big, np.arange(n_small, n), vectors, labels, seed)
    load_s = time.perf_counter() - started
    print(f"  loaded {n:,} rows in {load_s:.1f}s ({n / load_s:,.0f} rows/s, no HNSW index)", flush=True)
    conn.execute("ANALYZE chunks")
    mwm = args.maintenance_work_mem or auto_mwm(n)
    build_s, notices = build_index(conn, mwm, args.build_workers)
    print(f"  HNSW build {build_s:.1f}s (maintenance_work_mem {mwm}, {args.build_workers} parallel workers)"
          + "".join(f"\n    {m}" for m in notices), flush=True)
    conn.execute("VACUUM ANALYZE chunks")
    return conn, Layout(vector_stores.get(conn, TENANT, big.id), vector_stores.get(conn, TENANT, small.id),
                        load_s, build_s, notices)


def auto_mwm(n: int) -> str:
    """``maintenance_work_mem`` for an in-memory HNSW build of ``n`` 384-d vectors (~2.2 kB each), ≥ 1 GB."""
    return f"{max(1024, math.ceil(n * 2.5 / 1024))}MB"


def id_rows(conn: psycopg.Connection) -> np.ndarray:
    """Array mapping chunk id → generated row number (-1 for none)."""
    got = conn.execute("SELECT c.id, f.filename, c.chunk_index FROM chunks c JOIN files f ON f.id = c.file_id "
                       "WHERE c.tenant_id = %s", (TENANT,)).fetchall()
    ids = np.fromiter((g[0] for g in got), dtype=np.int64, count=len(got))
    rows = np.fromiter((int(g[1][3:11]) + g[2] for g in got), dtype=np.int64, count=len(got))
    mapping = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    mapping[ids] = rows
    return mapping


# ------------------------------------------------------------------------------------------------ measuring


class PathCounter:
    """Counts which passes vector_search took per query by wrapping the module's ``_hnsw`` and ``_exact``."""

    def __init__(self) -> None:
        self.current: list[str] = []
        self._hnsw, self._exact = vector_leg._hnsw, vector_leg._exact

        def hnsw(*a: Any, **kw: Any) -> Any:
            self.current.append("hnsw")
            return self._hnsw(*a, **kw)

        def exact(*a: Any, **kw: Any) -> Any:
            self.current.append("exact")
            return self._exact(*a, **kw)

        vector_leg._hnsw, vector_leg._exact = hnsw, exact

    def take(self) -> str:
        path, self.current = "+".join(self.current), []
        return path


class Recorder:
    """A connection stand-in that records the statements vector_search executes (to EXPLAIN them)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn, self.statements = conn, []

    def execute(self, query: Any, params: Any = None) -> Any:
        self.statements.append((query, params))
        return self._conn.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def explain(conn: psycopg.Connection, scope: VectorScope, query: np.ndarray, limit: int, ef_search: int,
            exact_max: int, caps: Any) -> str:
    """EXPLAIN ANALYZE of the last statement one vector_search runs, after the same SET LOCALs."""
    recorder = Recorder(conn)
    vector_search(recorder, scope, query, limit, where=None, ef_search=ef_search, exact_scan_max_rows=exact_max,
                  iterative_scan=caps.iterative_scan, halfvec=caps.halfvec)
    *settings_, (statement, params) = recorder.statements
    if not isinstance(statement, sql.Composable):
        statement = sql.SQL(statement)
    with conn.transaction():
        for s, p in settings_:
            if "SET LOCAL" in (s.as_string(conn) if isinstance(s, sql.Composable) else str(s)):
                conn.execute(s, p)
        rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) {}").format(statement), params).fetchall()
    return re.sub(r"'\[[^']*\]'", "'[…]'", "\n".join(r[0] for r in rows))  # elide the query vector


def measure(conn: psycopg.Connection, scope: VectorScope, queries: np.ndarray, truth: tuple[np.ndarray, np.ndarray],
            vectors: np.ndarray, row_of: np.ndarray, limit: int, ef_search: int, exact_max: int, caps: Any,
            counter: PathCounter) -> dict[str, Any]:
    top, kth = truth
    want = min(limit, scope.scope_rows)
    for q in queries[:WARMUP]:
        vector_search(conn, scope, q, limit, where=None, ef_search=ef_search, exact_scan_max_rows=exact_max,
                      iterative_scan=caps.iterative_scan, halfvec=caps.halfvec)
    counter.take()
    times, recalls, full, paths = [], [], 0, {}
    for qi, q in enumerate(queries[WARMUP:]):
        started = time.perf_counter()
        got = vector_search(conn, scope, q, limit, where=None, ef_search=ef_search, exact_scan_max_rows=exact_max,
                            iterative_scan=caps.iterative_scan, halfvec=caps.halfvec)
        times.append(1000 * (time.perf_counter() - started))
        path = counter.take()
        paths[path] = paths.get(path, 0) + 1
        full += len(got) >= want
        rows = row_of[[cid for cid, _ in got[:K]]]
        exact_d = 1.0 - vectors[rows] @ q
        recalls.append(float(np.sum(exact_d <= kth[qi] + 1e-6)) / min(K, scope.scope_rows))
    return {"p50_ms": round(percentile(times, 50), 2), "p95_ms": round(percentile(times, 95), 2),
            "recall@10": round(float(np.mean(recalls)), 4), "min_recall@10": round(float(np.min(recalls)), 2),
            "full_k": round(full / len(times), 4), "paths": paths}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated chunk counts (1000000: ~1.5 GB of vectors, long HNSW build)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per case (plus 20 warm-up)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--ef-sweep", default="", help="also run the unfiltered k=10 case at these ef_search values")
    parser.add_argument("--maintenance-work-mem", default=None, help="for the HNSW build (default: ~2.5 kB/row, ≥ 1GB)")
    parser.add_argument("--build-workers", type=int, default=max(0, min(7, (os.cpu_count() or 2) - 1)),
                        help="max_parallel_maintenance_workers for the HNSW build")
    parser.add_argument("--rebuild", action="store_true", help="reload even when the database holds the data")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of each case's statement")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    sweep = [int(s) for s in args.ef_sweep.split(",") if s.strip()]
    settings = bench_settings()
    counter = PathCounter()
    print(f"search benchmark: sizes {sizes}, {args.queries} queries, dim {DIM}, {CENTROIDS} clusters; "
          f"ef_search {settings.hnsw_ef_search}, exact_scan_max_rows {settings.exact_scan_max_rows}", flush=True)
    results: dict[str, Any] = {}
    for n in sizes:
        print(f"\nN = {n:,}", flush=True)
        started = time.perf_counter()
        vectors, labels, queries = generate(args.seed, n, args.queries + WARMUP)
        print(f"  generated in {time.perf_counter() - started:.1f}s", flush=True)
        conn, layout = prepare(settings, n, args.seed, vectors, labels, args)
        caps = capabilities(conn)
        (indexed,) = conn.execute(_INDEXED_ROWS, (DIM,)).fetchone()
        row_of = id_rows(conn)
        n_small = layout.small.chunk_count
        truths = {"unfiltered": exact_top_k(np.arange(n_small, n), vectors, queries[WARMUP:], K),
                  "filtered": exact_top_k(np.arange(0, n_small), vectors, queries[WARMUP:], K)}
        truths["filtered_hnsw"] = truths["filtered"]
        scopes = {"unfiltered": VectorScope(TENANT, [layout.big.id], DIM, layout.big.chunk_count, int(indexed)),
                  "filtered": VectorScope(TENANT, [layout.small.id], DIM, n_small, int(indexed))}
        scopes["filtered_hnsw"] = scopes["filtered"]
        size_result: dict[str, Any] = {"rows": n, "big_rows": layout.big.chunk_count, "small_rows": n_small,
                                       "load_s": None if layout.load_s is None else round(layout.load_s, 1),
                                       "hnsw_build_s": None if layout.build_s is None else round(layout.build_s, 1),
                                       "pgvector": ".".join(map(str, caps.pgvector_version))}
        for case in ("unfiltered", "filtered", "filtered_hnsw"):
            exact_max = 0 if case == "filtered_hnsw" else settings.exact_scan_max_rows
            for limit in (K, MIN_CANDIDATES):
                r = measure(conn, scopes[case], queries, truths[case], vectors, row_of, limit,
                            settings.hnsw_ef_search, exact_max, caps, counter)
                size_result[f"{case}@{limit}"] = r
                print(f"  {case:13s} limit {limit:3d}: p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  "
                      f"recall@10 {r['recall@10']:.4f} (min {r['min_recall@10']:.1f})  full k {100 * r['full_k']:.0f}%"
                      f"  paths {r['paths']}", flush=True)
        # The HNSW statement (forced with exact_scan_max_rows = 0) must be planned as an index scan.
        plan = explain(conn, scopes["unfiltered"], queries[WARMUP], K, settings.hnsw_ef_search, 0, caps)
        size_result["hnsw_statement_uses_index"] = vector_stores.hnsw_index_name(DIM) in plan
        print(f"  HNSW statement (big store) planned on {vector_stores.hnsw_index_name(DIM)}: "
              f"{size_result['hnsw_statement_uses_index']}", flush=True)
        if args.explain:
            for case in ("unfiltered", "filtered", "filtered_hnsw"):
                exact_max = 0 if case == "filtered_hnsw" else settings.exact_scan_max_rows
                print(f"  EXPLAIN ANALYZE {case} (limit {K}):\n    " + explain(
                    conn, scopes[case], queries[WARMUP], K, settings.hnsw_ef_search, exact_max, caps
                ).replace("\n", "\n    "), flush=True)
        if sweep:
            size_result["ef_sweep"] = {}
            for ef in sweep:
                r = measure(conn, scopes["unfiltered"], queries, truths["unfiltered"], vectors, row_of, K, ef,
                            settings.exact_scan_max_rows, caps, counter)
                size_result["ef_sweep"][str(ef)] = {k: r[k] for k in ("p50_ms", "p95_ms", "recall@10", "full_k")}
                print(f"  ef_search {ef:4d} (unfiltered, k=10): p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms"
                      f"  recall@10 {r['recall@10']:.4f}", flush=True)
        if n == TARGET_SIZE:
            verdict = target_verdict(size_result)
            size_result["targets"] = verdict
            print(f"  targets at {TARGET_SIZE:,} (recall@10 ≥ {TARGET_RECALL}, p95 ≤ {TARGET_P95_MS:g} ms, filtered "
                  f"returns k): " + ", ".join(f"{k} {'PASS' if v else 'MISS'}" for k, v in verdict.items()), flush=True)
        results[str(n)] = size_result
        conn.close()
    print(json.dumps({"benchmark": "search", "dim": DIM, "clusters": CENTROIDS, "queries": args.queries,
                      "seed": args.seed, "ef_search": settings.hnsw_ef_search,
                      "exact_scan_max_rows": settings.exact_scan_max_rows, "sizes": results}))
    return 0


def target_verdict(r: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for limit in (K, MIN_CANDIDATES):
        u, f = r[f"unfiltered@{limit}"], r[f"filtered@{limit}"]
        out[f"unfiltered@{limit}_recall"] = u["recall@10"] >= TARGET_RECALL
        out[f"unfiltered@{limit}_p95"] = u["p95_ms"] <= TARGET_P95_MS
        out[f"filtered@{limit}_recall"] = f["recall@10"] >= TARGET_RECALL
        out[f"filtered@{limit}_p95"] = f["p95_ms"] <= TARGET_P95_MS
        out[f"filtered@{limit}_full_k"] = f["full_k"] == 1.0
    return out


if __name__ == "__main__":
    sys.exit(main())
