"""Search over HTTP against the local server vs. the same search called in-process: requests/s, p50/p95 and the
overhead ratio (target: HTTP p50 ≤ 1.5 × in-process p50), at ``--chunks`` chunks (default 100,000).

Data. One database ``engram_bench_api_<N>`` on the configured server (``DATABASE_URL``, else the embedded Postgres
under ``ENGRAM_DATA_DIR``) holds tenant ``bench`` with one vector store of N chunks (files of ≤ 5,000 chunks, written
as the ingestion engine writes them: ``attachments.complete``, one INSERT whose triggers keep the BM25 statistics; the
HNSW index is dropped for the bulk load and built afterwards). Chunk texts are word salad with topics: each chunk
(80–160 words) draws 70 % of its words from one NFCorpus document (its "topic") and 30 % from the whole corpus's
word distribution (``../shared/data/beir/nfcorpus``; a synthetic syllable vocabulary when it is absent). Vectors are
the hashing embedder's (``HashingEmbedder(384)``) of those texts, so the vector and keyword legs see consistent
data; queries are NFCorpus's real query texts (plain English, a few words). A re-run reuses a database that
already holds the same data (generator, seed, rows).

Embedder. The server and the in-process calls both use the hashing embedder: embedding a query costs ~0.02 ms, so
the numbers measure search + API overhead, not a model (a real model adds the same per-query cost to both sides).

Measured, per mode (``hybrid`` = default ranking; ``vector`` = ``ranking_options.hybrid_search`` with
``text_weight 0``), all with ``max_num_results=10``:

* ``in-process search()`` — the baseline: ``search(conn, tenant, [store], [query], ...)`` exactly as the route
  calls it, each query in its own ``store.db.tenant_connection`` (pool checkout, ``SET ROLE`` + tenant setting,
  reset on return: RLS applied like the route), sequential;
* ``in-process route body`` (diagnostic) — everything the route does with the database: checkout, store lookup,
  ``require_active``, ``search``, ``vector_stores.touch``, plus building the response dict and ``json.dumps``;
* ``HTTP, openai SDK, 1 client`` — ``client.vector_stores.search(store_id, query=..., max_num_results=10)``
  sequential (the like-for-like overhead number);
* ``HTTP, raw httpx, 1 client`` (diagnostic) — the same POST without the SDK (separates SDK parsing cost);
* ``HTTP, openai SDK, 8 clients`` — 8 threads, one ``openai.OpenAI`` each, for ``--duration`` seconds:
  requests/s and p50/p95 per request.

The server is ``engram_cli.server.start`` (Chalice's threaded local server running ``app.py``, auth mode ``keys``,
``worker_threads=0``, ``db_pool_size`` ≥ clients) in a separate process (``--same-process`` runs it in this one:
then the client threads share its GIL), with EMF metrics off (``ENGRAM_METRICS=off``) and request logging
silenced (powertools logger at WARNING, Chalice's access log dropped), so printing does not distort timing.
Then a breakdown of the fixed per-request database work (sequential p50 of each statement) and of the hot-row
``touch`` under concurrency.

    ./dev python benchmarks/api.py                        # 100k chunks (first run builds: a few minutes)
    ./dev python benchmarks/api.py --chunks 10000 --duration 10
    cd benchmarks && python api.py --chunks 100000 --json
"""

from __future__ import annotations

import os
from pathlib import Path

# Before anything imports chalicelib.observability (search.service does): no EMF documents, no request log
# lines. Inherited by the server process.
os.environ["ENGRAM_METRICS"] = "off"
os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import json
import math
import multiprocessing
import re
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import psycopg
from psycopg import sql

from common import SHARED_DATA, bench_settings, generated_chunking, percentile

