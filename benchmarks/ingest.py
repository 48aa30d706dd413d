"""Ingest throughput per stage — parse, chunk, embed, store — through Engram's real ingest functions.

Corpora: (a) NFCorpus (``corpus.jsonl``; each document as ``<id>.txt``: title, blank line, text, as
``retrieval.py`` ingests it) and (b) the 18 real-world files of ``../shared/data/docs`` (PDF, DOCX, HTML, CSV,
Markdown; some are meant to fail). Each stage is timed on its own over the whole corpus:

* parse — ``ingest.parse.parse_document`` per file (failures are counted and timed too);
* chunk — ``ingest.chunk.chunk_document`` with the default (``auto``) strategy resolved for all-MiniLM-L6-v2 and
  its WordPiece tokenizer (``LocalEmbedder().tokenizer``: only the ``tokenizers`` package is loaded);
* embed — the local model on an evenly spaced sample of ``--embed-sample`` chunks (model load excluded and
  reported apart), once as one batched call and once as one call per document as ``ingest.pipeline`` makes them
  (it embeds each file's missing chunks in one call); ``--embedder hashing`` times the hashing embedder on every
  chunk instead. The embedding cache is not involved;
* store — the transaction that swaps a file's chunks in (``store.attachments.complete``, as the ingestion engine
  runs it: lock the store, mark the file completed, delete its old chunks, insert the new ones in one statement —
  the ``chunks`` triggers keep the BM25 statistics and postings —, add to the store's usage), into a fresh store
  of a fresh database ``engram_bench_ingest`` with the HNSW index present (as in production; the graph starts
  empty unless ``--background-rows N`` first loads N chunks of another store, since inserts into a big shared
  index cost more), vectors precomputed (hashing-embedder vectors of the real chunk texts) so only the store stage
  is timed. The files are registered first (``files.create_file`` + ``attachments.attach``) and that is reported
  as ``register``. Per file: wall milliseconds, statements, CPU of this process and of the Postgres server, WAL
  flushes and bytes (``common.ServerMeter``); time is broken down by statement kind (pipelined statements show
  little: their time lands on the commit). Runs (``--store-runs``, :data:`STORE_RUNS`): ``hnsw`` (the target
  run), ``hnsw_flush4`` (the WAL flushed once per 4 files, as the SQS embedding handler does), diagnostics without
  the postings triggers or without the HNSW index, and ``*_bulk`` runs writing the same chunks as files of
  ``--bulk-file-chunks`` chunks to separate per-row from per-file cost. Every store run gets a freshly created
  database, so no run inserts vectors an earlier run already indexed. Target (issue 11): ≥ 480 rows/s per-file
  with HNSW, 5 × the 96 rows/s measured before. The ``qdrant`` run stores the same files into a Qdrant store as
  the engine does (``ENGRAM_QDRANT_URL``, else the embedded engine under the data folder, collection prefix
  ``bench_ingest_``): the swap's transaction without HNSW or postings plus the upsert of the file's points before
  its commit, then the deletion of older points after it; the vectors are put in the embedding cache first (the
  embedding stage fills it), untimed.

``--e2e N`` (issue 33 §4, ``ingest_e2e.py``): the first N NFCorpus documents through the embedder alone (the local
model, each file's chunks in one call) and end to end through the drop folder and through the SDK, per backend
(``--e2e-backends``), in one run: chunks/s and the ratio to the embedder's own rate (target ≥ 0.7×).

Prints a table, then one JSON line. The database server is ``DATABASE_URL`` or the embedded Postgres under
``ENGRAM_DATA_DIR``; the benchmark databases are dropped and recreated for every store run.

    ./dev python benchmarks/ingest.py
    cd benchmarks && python ingest.py --max-docs 300 --embed-sample 64
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast
from collections.abc import Callable

import numpy as np
import psycopg
from psycopg import sql

from common import SHARED_DATA, ServerMeter, bench_settings, generated_chunking

from chalicelib.config import Settings
from chalicelib.embed import HashingEmbedder, LocalEmbedder
from chalicelib.errors import EngramError
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.store.chunks import Chunk
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse import parse_document
from chalicelib.search.backends import sync
from chalicelib.store import attachments, embedding_cache
from chalicelib.store import files as file_rows
from chalicelib.store import vector_stores
from chalicelib.store.db import connect, database_url, flush_wal, one
from chalicelib.store.migrate import migrate

TENANT = "bench"
# Issue 11: the per-file store stage with the HNSW index present at ≥ 5 × the 96 rows/s measured before that work.
TARGET_ROWS_PER_S = 480
# Store runs: (chunks per file: "per-file" or "bulk", HNSW index present, BM25 statistics/postings triggers on,
# files per WAL flush: 1 = every commit durable; 4 = commits flushed once per 4 files, as the embedding handler's
# SQS batches of 4 records are, chalicelib.store.db.deferred_durability).
STORE_RUNS = {
    "hnsw": ("per-file", True, True, 1),
    "hnsw_flush4": ("per-file", True, True, 4),
    "hnsw_no_triggers": ("per-file", True, False, 1),
    "hnsw_bulk": ("bulk", True, True, 1),
    "no_index": ("per-file", False, True, 1),
    "no_index_bulk": ("bulk", False, True, 1),
    "qdrant": ("per-file", True, True, 1),
}
# Runs whose store lives on Qdrant.
QDRANT_RUNS = frozenset({"qdrant"})
DIM = 384
MODEL = "all-MiniLM-L6-v2"
DATABASE = "engram_bench_ingest"
DATABASE_NO_INDEX = "engram_bench_ingest_noindex"
# Statements of the store transaction, grouped by what they do (first matching pattern of the statement's text).
STATEMENT_GROUPS = (
    (re.compile(r"^\s*COPY ", re.I), "copy"),
    (re.compile(r"INSERT INTO chunks\b", re.I), "insert (triggers, HNSW)"),
    (re.compile(r"DELETE FROM chunks\b", re.I), "delete old chunks"),
    (re.compile(r"usage_bytes = \(SELECT", re.I), "refresh_usage"),
    (re.compile(r"FOR UPDATE|FOR NO KEY UPDATE", re.I), "lock"),
)


# ------------------------------------------------------------------------------------------------- corpora


def nfcorpus_files(folder: Path, max_docs: int | None) -> list[tuple[str, bytes]]:
    out = []
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = (doc.get("title") or "").strip() + "\n\n" + (doc.get("text") or "").strip()
            out.append((f"{doc['_id']}.txt", text.encode("utf-8")))
            if max_docs and len(out) >= max_docs:
                break
    return out


def folder_files(folder: Path, max_docs: int | None) -> list[tuple[str, bytes]]:
    paths = sorted(p for p in folder.iterdir() if p.is_file() and p.name != "MANIFEST.md")
    return [(p.name, p.read_bytes()) for p in paths[:max_docs or None]]


# ------------------------------------------------------------------------------------------------- database


def fresh_database(settings: Any, name: str) -> str:
    """URL of a newly (re)created and migrated database ``name`` on the configured server."""
    base = database_url(settings)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(base, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return url


def statement_group(query: Any) -> str:
    """The :data:`STATEMENT_GROUPS` name of a statement (``other`` when none matches)."""
    text = query if isinstance(query, str) else getattr(query, "_obj", None) or repr(query)
    text = text if isinstance(text, str) else repr(text)
    return next((name for pattern, name in STATEMENT_GROUPS if pattern.search(text)), "other")


class _Timer:
    """Seconds and statement counts per group, shared by a connection and its cursors."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.statements = 0

    def add(self, query: Any, started: float, count: int = 1) -> None:
        group = statement_group(query)
        self.seconds[group] = self.seconds.get(group, 0.0) + time.perf_counter() - started
        self.statements += count


