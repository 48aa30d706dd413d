"""Search at scale (issue 11): the vector leg, the keyword leg and hybrid ranking, in-process with row-level
security on, at several store sizes; every latency also as a ratio to the vector leg measured in the same run.

Data, per size N (``--sizes``, default ``10000,100000``; ``1000000`` works: see "1M" below). One database
``engram_bench_search_<N>`` on the configured server (``DATABASE_URL``, else the embedded Postgres under
``ENGRAM_DATA_DIR``) holds tenant ``bench`` with

* a big store of 99 % of the rows, written as ``BIG_FILES`` files, file i with attribute ``{"shard": i}``, and
* a small store of 1 % of the rows (4 files),

through the real write path: ``attachments.attach`` + ``attachments.complete`` (one INSERT into ``chunks``; the
statement triggers keep BM25 statistics and impact-ordered postings, migrations/0009). Chunk texts are realistic
(80–160 words each, NFCorpus' words in topic salad or a Zipf vocabulary: ``textgen.py``). Vectors are synthetic
384-d and *clustered* (real embeddings are clustered and of low intrinsic dimension; uniform noise in 384-d is an
unrealistically hard, structureless case for HNSW): one of ``CENTROIDS`` random unit centroids (Dirichlet-skewed
cluster sizes) plus Gaussian noise with power-law decaying per-axis spread (cosine to the centroid ≈ 0.7), then
unit length; query vectors are fresh draws from the same distribution. The vector leg does not care about the
text. The HNSW index is dropped before the load and built after it (``maintenance_work_mem`` raised); a re-run
reuses a database that already holds the same data (generator, seed, sizes), so reruns start measuring at once.

Cases (scopes): ``all`` = the big store; ``store 1%`` = the small store (a scope the HNSW index must filter 99 %
of its rows away from); ``attr 1%`` = the big store with the filter ``shard == 7`` (one file of 100), over the scope
``search.service.search_scope`` makes of it (that file's chunks: the filter matches 1 % of the store's files).

Legs, each asked for ``DEPTH`` = 100 rows (what ``search.service`` asks each leg for when a client wants ≤ 50):

* ``vector``   — ``search.vector.vector_search`` (exact scan or HNSW, as the product chooses);
* ``kw 2w`` / ``kw 12w`` — ``search.keyword.keyword_search`` for 2- and 12-word queries, every row exact
  (distinct lexemes, drawn by frequency from one source document: ``textgen.keyword_queries``); ``kw 2w@10`` /
  ``kw 12w@10``: the same asked for 10 rows (the ratio is still to the vector leg at depth 100);
* ``hybrid 2w`` / ``hybrid 12w`` — ``search.ranking.rank`` (both legs + reciprocal-rank fusion + the other leg's
  evidence for the first ``K`` candidates, i.e. their relevance, as ``search.service.search`` asks for ``K`` results)
  with an embedder stub that returns the query's precomputed vector (so no model time is measured).

Timing: ``--rounds`` rounds; in each, every query runs every leg in turn (interleaved, so machine noise hits
all legs alike); p50/p95 per round; the table shows the median over rounds of p50, p95 and of the ratio
p95(leg) / p95(vector leg of the same case and round). ``recall@10``: vector leg — share of the exact cosine top 10
(numpy) among the first 10 returned (tie-tolerant); keyword legs — share of queries whose top 10 equals the
exhaustive scorer's (``EXHAUSTIVE_MAX_ROWS`` monkeypatched huge vs 0, the first ``--check-queries`` queries, also
NFCorpus' real query texts; the leg as hybrid search asks for it: its exact head). ``k`` — share of queries that returned min(DEPTH, matching rows) (vector: the scope's
rows; keyword: what the exhaustive scorer returns).

Query length (issue 23): ``--lengths 1,2,4,8,12,16`` adds a curve over the big store — the keyword leg as hybrid
search asks for it (``DEPTH`` rows, ``ranking.keyword_exact_head(K, fused=True)`` of them exact) and hybrid search,
p50 / p95 per length, one column per search implementation (``length_curve.py``; a second vector backend adds a
column); ``--baseline 0024`` adds the keyword top-k of that migration with every keyword row exact, timed
interleaved with today's (before / after in one run, with the share of queries whose top 10 is unchanged). With
``--check-queries``, the curve's queries are checked against the exhaustive scorer too (on ``all``).

1M: ~1.5 GB of vectors in RAM while loading, ~65 postings per chunk, a long load and HNSW build: run it in the
background (``nohup … > log &``). Sizes on disk (table, TOAST, each index, postings) are printed per size.

    ./dev python benchmarks/search.py --sizes 10000,100000
    ./dev python benchmarks/search.py --sizes 100000 --cases all --legs vector --lengths 1,2,4,8,12,16 --baseline 0024
    cd benchmarks && nohup python search.py --sizes 1000000 > /tmp/search-1m.log 2>&1 &
    cd benchmarks && python search.py --sizes 100000 --index-compare   # vector vs halfvec HNSW
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

import length_curve
from common import bench_settings, percentile
from textgen import Source, chunk_texts, keyword_queries, load_source

from chalicelib.search import keyword as keyword_leg
from chalicelib.search.corpus import CHUNKS, Scope, store_scope
from chalicelib.search.filters import CompiledFilter, compile_filter
from chalicelib.search.keyword import keyword_search
from chalicelib.search.ranking import Weights, keyword_exact_head, rank
from chalicelib.search.service import MIN_CANDIDATES, search_scope
from chalicelib.search.vector import VectorScope, vector_search
from chalicelib.store import attachments
from chalicelib.store import files as file_rows
from chalicelib.store import vector_stores
from chalicelib.store.chunks import Chunk
from chalicelib.store.db import APP_ROLE, TENANT_SETTING, connect, database_url
from chalicelib.store.vector_stores import hnsw_index
from chalicelib.store.migrate import migrate

GENERATOR = "salad-v1"  # bump when the data generator changes: stored databases are then rebuilt
DIM = 384
CENTROIDS = 300
NOISE_NORM = 1.0  # expected |noise| before normalising; cosine(vector, centroid) ≈ 1 / sqrt(1 + NOISE_NORM²)
NOISE_DECAY = 0.7  # per-axis noise std ∝ (axis rank)^-NOISE_DECAY
SMALL_SHARE = 0.01  # the small store's share of the rows
BIG_FILES = 100  # the big store's files; file i has attribute shard = i, so one shard is 1 % of it
SMALL_FILES = 4
FILTER_SHARD = 7
TENANT = "bench"
K = 10
DEPTH = max(MIN_CANDIDATES, 2 * K)
WARMUP = 10
LEGS = ("vector", "kw 2w", "kw 12w", "kw 2w@10", "kw 12w@10", "hybrid 2w", "hybrid 12w")
CASES = ("all", "store 1%", "attr 1%")
# Issue 11's targets (in-process): hybrid p50/p95 by size, keyword p95 ≤ 2 × vector p95, vector p95 ≤ 20 ms,
# recall@10 ≥ 0.95 and min(k, matching) rows always, top-k = exhaustive top 10 on ≥ 99 % of queries.
HYBRID_TARGETS_MS = {100_000: (25.0, 50.0), 1_000_000: (60.0, 150.0)}
KEYWORD_RATIO, VECTOR_P95_MS, RECALL, IDENTICAL = 2.0, 20.0, 0.95, 0.99
# Issue 23's target for long queries: hybrid p50 at 12 words (the length curve, first column).
LONG_QUERY_WORDS, LONG_QUERY_P50_MS = 12, {100_000: 40.0}


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------------- data


def generate(seed: int, n: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """``(vectors n × DIM, queries n_queries × DIM)``, float32, unit length, clustered (module docstring)."""
    rng = np.random.default_rng(seed)
    centroids = _normalise(rng.standard_normal((CENTROIDS, DIM), dtype=np.float32))
    weights = rng.dirichlet(np.ones(CENTROIDS))
    perms = np.stack([rng.permutation(DIM) for _ in range(CENTROIDS)]).astype(np.int16)
    std = (np.arange(1, DIM + 1, dtype=np.float32) ** -NOISE_DECAY)
    std *= NOISE_NORM / math.sqrt(float(np.sum(std ** 2)))

    def draw(stream: np.random.Generator, count: int) -> np.ndarray:
        out = np.empty((count, DIM), dtype=np.float32)
        labels = stream.choice(CENTROIDS, size=count, p=weights).astype(np.int32)
        for lo in range(0, count, 100_000):
            hi = min(count, lo + 100_000)
            noise = stream.standard_normal((hi - lo, DIM), dtype=np.float32) * std
            noise = np.take_along_axis(noise, perms[labels[lo:hi]].astype(np.intp), axis=1)
            out[lo:hi] = _normalise(centroids[labels[lo:hi]] + noise)
        return out

    return draw(np.random.default_rng([seed, n, 1]), n), draw(np.random.default_rng([seed, n, 2]), n_queries)


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def exact_top_k(rows: np.ndarray, vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k over ``vectors[rows]``: ``(row numbers q × k nearest first, distance of the k-th)``."""
    best_d = np.full((len(queries), 0), np.inf, dtype=np.float32)
    best_r = np.zeros((len(queries), 0), dtype=np.int64)
    for lo in range(0, len(rows), 200_000):
        part_rows = rows[lo:lo + 200_000]
        d = 1.0 - queries @ vectors[part_rows].T
        take = min(k, d.shape[1])
        part = np.argpartition(d, take - 1, axis=1)[:, :take]
        best_d = np.concatenate([best_d, np.take_along_axis(d, part, axis=1)], axis=1)
        best_r = np.concatenate([best_r, part_rows[part]], axis=1)
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