from chalicelib import observability
from chalicelib.api import objects
from chalicelib.embed.hashing import HashingEmbedder
from chalicelib.store.chunks import Chunk
from chalicelib.search import service
from chalicelib.search.keyword import keyword_search
from chalicelib.search.service import parse_ranking_options, search
from chalicelib.search.corpus import CHUNKS, store_scope
from chalicelib.search.vector import VectorScope, prefer_exact, vector_search
from chalicelib.store import api_keys
from chalicelib.store import attachments
from chalicelib.store import files as file_rows
from chalicelib.store import vector_stores
from chalicelib.store.db import capabilities, close_pools, connect, one, pool, tenant_connection
from search import auto_mwm, build_index, database_for, drop_database, index_valid

observability.configure(False)

GENERATOR = "topic-salad-v1"  # bump when the data generator changes: stored databases are then rebuilt
DIM = 384
TENANT = "bench"
ROWS_PER_FILE = 5000
MIN_WORDS, MAX_WORDS = 80, 160
TOPIC_SHARE = 0.7  # share of a chunk's words drawn from its topic document
LIMIT = 10
TARGET_RATIO = 1.5
MODES = {"hybrid": None, "vector": {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}}
NFCORPUS = SHARED_DATA / "beir" / "nfcorpus"
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "du", "ga", "ho", "ji", "ze", "fu", "be"]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- data


@dataclass
class Corpus:
    words: list[str]  # vocabulary
    tokens: np.ndarray  # every document's word ids, concatenated
    offsets: np.ndarray  # document d is tokens[offsets[d]:offsets[d + 1]]
    queries: list[str]
    source: str


def load_corpus(seed: int) -> Corpus:
    """NFCorpus documents (word ids) and queries; a synthetic syllable corpus when NFCorpus is not there."""
    vocab: dict[str, int] = {}
    docs: list[list[int]] = []
    queries: list[str] = []
    if (NFCORPUS / "corpus.jsonl").exists() and (NFCORPUS / "queries.jsonl").exists():
        with open(NFCORPUS / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                words = _WORD.findall(f"{doc.get('title', '')} {doc.get('text', '')}")
                if words:
                    docs.append([vocab.setdefault(w, len(vocab)) for w in words])
        with open(NFCORPUS / "queries.jsonl", encoding="utf-8") as fh:
            queries = [q["text"] for q in map(json.loads, fh) if q.get("text", "").strip()]
        source = "nfcorpus"
    else:
        rng = np.random.default_rng([seed, 11])
        words = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES[:8]]
        vocab = {w: i for i, w in enumerate(words)}
        for _ in range(3000):
            docs.append(list((len(words) * rng.random(150) ** 3).astype(int)))
        queries = [" ".join(words[w] for w in rng.choice(docs[int(d)], 4)) for d in rng.integers(0, len(docs), 3000)]
        source = "syllables"
    order = np.random.default_rng([seed, 5]).permutation(len(queries))
    tokens = np.fromiter((t for d in docs for t in d), dtype=np.int32)
    offsets = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    return Corpus(list(vocab), tokens, offsets, [queries[i] for i in order], source)


def texts_for(corpus: Corpus, seed: int, start: int, count: int) -> list[str]:
    """Texts of rows ``start…start+count-1`` (deterministic per ``seed`` and ``start``)."""
    rng = np.random.default_rng([seed, start, 3])
    n_docs, total = len(corpus.offsets) - 1, len(corpus.tokens)
    topics = rng.integers(0, n_docs, count)
    lengths = rng.integers(MIN_WORDS, MAX_WORDS + 1, count)
    out = []
    for d, n in zip(topics, lengths):
        lo, hi = int(corpus.offsets[d]), int(corpus.offsets[d + 1])
        own = rng.random(n) < TOPIC_SHARE
        idx = np.where(own, lo + rng.integers(0, hi - lo, n), rng.integers(0, total, n))
        words = [corpus.words[t] for t in corpus.tokens[idx]]
        out.append(". ".join(" ".join(words[i:i + 15]) for i in range(0, len(words), 15)) + ".")
    return out