class _TimedCopy:
    def __init__(self, copy_cm: Any, timer: _Timer, query: Any) -> None:
        self._cm, self._timer, self._query = copy_cm, timer, query

    def __enter__(self) -> Any:
        self._started = time.perf_counter()
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._cm.__exit__(*exc)
        finally:
            self._timer.add(self._query, self._started)


class _TimedCursor:
    def __init__(self, cur: Any, timer: _Timer) -> None:
        self._cur, self._timer = cur, timer

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            self._cur.execute(query, params, **kw)
            return self
        finally:
            self._timer.add(query, started)

    def executemany(self, query: Any, params_seq: Any, **kw: Any) -> Any:
        rows = list(params_seq)
        started = time.perf_counter()
        try:
            return self._cur.executemany(query, rows, **kw)
        finally:
            self._timer.add(query, started, len(rows))

    def copy(self, statement: Any, *args: Any, **kw: Any) -> Any:
        return _TimedCopy(self._cur.copy(statement, *args, **kw), self._timer, statement)

    def __enter__(self) -> _TimedCursor:
        self._cur.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._cur.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


class TimedConnection:
    """Stand-in for a connection that adds each statement's wall time (its own, and its cursors') to
    ``seconds[group]`` and counts statements (``executemany`` counts one per row)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn
        self._timer = _Timer()

    @property
    def seconds(self) -> dict[str, float]:
        return self._timer.seconds

    @property
    def statements(self) -> int:
        return self._timer.statements

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._conn.execute(query, params, **kw)
        finally:
            self._timer.add(query, started)

    def cursor(self, *args: Any, **kw: Any) -> _TimedCursor:
        return _TimedCursor(self._conn.cursor(*args, **kw), self._timer)

    def total(self) -> float:
        return sum(self.seconds.values())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@dataclass
class StoreRun:
    label: str
    files: int
    rows: int
    register_s: float
    store_s: float
    statements: int = 0
    breakdown: dict[str, float] = field(default_factory=dict)
    client_cpu_s: float = 0.0
    server: dict[str, float | None] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.store_s if self.store_s else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"files": self.files, "rows": self.rows, "register_s": round(self.register_s, 3),
                "store_s": round(self.store_s, 3), "docs_per_s": round(self.files / self.store_s, 1),
                "rows_per_s": round(self.rows_per_s, 1), "ms_per_file": round(1000 * self.store_s / self.files, 2),
                "statements_per_file": round(self.statements / self.files, 1),
                "client_cpu_ms_per_file": round(1000 * self.client_cpu_s / self.files, 2),
                "server_cpu_ms_per_file": self._per_file("cpu_s", 1000, 2),
                "wal_flushes_per_file": self._per_file("wal_sync", 1, 2),
                "wal_kb_per_file": self._per_file("wal_bytes", 1 / 1024, 1),
                "breakdown_s": {k: round(v, 3) for k, v in sorted(self.breakdown.items())}}

    def _per_file(self, counter: str, scale: float, digits: int) -> float | None:
        """A server counter per file, times ``scale``, rounded (None when the server did not report it)."""
        value = self.server.get(counter)
        return None if value is None else round(scale * value / self.files, digits)


_TRIGGERS = "ALTER TABLE chunks {} TRIGGER chunks_inserted, {} TRIGGER chunks_deleted"
_STORED = """SELECT (SELECT count(*) FROM chunks WHERE vector_store_id = %(store)s),
    (SELECT usage_bytes FROM vector_stores WHERE id = %(store)s),
    (SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files WHERE vector_store_id = %(store)s)"""


def store_run(conn: psycopg.Connection, url: str, label: str,
              groups: list[tuple[str, list[Chunk], list[list[float]]]], *, hnsw: bool = True,
              triggers: bool = True, flush_every: int = 1, qdrant: Settings | None = None) -> StoreRun:
    """Register every file, then time the store transaction of each (``attachments.complete``, as the engine runs
    it) on ``conn``, a connection to the database ``url``. ``hnsw=False`` drops the HNSW index that
    ``vector_stores.create`` makes; ``triggers=False`` disables the statement triggers that keep the BM25
    statistics and postings (a diagnostic: keyword search is then wrong); ``flush_every=n`` commits without waiting
    for the WAL and flushes it after every ``n`` files; ``qdrant`` (the settings reaching it): the store lives on
    Qdrant, and each file's points are written as the engine writes them."""
    store = vector_stores.create(conn, TENANT, name=label, model=MODEL, dim=DIM,
                                 backend="qdrant" if qdrant else "pgvector")
    if qdrant is not None:  # what the embedding stage leaves in the cache
        with conn.transaction():
            embedding_cache.store(conn, TENANT, MODEL, [(embedding_cache.text_hash(c.text), v)
                                                        for _, chunks, vectors in groups
                                                        for c, v in zip(chunks, vectors, strict=True)])
    if not hnsw:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_stores.hnsw_index_name(DIM))))
    started = time.perf_counter()
    file_ids = []
    for filename, _, _ in groups:
        data = filename.encode()  # the file's bytes do not matter to the store stage
        with conn.transaction():
            file_id = file_rows.create_file(conn, TENANT, filename=filename, data=data).id
            attachments.attach(conn, TENANT, store.id, file_id, attributes={}, chunking_strategy=generated_chunking())
        file_ids.append(file_id)
    register_s = time.perf_counter() - started
    if not triggers:
        conn.execute(_TRIGGERS.format("DISABLE", "DISABLE"))
    timer = TimedConnection(conn)
    timed = cast(psycopg.Connection, timer)  # a stand-in forwarding everything to ``conn``
    meter = ServerMeter(url)
    server_before, cpu_before = meter.read(), time.process_time()
    started = time.perf_counter()
    if flush_every > 1:
        conn.execute("SET synchronous_commit = off")
    try:
        for n, (file_id, (filename, chunks, vectors)) in enumerate(zip(file_ids, groups), 1):
            if qdrant is None:
                attachments.complete(timed, TENANT, store.id, file_id, chunks=chunks, vectors=vectors, dim=DIM,
                                     content_sha256=file_rows.sha256_hex(filename.encode()), attempt=None)
            else:
                with conn.transaction():
                    ahead = sync.lock_ahead(timed, qdrant, TENANT, store.id, file_id)
                    attachments.complete(timed, TENANT, store.id, file_id, chunks=chunks, vectors=vectors, dim=DIM,
                                         content_sha256=file_rows.sha256_hex(filename.encode()), attempt=None)
                    sync.write_ahead(timed, qdrant, TENANT, store.id, file_id, store=ahead)
                sync.after_write(conn, qdrant, store_id=store.id, file_id=file_id)
            if flush_every > 1 and (n % flush_every == 0 or n == len(groups)):
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit = on")
                    flush_wal(conn)
        store_s = time.perf_counter() - started
    finally:
        conn.execute("RESET synchronous_commit")
        if not triggers:
            conn.execute(_TRIGGERS.format("ENABLE", "ENABLE"))
    client_cpu_s = time.process_time() - cpu_before
    time.sleep(1.1)  # WAL statistics of idle backends are reported within a second (PGSTAT_MIN_INTERVAL)
    server = ServerMeter.delta(server_before, meter.read())
    breakdown = dict(timer.seconds)
    breakdown["begin_commit_client"] = store_s - sum(breakdown.values())
    stored, usage, file_usage = one(conn.execute(_STORED, {"store": store.id}))
    rows = sum(len(c) for _, c, _ in groups)
    assert stored == rows, f"store holds {stored} chunks, wrote {rows}"
    assert usage == file_usage, f"store usage_bytes {usage} != its files' {file_usage}"
    if triggers:
        counted = vector_stores.get(conn, TENANT, store.id).chunk_count
        assert counted == rows, f"store counts {counted} chunks, wrote {rows}"
    return StoreRun(label, len(groups), rows, register_s, store_s, timer.statements, breakdown, client_cpu_s, server)