def index_valid(conn: psycopg.Connection) -> bool:
    """Whether the HNSW index of ``DIM`` dimensions exists and is valid."""
    row = conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s", (vector_stores.hnsw_index_name(DIM),)).fetchone()
    return bool(row and row[0])


def build_index(conn: psycopg.Connection, maintenance_work_mem: str, workers: int) -> tuple[float, list[str]]:
    """(Re)build the HNSW index through ``vector_stores.ensure_hnsw_index`` with more memory and workers:
    ``(seconds, server notices)``."""
    notices: list[str] = []

    def handler(diag: Any) -> None:
        notices.append(f"{diag.severity}: {diag.message_primary}")

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


def auto_mwm(n: int) -> str:
    """``maintenance_work_mem`` for an in-memory HNSW build of ``n`` 384-d vectors (~2.2 kB each), ≥ 1 GB."""
    return f"{max(1024, math.ceil(n * 2.5 / 1024))}MB"


@dataclass
class Layout:
    """The two stores of one size and how the big store's rows split into files (``file_starts``: the first row
    of each, plus the end)."""

    big: vector_stores.VectorStore
    small: vector_stores.VectorStore
    n_small: int
    big_starts: list[int]
    small_starts: list[int]
    load_s: float | None = None
    build_s: float | None = None