def embed_batch(texts: list[str]) -> np.ndarray:
    """Hashing-embedder vectors of ``texts`` (run in worker processes)."""
    return np.asarray(HashingEmbedder(DIM).embed(texts), dtype=np.float32)


# ------------------------------------------------------------------------------------------------- database


def store_name(n: int) -> str:
    return f"api-{n}"


def find_store(conn: psycopg.Connection, n: int, seed: int, source: str) -> vector_stores.VectorStore | None:
    """The store when the database already holds exactly this data set (and a valid HNSW index), else None."""
    stores = vector_stores.list_all(conn, TENANT)
    if len(stores) != 1 or stores[0].name != store_name(n):
        return None
    store, meta = stores[0], stores[0].metadata
    if (meta.get("generator"), meta.get("seed"), meta.get("rows"), meta.get("corpus")) != (GENERATOR, seed, n, source) \
            or store.chunk_count != n or store.embedding_model != HashingEmbedder(DIM).model:
        return None
    (total,) = one(conn.execute("SELECT count(*) FROM chunks"))
    return store if total == n and index_valid(conn) else None


def prepare(settings: Any, n: int, corpus: Corpus, args: argparse.Namespace) -> tuple[str, vector_stores.VectorStore]:
    """``(database url, store)`` for ``n`` chunks, built unless already there."""
    name = f"engram_bench_api_{n}"
    url = database_for(settings, name)
    with connect(replace(settings, database_url=url)) as conn:
        found = None if args.rebuild else find_store(conn, n, args.seed, corpus.source)
    if found is not None:
        log(f"  reusing {n:,} chunks already in database {name}")
        return url, found
    drop_database(settings, name)
    url = database_for(settings, name)
    conn = connect(replace(settings, database_url=url))
    embedder = HashingEmbedder(DIM)
    store = vector_stores.create(conn, TENANT, name=store_name(n), model=embedder.model, dim=DIM,
                                 metadata={"generator": GENERATOR, "seed": args.seed, "rows": n,
                                           "corpus": corpus.source})
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vector_stores.hnsw_index_name(DIM))))
    started = time.perf_counter()
    starts = list(range(0, n, ROWS_PER_FILE))
    batches = [texts_for(corpus, args.seed, s, min(ROWS_PER_FILE, n - s)) for s in starts]
    log(f"  generated {n:,} texts in {time.perf_counter() - started:.1f}s ({corpus.source} words); "
        f"embedding with {args.build_procs} process(es) and loading")
    procs = max(1, args.build_procs)
    executor = ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) if procs > 1 else None
    vectors_iter = executor.map(embed_batch, batches) if executor else map(embed_batch, batches)
    try:
        for s, texts, vectors in zip(starts, batches, vectors_iter):
            load_file(conn, store, s, texts, vectors)
    finally:
        if executor:
            executor.shutdown()
    load_s = time.perf_counter() - started
    log(f"  embedded + loaded {n:,} chunks in {load_s:.1f}s ({n / load_s:,.0f} chunks/s, no HNSW index)")
    conn.execute("ANALYZE chunks")
    build_s, notices = build_index(conn, args.maintenance_work_mem or auto_mwm(n), args.build_workers)
    log(f"  HNSW build {build_s:.1f}s" + "".join(f"\n    {m}" for m in notices))
    conn.execute("VACUUM ANALYZE")
    store = vector_stores.get(conn, TENANT, store.id)
    conn.close()
    return url, store