def add_background(conn: psycopg.Connection, rows: int, *, hnsw: bool) -> dict[str, float]:
    """Fill the database with ``rows`` other chunks (random unit vectors, short texts) in a store of their own, so
    the timed runs write into an HNSW graph (and btree/GIN indexes) of production-like size. The index is built
    after the load, in memory and in parallel; returns the load and build seconds."""
    store = vector_stores.create(conn, TENANT, name="background", model=MODEL, dim=DIM)
    index = sql.Identifier(vector_stores.hnsw_index_name(DIM))
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(index))
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for lo in range(0, rows, 5000):
        count = min(5000, rows - lo)
        vectors = rng.standard_normal((count, DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        texts = [f"background row {lo + i} " + " ".join(f"w{w}" for w in rng.integers(0, 5000, 8)) for i in range(count)]
        chunks = [Chunk(i, t, len(t.split()), 0, len(t)) for i, t in enumerate(texts)]
        with conn.transaction():
            file_id = file_rows.create_file(conn, TENANT, filename=f"background-{lo:08d}.txt", data=b"background").id
            attachments.attach(conn, TENANT, store.id, file_id, attributes={}, chunking_strategy=generated_chunking())
        attachments.complete(conn, TENANT, store.id, file_id, chunks=chunks, vectors=list(vectors), dim=DIM,
                             content_sha256="-", attempt=None)
    load_s = time.perf_counter() - started
    build_s = 0.0
    if hnsw:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        started = time.perf_counter()
        vector_stores.ensure_hnsw_index(conn, DIM)
        build_s = time.perf_counter() - started
        conn.execute("RESET maintenance_work_mem")
        conn.execute("RESET max_parallel_maintenance_workers")
    conn.execute("VACUUM ANALYZE chunks")
    print(f"  background: {rows:,} rows loaded in {load_s:.1f}s" + (f", HNSW built in {build_s:.1f}s" if hnsw else ""),
          flush=True)
    return {"rows": rows, "load_s": round(load_s, 1), "hnsw_build_s": round(build_s, 1)}


def regroup(per_doc: list[tuple[str, list[Chunk], list[list[float]]]], size: int
            ) -> list[tuple[str, list[Chunk], list[list[float]]]]:
    """The same chunks as files of ``size`` chunks (re-indexed within each file)."""
    flat = [(c, v) for _, cs, vs in per_doc for c, v in zip(cs, vs)]
    out = []
    for lo in range(0, len(flat), size):
        part = flat[lo:lo + size]
        chunks = [replace(c, index=i) for i, (c, _) in enumerate(part)]
        out.append((f"bulk-{lo:08d}.txt", chunks, [v for _, v in part]))
    return out


# ---------------------------------------------------------------------------------------------------- stages


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def run_corpus(name: str, files: list[tuple[str, bytes]], args: argparse.Namespace, settings: Any,
               local: LocalEmbedder, hashing: HashingEmbedder) -> dict[str, Any]:
    result: dict[str, Any] = {"files": len(files), "bytes": sum(len(d) for _, d in files)}
    print(f"\n{name}: {len(files)} files, {result['bytes'] / 1e6:.1f} MB", flush=True)

    # parse
    documents: list[tuple[str, ParsedDocument]] = []
    failures: dict[str, str] = {}
    started = time.perf_counter()
    for filename, data in files:
        try:
            documents.append((filename, parse_document(data, filename)))
        except EngramError as exc:
            failures[filename] = f"{type(exc).__name__}: {exc.message}"[:160]
    parse_s = time.perf_counter() - started
    result["parse"] = {"docs": len(files), "seconds": round(parse_s, 3), "docs_per_s": round(len(files) / parse_s, 1),
                       "mb_per_s": round(result["bytes"] / 1e6 / parse_s, 2), "failed": failures}

    # chunk
    strategy = resolve_chunking_strategy(None, embedder_max_tokens=local.max_input_tokens)
    local.tokenizer.count("warm up")  # loads tokenizer.json once, outside the timing
    started = time.perf_counter()
    per_doc = [(filename, chunk_document(doc, strategy, local.tokenizer)) for filename, doc in documents]
    chunk_s = time.perf_counter() - started
    per_doc = [(f, cs) for f, cs in per_doc if cs]  # documents without text store nothing
    n_chunks = sum(len(cs) for _, cs in per_doc)
    result["chunk"] = {"docs": len(documents), "chunks": n_chunks, "seconds": round(chunk_s, 3),
                       "docs_per_s": round(len(documents) / chunk_s, 1), "chunks_per_s": round(n_chunks / chunk_s, 1),
                       "strategy": [strategy.max_chunk_size_tokens, strategy.chunk_overlap_tokens]}

    # embed
    if args.embedder == "hashing":
        texts = [c.text for _, cs in per_doc for c in cs]
        _, embed_s = timed(lambda: hashing.embed(texts))
        result["embed"] = {"embedder": hashing.model, "chunks": len(texts), "seconds": round(embed_s, 3),
                           "chunks_per_s": round(len(texts) / embed_s, 1)}
    else:
        # Whole documents, evenly spaced through the corpus, until the sample holds --embed-sample chunks.
        docs_needed = max(1, -(-args.embed_sample * len(per_doc) // max(1, n_chunks)))
        step = max(1, len(per_doc) // docs_needed)
        order = [i for offset in range(step) for i in range(offset, len(per_doc), step)]
        sample_docs, count = [], 0
        for i in order:
            if count >= args.embed_sample:
                break
            sample_docs.append([c.text for c in per_doc[i][1][: args.embed_sample - count]])
            count += len(sample_docs[-1])
        texts = [t for doc in sample_docs for t in doc]
        _, batched_s = timed(lambda: local.embed(texts))
        _, per_file_s = timed(lambda: [local.embed(doc) for doc in sample_docs])
        result["embed"] = {"embedder": local.model, "sample_chunks": len(texts), "sample_docs": len(sample_docs),
                           "batched_s": round(batched_s, 3), "chunks_per_s": round(len(texts) / batched_s, 1),
                           "per_file_s": round(per_file_s, 3),
                           "per_file_chunks_per_s": round(len(texts) / per_file_s, 1),
                           "docs_per_s_est": round(len(sample_docs) / per_file_s, 2)}

    # store (vectors precomputed, untimed)
    groups = [(f, cs, hashing.embed([c.text for c in cs])) for f, cs in per_doc]
    runs: dict[str, StoreRun] = {}

    def run_store(label: str, write: list[Any], hnsw: bool, triggers: bool, flush_every: int,
                  qdrant: Settings | None) -> StoreRun:
        # A fresh database per run: a second run into the same index would insert duplicate vectors (cheap).
        url = fresh_database(settings, DATABASE if hnsw else DATABASE_NO_INDEX)
        conn = connect(replace(settings, database_url=url))
        try:
            if args.background_rows:
                key = label if hnsw else f"{label}-no-index"
                result.setdefault("background", {})[key] = add_background(conn, args.background_rows, hnsw=hnsw)
            return store_run(conn, url, label, write, hnsw=hnsw, triggers=triggers, flush_every=flush_every,
                             qdrant=qdrant)
        finally:
            conn.close()

    bulk = regroup(groups, args.bulk_file_chunks)
    for key in [k.strip() for k in args.store_runs.split(",") if k.strip()]:
        shape, hnsw, triggers, flush_every = STORE_RUNS[key]
        on_qdrant = replace(settings, vector_backend="qdrant", qdrant_collection_prefix="bench_ingest_")
        runs[key] = run_store(f"{name}-{shape}", groups if shape == "per-file" else bulk, hnsw, triggers, flush_every,
                              on_qdrant if key in QDRANT_RUNS else None)
    result["store"] = {k: r.as_json() for k, r in runs.items()}
    if "hnsw" in runs:
        result["store_target_met"] = runs["hnsw"].rows_per_s >= TARGET_ROWS_PER_S
    return result


# ------------------------------------------------------------------------------------------------------ main


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'corpus':9s} {'stage':24s} {'docs':>6s} {'chunks':>7s} {'seconds':>8s} {'docs/s':>9s} {'chunks/s':>9s}")
    for name, r in results.items():
        p, c, e = r["parse"], r["chunk"], r["embed"]
        print(f"{name:9s} {'parse':24s} {p['docs']:6d} {'':>7s} {p['seconds']:8.2f} {p['docs_per_s']:9.1f} {'':>9s}")
        print(f"{name:9s} {'chunk':24s} {c['docs']:6d} {c['chunks']:7d} {c['seconds']:8.2f} {c['docs_per_s']:9.1f} "
              f"{c['chunks_per_s']:9.1f}")
        if "sample_chunks" in e:
            print(f"{name:9s} {'embed (batched sample)':24s} {e['sample_docs']:6d} {e['sample_chunks']:7d} "
                  f"{e['batched_s']:8.2f} {'':>9s} {e['chunks_per_s']:9.1f}")
            print(f"{name:9s} {'embed (per-file sample)':24s} {e['sample_docs']:6d} {e['sample_chunks']:7d} "
                  f"{e['per_file_s']:8.2f} {e['docs_per_s_est']:9.1f} {e['per_file_chunks_per_s']:9.1f}")
        else:
            print(f"{name:9s} {'embed (' + e['embedder'] + ')':24s} {'':>6s} {e['chunks']:7d} {e['seconds']:8.2f} "
                  f"{'':>9s} {e['chunks_per_s']:9.1f}")
        for label, s in r["store"].items():
            mark = ""
            if label == "hnsw":
                mark = "  target ≥ {:,}: {}".format(TARGET_ROWS_PER_S, "PASS" if r["store_target_met"] else "MISS")
            print(f"{name:9s} {'store ' + label:24s} {s['files']:6d} {s['rows']:7d} {s['store_s']:8.2f} "
                  f"{s['docs_per_s']:9.1f} {s['rows_per_s']:9.1f}{mark}")
            parts = ", ".join(f"{k} {v:.2f}s" for k, v in sorted(s["breakdown_s"].items(), key=lambda kv: -kv[1]))
            print(f"{'':9s}   per file: {s['ms_per_file']:.1f} ms, {s['statements_per_file']:.1f} statements, CPU "
                  f"{s['client_cpu_ms_per_file']} ms here + {s['server_cpu_ms_per_file']} ms Postgres, "
                  f"{s['wal_flushes_per_file']} WAL flushes, {s['wal_kb_per_file']} kB WAL")
            print(f"{'':9s}   {parts}; register (not in store) {s['register_s']:.2f}s")
        if r["parse"]["failed"]:
            print(f"{'':9s}   parse failures: " + "; ".join(f"{f}: {m}" for f, m in r["parse"]["failed"].items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nfcorpus", type=Path, default=SHARED_DATA / "beir" / "nfcorpus")
    parser.add_argument("--docs", type=Path, default=SHARED_DATA / "docs")
    parser.add_argument("--corpora", default="nfcorpus,docs", help="which corpora to run (comma-separated)")
    parser.add_argument("--max-docs", type=int, default=None, help="only the first N documents of each corpus")
    parser.add_argument("--embed-sample", type=int, default=256, help="chunks embedded with the local model")
    parser.add_argument("--embedder", choices=("local", "hashing"), default="local",
                        help="embed stage: local model on a sample, or the hashing embedder on every chunk")
    parser.add_argument("--bulk-file-chunks", type=int, default=1000, help="chunks per file in the bulk store run")
    parser.add_argument("--background-rows", type=int, default=0,
                        help="chunks of another store loaded (and HNSW-indexed) before the store runs, e.g. 100000")
    parser.add_argument("--store-runs", default=",".join(STORE_RUNS),
                        help="comma-separated store runs: " + ", ".join(STORE_RUNS))
    parser.add_argument("--e2e", type=int, default=0, metavar="N",
                        help="also the first N NFCorpus documents end to end (drop folder, SDK) against the embedder "
                             "alone, per backend (ingest_e2e.py; 0: skip)")
    parser.add_argument("--e2e-backends", default="pgvector,qdrant", help="backends of the end-to-end runs")
    args = parser.parse_args()
    settings = bench_settings()
    local = LocalEmbedder()
    hashing = HashingEmbedder(DIM)
    model_load_s = None
    if args.embedder == "local":
        _, model_load_s = timed(lambda: local.embed(["warm up the model"]))
    print(f"ingest benchmark: corpora {args.corpora}; embedder {args.embedder}"
          + (f" (model load {model_load_s:.1f}s, not counted)" if model_load_s is not None else ""), flush=True)
    results: dict[str, dict[str, Any]] = {}
    for name in [c.strip() for c in args.corpora.split(",") if c.strip()]:
        if name == "nfcorpus":
            files = nfcorpus_files(args.nfcorpus, args.max_docs)
        elif name == "docs":
            files = folder_files(args.docs, args.max_docs)
        else:
            parser.error(f"unknown corpus {name!r}")
        results[name] = run_corpus(name, files, args, settings, local, hashing)
    print_table(results)
    e2e = None
    if args.e2e:
        import ingest_e2e

        print(f"\nend to end: {args.e2e} NFCorpus documents, backends {args.e2e_backends}", flush=True)
        e2e = ingest_e2e.run(nfcorpus_files(args.nfcorpus, args.e2e),
                             [b.strip() for b in args.e2e_backends.split(",") if b.strip()])
    print(json.dumps({"benchmark": "ingest", "embedder": args.embedder, "embed_sample": args.embed_sample,
                      "model_load_s": None if model_load_s is None else round(model_load_s, 2),
                      "target_store_rows_per_s": TARGET_ROWS_PER_S, "corpora": results, "e2e": e2e}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