def split(lo: int, hi: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` near-equal contiguous ranges of ``lo … hi − 1`` (parts + 1 numbers)."""
    return [lo + (hi - lo) * i // parts for i in range(parts + 1)]


def layout_for(n: int) -> tuple[int, list[int], list[int]]:
    n_small = max(SMALL_FILES, round(n * SMALL_SHARE))
    return n_small, split(n_small, n, BIG_FILES), split(0, n_small, SMALL_FILES)


def _meta(n: int, seed: int, source: str, rows: int) -> dict[str, Any]:
    return {"generator": GENERATOR, "seed": seed, "size": n, "source": source, "rows": rows}


def find_layout(conn: psycopg.Connection, n: int, seed: int, source: str) -> Layout | None:
    """The two stores when the database already holds exactly this data set, else None."""
    n_small, big_starts, small_starts = layout_for(n)
    stores = {s.name: s for s in vector_stores.list_all(conn, TENANT)}
    big, small = stores.get(f"search-{n}-big"), stores.get(f"search-{n}-small")
    if big is None or small is None or len(stores) != 2:
        return None
    for store, rows in ((big, n - n_small), (small, n_small)):
        if store.metadata != _meta(n, seed, source, rows) or store.chunk_count != rows:
            return None
    (total,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    return Layout(big, small, n_small, big_starts, small_starts) if total == n else None


def load_files(conn: psycopg.Connection, store: vector_stores.VectorStore, starts: list[int], vectors: np.ndarray,
               source: Source, seed: int, attributes: Callable[[int], dict[str, Any]]) -> None:
    """Write rows ``starts[i] … starts[i + 1] − 1`` as file i of ``store``, the way ingestion does."""
    for i, (lo, hi) in enumerate(zip(starts, starts[1:])):
        texts = chunk_texts(source, seed, lo, hi - lo)
        chunks, offset = [], 0
        for j, text in enumerate(texts):
            chunks.append(Chunk(j, text, len(text.split()) + 2, offset, offset + len(text)))
            offset += len(text) + 2
        data = f"synthetic rows {lo}..{hi - 1}".encode()
        with conn.transaction():
            file_id = file_rows.create_file(conn, TENANT, filename=f"row{lo:08d}.txt", data=data).id
            attachments.attach(conn, TENANT, store.id, file_id, attributes=attributes(i),
                               chunking_strategy={"type": "synthetic"})
        attachments.complete(conn, TENANT, store.id, file_id, chunks=chunks, vectors=vectors[lo:hi], dim=DIM,
                             content_sha256=file_rows.sha256_hex(data), attempt=None)


def prepare(settings: Any, n: int, seed: int, vectors: np.ndarray, source: Source, args: argparse.Namespace
            ) -> tuple[str, Layout]:
    """``(database url, layout)`` for size ``n``: loaded and indexed, or reused when already there."""
    name = f"engram_bench_search_{n}"
    url = database_for(settings, name)
    with connect(replace(settings, database_url=url)) as conn:
        found = None if args.rebuild else find_layout(conn, n, seed, source.name)
        if found is not None:
            if not index_valid(conn):
                log("  reusing the rows; HNSW index missing: building")
                found.build_s, _ = build_index(conn, args.maintenance_work_mem or auto_mwm(n), args.build_workers)
            else:
                log(f"  reusing {n:,} rows already in database {name}")
            return url, found
    drop_database(settings, name)
    url = database_for(settings, name)
    n_small, big_starts, small_starts = layout_for(n)
    with connect(replace(settings, database_url=url)) as conn:
        small = vector_stores.create(conn, TENANT, name=f"search-{n}-small", model="synthetic-384", dim=DIM,
                                     metadata=_meta(n, seed, source.name, n_small))
        big = vector_stores.create(conn, TENANT, name=f"search-{n}-big", model="synthetic-384", dim=DIM,
                                   metadata=_meta(n, seed, source.name, n - n_small))
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_stores.hnsw_index_name(DIM))))
        started = time.perf_counter()
        # Rows [0, n_small) form the small store: rows are i.i.d., so this is a random 1 % of the distribution.
        load_files(conn, small, small_starts, vectors, source, seed, lambda i: {"part": i})
        load_files(conn, big, big_starts, vectors, source, seed, lambda i: {"shard": i})
        load_s = time.perf_counter() - started
        log(f"  loaded {n:,} rows in {load_s:.1f}s ({n / load_s:,.0f} rows/s; postings by trigger, no HNSW index)")
        conn.execute("VACUUM ANALYZE chunks")
        conn.execute("VACUUM ANALYZE chunk_postings")
        mwm = args.maintenance_work_mem or auto_mwm(n)
        build_s, notices = build_index(conn, mwm, args.build_workers)
        log(f"  HNSW build {build_s:.1f}s (maintenance_work_mem {mwm}, {args.build_workers} parallel workers)"
            + "".join(f"\n    {m}" for m in notices))
        conn.execute("ANALYZE")
        layout = Layout(vector_stores.get(conn, TENANT, big.id), vector_stores.get(conn, TENANT, small.id),
                        n_small, big_starts, small_starts, load_s, build_s)
    return url, layout


def id_rows(conn: psycopg.Connection) -> np.ndarray:
    """Array mapping chunk id → generated row number (-1 for none)."""
    got = conn.execute("SELECT c.id, f.filename, c.chunk_index FROM chunks c JOIN files f ON f.id = c.file_id "
                       "WHERE c.tenant_id = %s", (TENANT,)).fetchall()
    ids = np.fromiter((g[0] for g in got), dtype=np.int64, count=len(got))
    rows = np.fromiter((int(g[1][3:11]) + g[2] for g in got), dtype=np.int64, count=len(got))
    mapping = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    mapping[ids] = rows
    return mapping


_SIZES = """
SELECT c.relname, c.relkind, pg_relation_size(c.oid), coalesce(pg_total_relation_size(c.reltoastrelid), 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
  AND (c.relname IN ('chunks', 'chunk_postings', 'keyword_stats') OR c.oid IN (
       SELECT indexrelid FROM pg_index WHERE indrelid IN ('chunks'::regclass, 'chunk_postings'::regclass,
                                                          'keyword_stats'::regclass)))
ORDER BY c.relkind DESC, c.relname"""


def disk_sizes(conn: psycopg.Connection) -> dict[str, int]:
    """Bytes per relation (tables: heap; ``<table> TOAST``: its TOAST table with index) and the database."""
    out: dict[str, int] = {}
    for name, kind, size, toast in conn.execute(_SIZES).fetchall():
        out[name] = int(size)
        if kind == "r" and toast:
            out[f"{name} TOAST"] = int(toast)
    out["database"] = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
    return out


def mb(n: float) -> str:
    return f"{n / 2 ** 20:,.0f} MB" if n >= 2 ** 20 else f"{n / 1024:,.0f} kB"


# ------------------------------------------------------------------------------------------------ measuring


class StubEmbedder:
    """An embedder that returns the query vector set beforehand (``vector``): no model time in the numbers."""

    model = "synthetic-384"
    dimension = DIM
    max_input_tokens = 512
    tokenizer = None

    def __init__(self) -> None:
        self.vector: Any = None

    def embed(self, texts: Sequence[str]) -> list[Any]:
        return [self.vector for _ in texts]


@dataclass
class Case:
    """A scope to search: ``scope``, optional filter ``where``, the row numbers it holds (for exact truth)."""

    name: str
    scope: Scope
    where: CompiledFilter | None
    rows: np.ndarray
    truth: tuple[np.ndarray, np.ndarray] | None = None
    times: dict[str, list[list[float]]] = field(default_factory=dict)  # leg → per round → ms
    recall: list[float] = field(default_factory=list)
    full: dict[str, list[bool]] = field(default_factory=dict)
    matching: dict[str, list[int]] = field(default_factory=dict)  # keyword legs: exhaustive row counts per query
    identical: dict[str, list[bool]] = field(default_factory=dict)


def attr_case(conn: psycopg.Connection, layout: Layout, rows: np.ndarray) -> Case:
    """The big store filtered to one file by attribute, with the scope ``search.service.search`` builds for it
    (the filter's files, from their attributes); the lookup's own time is logged (median of 20)."""
    where = compile_filter({"type": "eq", "key": "shard", "value": FILTER_SHARD})
    times = []
    for _ in range(20):
        started = time.perf_counter()
        scope = search_scope(conn, TENANT, [layout.big], where)
        times.append(1000 * (time.perf_counter() - started))
    log(f"  attr 1%: the filter's files hold {scope.rows:,} chunks (of {layout.big.chunk_count:,}); finding them "
        f"takes {sorted(times)[10]:.2f} ms per search")
    return Case("attr 1%", scope, where, rows)


def rls_connection(url: str, settings: Any) -> psycopg.Connection:
    """A connection acting as the API's role for the bench tenant: row-level security applies, as in the API."""
    conn = connect(replace(settings, database_url=url))
    conn.execute(sql.SQL("SET ROLE {}; SELECT set_config({}, {}, false)").format(
        sql.Identifier(APP_ROLE), sql.Literal(TENANT_SETTING), sql.Literal(TENANT)))
    return conn


@dataclass
class Queries:
    vectors: np.ndarray
    texts: dict[str, list[str]]  # "2w" / "12w" / "nfq" → query texts (same length as vectors, nfq may be shorter)
    lexemes: Callable[[list[str]], dict[str, str]]  # words → their lexemes (for textgen.keyword_queries)


def make_queries(conn: psycopg.Connection, source: Source, seed: int, vectors: np.ndarray) -> Queries:
    def lexemes(words: list[str]) -> dict[str, str]:
        rows = conn.execute("SELECT w, (SELECT min(lexeme) FROM unnest(to_tsvector('english', w))) "
                            "FROM unnest(%s::text[]) AS w", (words,)).fetchall()
        return {w: lex for w, lex in rows if lex}

    n = len(vectors)
    texts = {"2w": keyword_queries(source, seed, 2, n, lexemes), "12w": keyword_queries(source, seed, 12, n, lexemes)}
    if source.real_queries:
        order = np.random.default_rng([seed, 5]).permutation(len(source.real_queries))
        texts["nfq"] = [source.real_queries[i] for i in order[:n]]
    return Queries(vectors, texts, lexemes)


def run_leg(conn: psycopg.Connection, leg: str, case: Case, q: Queries, i: int, settings: Any, caps: Any,
            indexed: int, embedder: StubEmbedder) -> list[int]:
    """One call of ``leg`` for query ``i``: the row ids it returned."""
    if leg == "vector":
        scope = VectorScope(CHUNKS, case.scope, DIM, indexed)
        rows = vector_search(conn, scope, q.vectors[i], DEPTH, where=case.where, ef_search=settings.hnsw_ef_search,
                             exact_scan_max_rows=settings.exact_scan_max_rows, iterative_scan=caps.iterative_scan,
                             halfvec=caps.halfvec)  # caps: vector_stores.hnsw_index
        return [r for r, _ in rows]
    kind, words = leg.split()
    words, _, at = words.partition("@")
    text = q.texts[words][i]
    if kind == "kw":
        return [r for r, _ in keyword_search(conn, CHUNKS, case.scope, text, int(at or DEPTH), where=case.where)]
    embedder.vector = q.vectors[i]
    ranked = rank(conn, CHUNKS, case.scope, [text], embedder=embedder, settings=settings, depth=DEPTH,
                  where=case.where, weights=Weights(), indexed_rows=indexed, limit=K)
    return [r.id for r in ranked]


def measure(conn: psycopg.Connection, cases: list[Case], q: Queries, settings: Any, caps: Any, indexed: int,
            row_of: np.ndarray, vectors: np.ndarray, rounds: int, legs: Sequence[str]) -> None:
    """Interleaved timing: per round, per query, per case, every leg once (after ``WARMUP`` untimed queries)."""
    embedder = StubEmbedder()
    n = len(q.vectors) - WARMUP
    for case in cases:
        case.times = {leg: [] for leg in legs}
    for i in range(WARMUP):
        for case in cases:
            for leg in legs:
                run_leg(conn, leg, case, q, n + i, settings, caps, indexed, embedder)
    for r in range(rounds):
        for case in cases:
            for leg in legs:
                case.times[leg].append([])
        started = time.perf_counter()
        for i in range(n):
            for case in cases:
                for leg in legs:
                    t0 = time.perf_counter()
                    got = run_leg(conn, leg, case, q, i, settings, caps, indexed, embedder)
                    case.times[leg][-1].append(1000 * (time.perf_counter() - t0))
                    if r == 0 and leg == "vector":
                        want = min(DEPTH, len(case.rows))
                        case.full.setdefault(leg, []).append(len(got) >= want)
                        top, kth = case.truth
                        got_rows = row_of[got[:K]]
                        exact_d = 1.0 - vectors[got_rows] @ q.vectors[i]
                        case.recall.append(float(np.sum(exact_d <= kth[i] + 1e-6)) / min(K, len(case.rows)))
                    elif r == 0 and leg.startswith("hybrid"):
                        case.full.setdefault(leg, []).append(len(got) >= min(K, len(case.rows)))
        log(f"    round {r + 1}/{rounds}: {time.perf_counter() - started:.1f}s")


def run_curve(conn: psycopg.Connection, layout: Layout, args: argparse.Namespace, settings: Any, indexed: int,
              q: Queries, texts: dict[int, list[str]]) -> dict[str, Any]:
    """The length curve (``length_curve.py``) over the big store: Postgres' column, and with ``--baseline`` the
    keyword top-k of that migration with every keyword row exact; printed, and returned as its summary."""
    scope = store_scope(TENANT, [layout.big.id], layout.big.chunk_count)
    embedder = StubEmbedder()
    columns = [length_curve.pgvector_column("pgvector", conn, scope, settings=settings, indexed=indexed,
                                            embedder=embedder, depth=DEPTH, k=K)]
    if args.baseline:
        columns.append(length_curve.pgvector_column(
            f"pgvector {args.baseline}", conn, scope, settings=settings, indexed=indexed, embedder=embedder,
            depth=DEPTH, k=K, corpus=length_curve.baseline_corpus(conn, args.baseline), every_row_exact=True))
    log(f"  length curve: {len(q.vectors) - WARMUP} queries × {args.rounds} rounds, lengths {list(texts)}, columns "
        f"{[c.name for c in columns]} (depth {DEPTH}, {K} results, keyword exact head "
        f"{keyword_exact_head(K, fused=True)})")
    curve = length_curve.measure(columns, texts, q.vectors, args.rounds, WARMUP, K, log)
    summary = length_curve.summarise(curve)
    length_curve.print_table(summary, log)
    return summary


def check_top_k(conn: psycopg.Connection, cases: list[Case], texts_by_set: dict[str, list[str]], count: int) -> None:
    """Top-k over postings, as hybrid search asks for it (DEPTH rows, the exact head
    ``ranking.keyword_exact_head(K, fused=True)``), vs the exhaustive scorer on the first ``count`` queries of each
    text set: identical top 10, and whether top-k returned as many rows as the exhaustive scorer
    (min(DEPTH, matching))."""
    saved = keyword_leg.EXHAUSTIVE_MAX_ROWS
    head = keyword_exact_head(K, fused=True)
    try:
        for case in cases:
            for words, texts in texts_by_set.items():
                same, full, matching = [], [], []
                for text in texts[:count]:
                    keyword_leg.EXHAUSTIVE_MAX_ROWS = 10 ** 12
                    exhaustive = keyword_search(conn, CHUNKS, case.scope, text, DEPTH, where=case.where)
                    keyword_leg.EXHAUSTIVE_MAX_ROWS = 0
                    top_k = keyword_search(conn, CHUNKS, case.scope, text, DEPTH, where=case.where, exact=head)
                    same.append([i for i, _ in top_k[:K]] == [i for i, _ in exhaustive[:K]])
                    full.append(len(top_k) == len(exhaustive))
                    matching.append(len(exhaustive))
                case.identical[words], case.full[f"kw {words}"], case.matching[words] = same, full, matching
    finally:
        keyword_leg.EXHAUSTIVE_MAX_ROWS = saved


def summarise(case: Case, legs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per leg: median over rounds of p50, p95, ratio p95 / vector p95 (same round), ratio p50 / vector p50."""
    out: dict[str, dict[str, Any]] = {}
    vector = case.times["vector"]
    for leg in legs:
        rounds = case.times[leg]
        p50 = [percentile(t, 50) for t in rounds]
        p95 = [percentile(t, 95) for t in rounds]
        r95 = [p / percentile(v, 95) for p, v in zip(p95, vector)]
        r50 = [p / percentile(v, 50) for p, v in zip(p50, vector)]
        row: dict[str, Any] = {"p50_ms": round(float(np.median(p50)), 2), "p95_ms": round(float(np.median(p95)), 2),
                               "ratio_p95": round(float(np.median(r95)), 2),
                               "ratio_p50": round(float(np.median(r50)), 2)}
        if leg == "vector":
            row["recall@10"] = round(float(np.mean(case.recall)), 4)
        elif leg.startswith("kw") and leg.split()[1] in case.identical:
            row["recall@10"] = round(float(np.mean(case.identical[leg.split()[1]])), 4)
        if leg in case.full:
            row["returns_k"] = round(float(np.mean(case.full[leg])), 4)
        out[leg] = row
    return out


def print_table(n: int, summaries: dict[str, dict[str, dict[str, Any]]]) -> None:
    log(f"  {'case':9s} {'leg':11s} {'p50 ms':>8s} {'p95 ms':>8s} {'p95÷vec':>8s} {'p50÷vec':>8s} "
        f"{'recall@10':>9s} {'k':>6s}")
    for case, legs in summaries.items():
        for leg, r in legs.items():
            recall = f"{r['recall@10']:.3f}" if "recall@10" in r else "—"
            full = f"{100 * r['returns_k']:.0f}%" if "returns_k" in r else "—"
            log(f"  {case:9s} {leg:11s} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['ratio_p95']:7.2f}× "
                f"{r['ratio_p50']:7.2f}× {recall:>9s} {full:>6s}")


def verdicts(n: int, summaries: dict[str, dict[str, dict[str, Any]]], cases: list[Case]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for case, legs in summaries.items():
        v = legs["vector"]
        out[f"{case}: vector p95 ≤ {VECTOR_P95_MS:g} ms"] = v["p95_ms"] <= VECTOR_P95_MS
        out[f"{case}: vector recall@10 ≥ {RECALL}"] = v["recall@10"] >= RECALL
        out[f"{case}: vector returns min(k, matching)"] = v.get("returns_k", 0) == 1.0
        for words in ("2w", "12w", "2w@10", "12w@10"):
            if f"kw {words}" in legs:
                out[f"{case}: kw {words} p95 ≤ {KEYWORD_RATIO:g}× vector"] = \
                    legs[f"kw {words}"]["ratio_p95"] <= KEYWORD_RATIO
        if n in HYBRID_TARGETS_MS and case == "all":
            t50, t95 = HYBRID_TARGETS_MS[n]
            for words in ("2w", "12w"):
                if f"hybrid {words}" in legs:
                    h = legs[f"hybrid {words}"]
                    out[f"{case}: hybrid {words} p50 ≤ {t50:g} ms"] = h["p50_ms"] <= t50
                    out[f"{case}: hybrid {words} p95 ≤ {t95:g} ms"] = h["p95_ms"] <= t95
    for c in cases:
        for words, same in c.identical.items():
            out[f"{c.name}: top-k = exhaustive top 10 on ≥ 99 % ({words})"] = bool(np.mean(same) >= IDENTICAL)
            out[f"{c.name}: kw {words} returns min(k, matching)"] = bool(np.all(c.full[f"kw {words}"]))
    return out


# ---------------------------------------------------------------------------------------------------- sizes


def run_size(n: int, args: argparse.Namespace, settings: Any, source: Source) -> dict[str, Any]:
    log(f"\nN = {n:,}")
    started = time.perf_counter()
    vectors, query_vectors = generate(args.seed, n, args.queries + WARMUP)
    log(f"  vectors generated in {time.perf_counter() - started:.1f}s")
    url, layout = prepare(settings, n, args.seed, vectors, source, args)
    result: dict[str, Any] = {"rows": n, "big_rows": n - layout.n_small, "small_rows": layout.n_small,
                              "load_s": None if layout.load_s is None else round(layout.load_s, 1),
                              "hnsw_build_s": None if layout.build_s is None else round(layout.build_s, 1)}
    with connect(replace(settings, database_url=url)) as owner:
        result["disk"] = disk_sizes(owner)
        postings = owner.execute("SELECT count(*) FROM chunk_postings").fetchone()[0]
        result["postings"] = int(postings)
        result["shared_buffers"] = owner.execute("SHOW shared_buffers").fetchone()[0]
        row_of = id_rows(owner)
    log("  disk: " + ", ".join(f"{k} {mb(v)}" for k, v in result["disk"].items())
        + f"; {postings:,} postings ({postings / n:.1f} per chunk); shared_buffers {result['shared_buffers']}")
    if args.load_only:
        return result
    if args.index_compare:
        import index_compare

        result["index_compare"] = index_compare.run(url, settings, vectors, query_vectors, layout, args)
    conn = rls_connection(url, settings)
    try:
        caps = hnsw_index(conn, DIM)
        result["hnsw_index"] = caps.kind
        indexed = caps.indexed_rows
        q = make_queries(conn, source, args.seed, query_vectors)
        big_rows = np.arange(layout.n_small, n)
        shard_lo, shard_hi = layout.big_starts[FILTER_SHARD], layout.big_starts[FILTER_SHARD + 1]
        cases = [Case("all", store_scope(TENANT, [layout.big.id], layout.big.chunk_count), None, big_rows),
                 Case("store 1%", store_scope(TENANT, [layout.small.id], layout.small.chunk_count), None,
                      np.arange(0, layout.n_small)),
                 attr_case(conn, layout, np.arange(shard_lo, shard_hi))]
        cases = [c for c in cases if c.name in args.cases]
        for case in cases:
            case.truth = exact_top_k(case.rows, vectors, q.vectors, K)
        legs = [leg for leg in LEGS if leg in args.legs]
        log(f"  measuring {len(q.vectors) - WARMUP} queries × {args.rounds} rounds, cases {[c.name for c in cases]}, "
            f"legs {legs} (depth {DEPTH}; ef_search {settings.hnsw_ef_search}, exact_scan_max_rows "
            f"{settings.exact_scan_max_rows}, EXHAUSTIVE_MAX_ROWS {keyword_leg.EXHAUSTIVE_MAX_ROWS})")
        curve_texts = {n: keyword_queries(source, args.seed, n, len(q.vectors), q.lexemes) for n in args.lengths}
        if args.check_queries:
            started = time.perf_counter()
            check_top_k(conn, cases, q.texts, args.check_queries)
            check_top_k(conn, [c for c in cases if c.name == "all"], {f"{n}w": t for n, t in curve_texts.items()},
                        args.check_queries)
            log(f"  top-k vs exhaustive checked on {args.check_queries} queries per set in "
                f"{time.perf_counter() - started:.0f}s")
        measure(conn, cases, q, settings, caps, int(indexed), row_of, vectors, args.rounds, legs)
        if curve_texts:
            result["length_curve"] = run_curve(conn, layout, args, settings, int(indexed), q, curve_texts)
    finally:
        conn.close()
    summaries = {c.name: summarise(c, legs) for c in cases}
    result["cases"] = summaries
    result["top_k_identical"] = {c.name: {w: round(float(np.mean(s)), 4) for w, s in c.identical.items()}
                                 for c in cases}
    result["top_k_returns_k"] = {c.name: {w: round(float(np.mean(c.full[f"kw {w}"])), 4) for w in c.identical}
                                 for c in cases}
    result["keyword_matching_median"] = {c.name: {w: int(np.median(m)) for w, m in c.matching.items()}
                                         for c in cases}
    print_table(n, summaries)
    for c in cases:
        if c.identical:
            log(f"  {c.name}: top-k = exhaustive top 10: " + ", ".join(
                f"{w} {100 * np.mean(s):.1f}% (returns k {100 * np.mean(c.full[f'kw {w}']):.0f}%, median matching "
                f"{int(np.median(c.matching[w])):,})" for w, s in c.identical.items()))
    result["targets"] = verdicts(n, summaries, cases)
    if "length_curve" in result and n in LONG_QUERY_P50_MS:
        first = next(iter(result["length_curve"].values()))
        if str(LONG_QUERY_WORDS) in first:
            result["targets"][f"all: hybrid {LONG_QUERY_WORDS}w p50 ≤ {LONG_QUERY_P50_MS[n]:g} ms (length curve)"] = \
                first[str(LONG_QUERY_WORDS)]["hybrid"]["p50_ms"] <= LONG_QUERY_P50_MS[n]
    for name, ok in result["targets"].items():
        log(f"  {'PASS' if ok else 'MISS'}  {name}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per round (plus warm-up)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (medians reported)")
    parser.add_argument("--check-queries", type=int, default=100,
                        help="queries per set checked top-k vs exhaustive (0: skip; the exhaustive scorer is slow)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {CASES}".replace("%", "%%"))
    parser.add_argument("--legs", default=",".join(LEGS), help=f"comma-separated subset of {LEGS}".replace("%", "%%"))
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--maintenance-work-mem", default=None, help="for the HNSW build (default ~2.5 kB/row)")
    parser.add_argument("--build-workers", type=int, default=max(0, min(7, (os.cpu_count() or 2) - 1)),
                        help="max_parallel_maintenance_workers for the HNSW build")
    parser.add_argument("--rebuild", action="store_true", help="reload even when the database holds the data")
    parser.add_argument("--index-compare", action="store_true",
                        help="also compare HNSW over vector vs halfvec (size, build time, recall, latency)")
    parser.add_argument("--load-only", action="store_true", help="load (or check) the databases, measure nothing")
    parser.add_argument("--lengths", default="",
                        help="query lengths in words for the length curve over the big store, e.g. "
                             f"{','.join(map(str, length_curve.LENGTHS))} (default: no curve)")
    parser.add_argument("--baseline", default=None, metavar="VERSION",
                        help="also time, in the length curve, the keyword top-k of migration VERSION (e.g. 0024) "
                             "with every keyword row exact, interleaved (a before/after in one run)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    args.lengths = [int(n) for n in args.lengths.split(",") if n.strip()]
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    args.legs = [c.strip() for c in args.legs.split(",") if c.strip()]
    if "vector" not in args.legs:
        args.legs.insert(0, "vector")  # the reference of every ratio
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    settings = bench_settings()
    source = load_source(args.seed)
    log(f"search benchmark: sizes {sizes}, {args.queries} queries × {args.rounds} rounds, {source.name} words, "
        f"{DIM}-d clustered vectors; pid {os.getpid()}")
    results = {str(n): run_size(n, args, settings, source) for n in sizes}
    report = {"benchmark": "search", "dim": DIM, "source": source.name, "queries": args.queries,
              "rounds": args.rounds, "seed": args.seed, "ef_search": settings.hnsw_ef_search,
              "exact_scan_max_rows": settings.exact_scan_max_rows,
              "exhaustive_max_rows": keyword_leg.EXHAUSTIVE_MAX_ROWS, "sizes": results}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