def load_file(conn: psycopg.Connection, store: vector_stores.VectorStore, start: int, texts: list[str],
              vectors: np.ndarray) -> None:
    """One file of chunks, written as the ingestion engine writes it (:func:`attachments.complete`)."""
    chunks, offset = [], 0
    for i, text in enumerate(texts):
        chunks.append(Chunk(i, text, len(text.split()) + 2, offset, offset + len(text)))
        offset += len(text) + 2
    data = f"synthetic rows {start}..{start + len(texts) - 1}".encode()
    with conn.transaction():
        file_id = file_rows.create_file(conn, TENANT, filename=f"row{start:08d}.txt", data=data).id
        attachments.attach(conn, TENANT, store.id, file_id, attributes={}, chunking_strategy=generated_chunking())
    attachments.complete(conn, TENANT, store.id, file_id, chunks=chunks, vectors=list(vectors), dim=DIM,
                         content_sha256=file_rows.sha256_hex(data), attempt=None)


# --------------------------------------------------------------------------------------------------- server


def quiet_server(tcp_nodelay: bool) -> None:
    """No per-request output from the server: powertools logger at WARNING, Chalice's access log dropped. With
    ``tcp_nodelay`` (diagnostic, not what the product does) Chalice's handler sets TCP_NODELAY on its sockets."""
    import logging

    import chalice.local

    observability.configure(False)
    observability.get_logger().setLevel(logging.WARNING)
    chalice.local.ChaliceRequestHandler.log_message = lambda self, *a, **kw: None
    if tcp_nodelay:
        chalice.local.ChaliceRequestHandler.disable_nagle_algorithm = True


def serve(settings: Any, urls: Any, stop: Any, tcp_nodelay: bool) -> None:
    """Server process body: start the local server, report its URL, run until ``stop`` is set."""
    from engram_cli.server import start

    quiet_server(tcp_nodelay)
    running = start(settings, host="127.0.0.1", port=0, embedder=HashingEmbedder(DIM), worker_threads=0)
    urls.put(running.url)
    stop.wait()
    running.stop()


class Server:
    """The local server, in a child process (default) or in this one."""

    def __init__(self, settings: Any, same_process: bool, tcp_nodelay: bool) -> None:
        self.pid: int | None = None
        if same_process:
            from engram_cli.server import start

            quiet_server(tcp_nodelay)
            self._running = start(settings, host="127.0.0.1", port=0, embedder=HashingEmbedder(DIM),
                                  worker_threads=0)
            self.url, self._proc = self._running.url, None
            return
        ctx = multiprocessing.get_context("spawn")
        urls, self._stop = ctx.Queue(), ctx.Event()
        self._proc = ctx.Process(target=serve, args=(settings, urls, self._stop, tcp_nodelay), name="engram-bench-server")
        self._proc.start()
        self.url, self.pid = urls.get(timeout=120), self._proc.pid

    def cpu_s(self) -> float | None:
        """CPU seconds (user + system) the server process has used so far (None in same-process mode)."""
        if self.pid is None:
            return None
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._proc is None:
            self._running.stop()
            return
        self._stop.set()
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(10)


# ------------------------------------------------------------------------------------------------ measuring


def stats(times_ms: Sequence[float], elapsed_s: float | None = None, clients: int = 1) -> dict[str, Any]:
    """p50/p95/mean of per-request milliseconds; requests/s from ``elapsed_s`` (else sequential: 1000/mean)."""
    mean = sum(times_ms) / len(times_ms)
    rps = len(times_ms) / elapsed_s if elapsed_s else 1000.0 / mean
    return {"clients": clients, "requests": len(times_ms), "rps": round(rps, 1),
            "p50_ms": round(percentile(list(times_ms), 50), 2), "p95_ms": round(percentile(list(times_ms), 95), 2),
            "mean_ms": round(mean, 2)}


def sequential(fn: Callable[[str], Any], queries: Sequence[str], warmup: int) -> list[float]:
    for q in queries[:warmup]:
        fn(q)
    times = []
    for q in queries[warmup:]:
        started = time.perf_counter()
        fn(q)
        times.append(1000 * (time.perf_counter() - started))
    return times


def concurrent(make: Callable[[], Callable[[str], Any]], queries: Sequence[str], clients: int, duration_s: float,
               warmup: int) -> tuple[list[float], float]:
    """``clients`` threads, each with its own ``make()`` caller, sending queries for ``duration_s`` after a
    warm-up; returns (per-request ms, elapsed s from the common start to the last completion)."""
    barrier = threading.Barrier(clients + 1)
    results: list[list[float]] = [[] for _ in range(clients)]
    ends = [0.0] * clients
    errors: list[BaseException] = []
    state = {"deadline": math.inf}

    def run(i: int) -> None:
        try:
            call = make()
            for k in range(warmup):
                call(queries[(i * 37 + k) % len(queries)])
        except BaseException as exc:
            errors.append(exc)
        barrier.wait()
        k = 0
        try:
            while not errors:
                q = queries[(i * 997 + k) % len(queries)]
                started = time.perf_counter()
                if started >= state["deadline"]:
                    break
                call(q)
                done = time.perf_counter()
                results[i].append(1000 * (done - started))
                ends[i] = done
                k += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    state["deadline"] = math.inf
    barrier.wait()
    begin = time.perf_counter()
    state["deadline"] = begin + duration_s
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [t for r in results for t in r], max(ends) - begin


def sdk_caller(url: str, key: str, store_id: str, ranking: dict | None) -> Callable[[], Callable[[str], Any]]:
    import openai

    def make() -> Callable[[str], Any]:
        client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)
        # Engram's ranking_options (hybrid_search) are not in the SDK's type: sent in the body as they are.
        extra = None if ranking is None else {"ranking_options": ranking}

        def call(q: str) -> Any:
            return client.vector_stores.search(store_id, query=q, max_num_results=LIMIT, extra_body=extra)

        return call

    return make


def raw_caller(url: str, key: str, store_id: str, ranking: dict | None) -> Callable[[], Callable[[str], Any]]:
    import httpx

    def make() -> Callable[[str], Any]:
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

        def call(q: str) -> Any:
            body = {"query": q, "max_num_results": LIMIT}
            if ranking is not None:
                body["ranking_options"] = ranking
            response = client.post(f"/vector_stores/{store_id}/search", json=body)
            response.raise_for_status()
            return response.json()

        return call

    return make


def check_same(sdk_call: Callable[[str], Any], local_call: Callable[[str], Any], queries: Sequence[str]) -> bool:
    """The HTTP results (files, scores) equal the in-process ones for the first few queries."""
    for q in queries[:5]:
        page = sdk_call(q)
        over_http = [(d.file_id, round(d.score, 5), d.content[0].text) for d in page.data]
        local = [(h.file_id, round(h.score, 5), h.text) for h in local_call(q)]
        if over_http != local:
            return False
    return True


def breakdown(settings: Any, store: vector_stores.VectorStore, key: str, queries: Sequence[str], n: int,
              clients: int, duration_s: float, warmup: int) -> dict[str, Any]:
    """Sequential p50/p95 of each fixed piece of per-request database work (``queries`` past the first ``warmup``),
    and ``touch`` under concurrency."""
    embedder = HashingEmbedder(DIM)
    out: dict[str, Any] = {}

    def timed(label: str, fn: Callable[[str], Any]) -> None:
        out[label] = stats(sequential(fn, queries, warmup))

    with tenant_connection(settings, TENANT) as conn:
        caps = vector_stores.hnsw_index(conn, DIM)
        scope = VectorScope(CHUNKS, store_scope(TENANT, [store.id], store.chunk_count), DIM, caps.indexed_rows)
        depth = max(service.MIN_CANDIDATES, 2 * LIMIT)
        timed("round trip (SELECT 1)", lambda q: conn.execute("SELECT 1").fetchone())
        timed("hnsw_index() query (+ indexed rows)", lambda q: vector_stores.hnsw_index(conn, DIM))
        timed("vector_stores.get", lambda q: vector_stores.get(conn, TENANT, store.id))
        # A store loaded as idle, so the UPDATE is sent (a store touched within the minute is skipped client-side).
        idle = replace(store, last_active_at=datetime(2000, 1, 1, tzinfo=UTC))
        timed("vector_stores.touch (UPDATE)", lambda q: vector_stores.touch(conn, TENANT, [idle]))
        timed("embed query (hashing)", lambda q: embedder.embed([q]))
        vecs = {q: embedder.embed([q])[0] for q in queries}
        timed(f"vector leg (k={depth})", lambda q: vector_search(
            conn, scope, vecs[q], depth, where=None, ef_search=settings.hnsw_ef_search,
            exact_scan_max_rows=settings.exact_scan_max_rows, iterative_scan=caps.iterative_scan,
            halfvec=caps.halfvec))
        timed(f"keyword leg (k={depth})", lambda q: keyword_search(conn, CHUNKS, scope.scope, q, depth, where=None))
        sync = {k: one(conn.execute(f"SHOW {k}"))[0] for k in ("synchronous_commit", "fsync")}

    def checkout(q: str) -> None:
        with tenant_connection(settings, TENANT):
            pass

    timed("pool checkout + SET ROLE + reset", checkout)

    def key_lookup(q: str) -> None:
        with pool(settings).connection() as c:
            api_keys.tenant_for_key(c, key)

    timed("API key lookup (UPDATE; cached 10 s)", key_lookup)

    def make_toucher() -> Callable[[str], Any]:
        def touch(q: str) -> None:
            with tenant_connection(settings, TENANT) as c:
                vector_stores.touch(c, TENANT, [idle])
        return touch

    times, elapsed = concurrent(make_toucher, queries, clients, min(duration_s, 5.0), 2)
    out[f"touch, {clients} concurrent"] = stats(times, elapsed, clients)
    out["_settings"] = sync
    return out


def run_mode(mode: str, ranking_raw: dict | None, settings: Any, server: Server, key: str,
             store: vector_stores.VectorStore, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    embedder = HashingEmbedder(DIM)
    ranking = parse_ranking_options(ranking_raw)
    timed_queries = queries[:args.warmup + args.queries]

    def local_search(q: str) -> list:
        with tenant_connection(settings, TENANT) as conn:
            return search(conn, TENANT, [store], [q], embedder=embedder, settings=settings, limit=LIMIT,
                          ranking=ranking)

    def route_body(q: str) -> str:
        with tenant_connection(settings, TENANT) as conn:
            s = vector_stores.get(conn, TENANT, store.id)
            vector_stores.require_active(s, objects.now())
            hits = search(conn, TENANT, [s], [q], embedder=embedder, settings=settings, limit=LIMIT, ranking=ranking)
            vector_stores.touch(conn, TENANT, [s])
        return json.dumps(objects.search_page([q], hits))

    sdk = sdk_caller(server.url, key, store.id, ranking_raw)
    raw = raw_caller(server.url, key, store.id, ranking_raw)
    result: dict[str, Any] = {"same_results_as_in_process": check_same(sdk(), local_search, queries)}
    log(f"  [{mode}] in-process …")
    result["in_process"] = stats(sequential(local_search, timed_queries, args.warmup))
    result["in_process_route_body"] = stats(sequential(route_body, timed_queries, args.warmup))
    log(f"  [{mode}] HTTP, 1 client …")
    result["http_sdk_1"] = stats(sequential(sdk(), timed_queries, args.warmup))
    result["http_raw_1"] = stats(sequential(raw(), timed_queries, args.warmup))
    log(f"  [{mode}] HTTP, {args.clients} clients for {args.duration:g}s …")
    cpu0, client_cpu0 = server.cpu_s(), time.process_time()
    times, elapsed = concurrent(sdk, queries, args.clients, args.duration, 3)
    cpu1, client_cpu1 = server.cpu_s(), time.process_time()
    result[f"http_sdk_{args.clients}"] = stats(times, elapsed, args.clients)
    # CPU per request: the client process (SDK, httpx) and the server process (Chalice, routes, psycopg).
    result[f"http_sdk_{args.clients}"]["client_cpu_ms_per_req"] = round(1000 * (client_cpu1 - client_cpu0) / len(times), 2)
    if cpu0 is not None and cpu1 is not None:
        result[f"http_sdk_{args.clients}"]["server_cpu_ms_per_req"] = round(1000 * (cpu1 - cpu0) / len(times), 2)
    base = result["in_process"]["p50_ms"]
    result["ratio_http_1_p50"] = round(result["http_sdk_1"]["p50_ms"] / base, 2)
    result[f"ratio_http_{args.clients}_p50"] = round(result[f"http_sdk_{args.clients}"]["p50_ms"] / base, 2)
    return result


# ------------------------------------------------------------------------------------------------- reporting


def table(report: dict[str, Any], clients: int) -> str:
    lines = [f"{'mode':7s} {'path':44s} {'clients':>7s} {'req/s':>8s} {'p50 ms':>8s} {'p95 ms':>8s} {'÷ in-proc p50':>13s}"]
    rows = [("in_process", "in-process search() (tenant_connection)"),
            ("in_process_route_body", "in-process route body (+get, touch, json)"),
            ("http_sdk_1", "HTTP openai SDK"),
            ("http_raw_1", "HTTP raw httpx (no SDK)"),
            (f"http_sdk_{clients}", "HTTP openai SDK")]
    for mode, r in report["modes"].items():
        base = r["in_process"]["p50_ms"]
        for key, label in rows:
            s = r[key]
            lines.append(f"{mode:7s} {label:44s} {s['clients']:7d} {s['rps']:8.1f} {s['p50_ms']:8.2f} "
                         f"{s['p95_ms']:8.2f} {s['p50_ms'] / base:12.2f}×")
    lines.append("")
    for mode, r in report["modes"].items():
        for c in (1, clients):
            ratio = r[f"ratio_http_{c}_p50"]
            lines.append(f"{mode}: HTTP p50 ({c} client{'s' if c > 1 else ''}) / in-process p50 = {ratio:.2f}× "
                         f"(target ≤ {TARGET_RATIO}×: {'PASS' if ratio <= TARGET_RATIO else 'MISS'})")
        multi = r[f"http_sdk_{clients}"]
        cpu = f"; server CPU {multi['server_cpu_ms_per_req']:.2f} ms/req" if "server_cpu_ms_per_req" in multi else ""
        lines.append(f"{mode}: {clients} clients: client CPU {multi['client_cpu_ms_per_req']:.2f} ms/req{cpu}; "
                     f"HTTP results identical to in-process: {r['same_results_as_in_process']}")
    if "hybrid" in report["modes"] and "vector" in report["modes"]:
        h, v = report["modes"]["hybrid"], report["modes"]["vector"]
        lines.append("hybrid ÷ vector (same run): " + ", ".join(
            f"{label} p50 {h[key]['p50_ms'] / v[key]['p50_ms']:.2f}× p95 {h[key]['p95_ms'] / v[key]['p95_ms']:.2f}×"
            for key, label in (("in_process", "in-process"), ("http_sdk_1", "HTTP 1 client"),
                               (f"http_sdk_{clients}", f"HTTP {clients} clients"))))
    lines.append("")
    lines.append(f"per-request pieces (sequential, tenant connection; {report['breakdown']['_settings']}):")
    for label, s in report["breakdown"].items():
        if not label.startswith("_"):
            extra = f"  {s['rps']:.0f}/s" if s["clients"] > 1 else ""
            lines.append(f"  {label:44s} p50 {s['p50_ms']:7.3f} ms  p95 {s['p95_ms']:7.3f} ms{extra}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=lambda s: int(s.replace("_", "")), default=100_000,
                        help="chunks in the store (default 100000; 10000 for a quick run)")
    parser.add_argument("--queries", type=int, default=200, help="timed sequential queries per case (plus warm-up)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients (threads)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the concurrent run per mode")
    parser.add_argument("--modes", default="hybrid,vector", help="comma-separated: hybrid, vector")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--same-process", action="store_true",
                        help="run the server in this process (client threads then share its GIL)")
    parser.add_argument("--tcp-nodelay", action="store_true",
                        help="diagnostic: set TCP_NODELAY on the server's sockets (Chalice's local server does not; "
                             "its header and body writes then wait for the client's delayed ACK, ~40 ms)")
    parser.add_argument("--build-procs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes embedding chunk texts while building")
    parser.add_argument("--build-workers", type=int, default=max(0, min(7, (os.cpu_count() or 2) - 1)),
                        help="max_parallel_maintenance_workers for the HNSW build")
    parser.add_argument("--maintenance-work-mem", default=None)
    parser.add_argument("--rebuild", action="store_true", help="rebuild even when the database holds the data")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            parser.error(f"unknown mode {m!r}")

    base = bench_settings()
    n = args.chunks
    log(f"API benchmark: {n:,} chunks, {args.clients} clients × {args.duration:g}s, {args.queries} sequential "
        f"queries, modes {modes}; hashing embedder (query embedding ≈ free: measures search + API overhead)")
    started = time.perf_counter()
    corpus = load_corpus(args.seed)
    url, store = prepare(base, n, corpus, args)
    build_s = time.perf_counter() - started
    settings = replace(base, database_url=url, db_pool_size=max(base.db_pool_size, args.clients),
                       auth_mode="keys", embedding_provider="hashing", embedding_model=HashingEmbedder(DIM).model)
    with connect(settings) as conn:
        key_row, key = api_keys.create_key(conn, TENANT, name="bench-api")
        pgvector = ".".join(map(str, capabilities(conn).pgvector_version))
    queries = corpus.queries
    server = Server(settings, args.same_process, args.tcp_nodelay)
    log(f"  server at {server.url} ({'same process' if args.same_process else f'pid {server.pid}'})")
    report: dict[str, Any] = {
        "benchmark": "api", "chunks": n, "store_chunks": store.chunk_count, "clients": args.clients,
        "duration_s": args.duration, "queries": args.queries, "seed": args.seed, "corpus": corpus.source,
        "embedder": "hashing-384", "pgvector": pgvector, "ef_search": settings.hnsw_ef_search,
        "vector_path": "exact" if store.chunk_count <= settings.exact_scan_max_rows and prefer_exact(
            store.chunk_count, store.chunk_count, 2 * LIMIT, settings.hnsw_ef_search, True) else "hnsw",
        "server": "same process" if args.same_process else "child process", "cpus": os.cpu_count(),
        "tcp_nodelay": args.tcp_nodelay,
        "setup_s": round(build_s, 1), "modes": {}}
    try:
        for mode in modes:
            report["modes"][mode] = run_mode(mode, MODES[mode], settings, server, key, store, queries, args)
        log("  breakdown …")
        report["breakdown"] = breakdown(settings, store, key, queries[:args.warmup + args.queries], n,
                                        args.clients, args.duration, args.warmup)
    finally:
        server.stop()
        with connect(settings) as conn:
            api_keys.revoke_key(conn, key_row.id)
        close_pools()
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(report))
    else:
        print(f"\nN = {n:,} chunks ({report['vector_path']} vector leg, ef_search {report['ef_search']}), "
              f"{corpus.source} texts, hashing embedder, server in {report['server']}"
              f"{' with TCP_NODELAY (diagnostic)' if args.tcp_nodelay else ''}, {report['cpus']} CPUs, "
              f"load average {report['load_average']}")
        print(table(report, args.clients))
    return 0


if __name__ == "__main__":
    sys.exit(main())
