"""Engram's vector leg beside ChromaDB on the same vectors: unfiltered top-10 latency (one client) and incremental
insert rows/s with the index present, interleaved, as ratios (issue 11: top-10 within 1.2× of Chroma, inserts at
least 0.5× Chroma's rows/s).

Data: the ``search.py`` data set of ``--size`` rows (clustered synthetic 384-d vectors, realistic chunk texts;
its database is built by ``search.py`` if missing). Engram works on a copy of that database (``CREATE DATABASE …
TEMPLATE``, dropped afterwards), Chroma on a persistent collection of the same vectors and texts under
``--chroma-dir`` (``hnsw``: cosine, ``max_neighbors`` 16 = pgvector's m, ``ef_construction`` 128, ``ef_search``
= Engram's ``hnsw_ef_search``), built once and reused.

* top-10: the same query vectors (fresh draws from the data's distribution) through
  ``search.vector.vector_search`` over all rows (one pipelined round trip, row-level security on) and
  ``collection.query(query_embeddings=[q], n_results=10)``; recall@10 of each against exact numpy top-10.
* inserts: files of ``--insert-batch`` new chunks (new vectors and texts of the same distributions) through
  Engram's write path (``attachments.attach`` + ``complete``: COPY, BM25 statistics and postings by trigger, HNSW
  insert) and ``collection.add(ids, embeddings, documents)`` (Chroma indexes documents for full-text search too).

Rounds alternate Engram and Chroma (``--rounds``); medians of the per-round p50 and rows/s are reported.

Chroma runs in its own interpreter (``--chroma-python``, default this one) so it can live in a throwaway venv: it is
no Engram dependency. The benchmark prints a message and exits 0 when chromadb cannot be imported there.

    python3 -m venv /tmp/chroma-venv && /tmp/chroma-venv/bin/pip install chromadb numpy
    cd benchmarks && python chroma_compare.py --chroma-python /tmp/chroma-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from common import bench_settings, generated_chunking, percentile

COLLECTION = "engram-compare"
TOP_K = 10
TARGET_QUERY_RATIO, TARGET_INSERT_RATIO = 1.2, 0.5


# ------------------------------------------------------------------------------------------- Chroma worker


def worker(args: argparse.Namespace) -> int:
    """The Chroma side (runs under ``--chroma-python``): JSON commands on stdin, one JSON answer per line."""
    try:
        import chromadb
    except ImportError as exc:
        for _ in sys.stdin:  # answer every command (exiting at once would break the pipe the parent writes to)
            print(json.dumps({"error": f"chromadb is not importable: {exc}"}), flush=True)
        return 0
    client = chromadb.PersistentClient(path=args.chroma_dir)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "open":
            existing = [c.name for c in client.list_collections()]
            ready = False
            if COLLECTION in existing:
                collection = client.get_collection(COLLECTION)
                ready = collection.count() == cmd["rows"] and (collection.metadata or {}).get("key") == cmd["key"]
                if not ready:
                    client.delete_collection(COLLECTION)
            if not ready:
                collection = client.create_collection(
                    COLLECTION, metadata={"key": cmd["key"]}, embedding_function=None,
                    configuration={"hnsw": {"space": "cosine", "max_neighbors": 16, "ef_construction": 128,
                                            "ef_search": cmd["ef_search"]}})
                vectors = np.load(cmd["vectors"], mmap_mode="r")
                texts = json.loads(Path(cmd["texts"]).read_text())
                step = client.get_max_batch_size()
                started = time.perf_counter()
                for lo in range(0, len(vectors), step):
                    hi = min(len(vectors), lo + step)
                    collection.add(ids=[str(i) for i in range(lo, hi)], embeddings=np.asarray(vectors[lo:hi]),
                                   documents=texts[lo:hi])
                load_s = time.perf_counter() - started
            else:
                load_s = None
            print(json.dumps({"ok": True, "load_s": load_s, "version": chromadb.__version__}), flush=True)
        elif cmd["cmd"] == "query":
            queries = np.load(cmd["queries"])
            times, ids = [], []
            for q in queries:
                t0 = time.perf_counter()
                got = collection.query(query_embeddings=[q], n_results=TOP_K, include=["distances"])
                times.append(1000 * (time.perf_counter() - t0))
                ids.append([int(i) for i in got["ids"][0]])
            print(json.dumps({"times": times, "ids": ids}), flush=True)
        elif cmd["cmd"] == "insert":
            vectors = np.load(cmd["vectors"])
            texts = json.loads(Path(cmd["texts"]).read_text())
            t0 = time.perf_counter()
            collection.add(ids=[f"new{cmd['start'] + i}" for i in range(len(vectors))], embeddings=vectors,
                           documents=texts)
            print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
        elif cmd["cmd"] == "delete_new":
            collection.delete(where=None, ids=[f"new{i}" for i in range(cmd["count"])])
            print(json.dumps({"ok": True}), flush=True)
    return 0


class Chroma:
    """The worker process."""

    def __init__(self, python: str, chroma_dir: str) -> None:
        self.proc = subprocess.Popen([python, __file__, "--worker", "--chroma-dir", chroma_dir],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=str(Path(__file__).parent))

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Chroma worker exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(60)


# ---------------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--chroma-python", default=sys.executable, help="interpreter that can import chromadb")
    parser.add_argument("--chroma-dir", default=None,
                        help="Chroma's persistent folder (default: <ENGRAM_DATA_DIR>/chroma-compare, beside the "
                             "benchmark's own database, so runs on other data folders never share or delete it)")
    parser.add_argument("--size", type=int, default=100_000, help="rows (a search.py data set)")
    parser.add_argument("--queries", type=int, default=200, help="query vectors per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians reported)")
    parser.add_argument("--insert-batch", type=int, default=1000, help="new chunks per insert (one file)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    if args.chroma_dir is None:
        args.chroma_dir = str(bench_settings().data_dir / "chroma-compare")
    chroma = Chroma(args.chroma_python, args.chroma_dir)
    import psycopg
    from psycopg import sql

    import search as bench
    from textgen import chunk_texts, load_source

    from chalicelib.search.corpus import CHUNKS, store_scope
    from chalicelib.search.vector import VectorScope, vector_search
    from chalicelib.store import vector_stores
    from chalicelib.store.db import connect, database_url

    settings = bench_settings()
    source = load_source(args.seed)
    n = args.size
    vectors, query_vectors = bench.generate(args.seed, n, args.queries * args.rounds + bench.WARMUP)
    ns = argparse.Namespace(rebuild=False, maintenance_work_mem=None,
                            build_workers=max(0, min(7, (os.cpu_count() or 2) - 1)))
    url, layout = bench.prepare(settings, n, args.seed, vectors, source, ns)
    texts = []
    for lo, hi in zip(layout.small_starts, layout.small_starts[1:]):
        texts += chunk_texts(source, args.seed, lo, hi - lo)
    for lo, hi in zip(layout.big_starts, layout.big_starts[1:]):
        texts += chunk_texts(source, args.seed, lo, hi - lo)
    work = Path(tempfile.mkdtemp(prefix="engram-chroma-"))
    np.save(work / "vectors.npy", vectors)
    (work / "texts.json").write_text(json.dumps(texts))
    key = f"{bench.GENERATOR}-{args.seed}-{n}"
    opened = chroma.ask(cmd="open", rows=n, key=key, vectors=str(work / "vectors.npy"),
                        texts=str(work / "texts.json"), ef_search=settings.hnsw_ef_search)
    if "error" in opened:
        print(f"chroma_compare: skipped — {opened['error']} (install it in a throwaway venv and pass "
              "--chroma-python, see the module docstring)")
        return 0
    bench.log(f"chromadb {opened['version']}: collection of {n:,} rows "
              + (f"built in {opened['load_s']:.0f}s" if opened["load_s"] else "reused"))

    # Engram works on a copy of the search.py database (inserts change it).
    copy_name = f"engram_bench_chroma_{n}"
    with psycopg.connect(database_url(settings), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(copy_name)))
        try:
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy_name), sql.Identifier(f"engram_bench_search_{n}")))
        except psycopg.errors.ObjectInUse:
            chroma.close()
            print(f"chroma_compare: engram_bench_search_{n} is in use (a search.py run?); try again when it is idle")
            return 1
    copy_url = psycopg.conninfo.make_conninfo(url, dbname=copy_name)
    report: dict[str, Any] = {"benchmark": "chroma_compare", "rows": n, "chromadb": opened["version"],
                              "ef_search": settings.hnsw_ef_search, "rounds": []}
    try:
        conn = bench.rls_connection(copy_url, settings)
        caps = vector_stores.hnsw_index(conn, bench.DIM)
        stores = [layout.small.id, layout.big.id]
        scope = VectorScope(CHUNKS, store_scope(bench.TENANT, stores, n), bench.DIM, n)
        top, kth = bench.exact_top_k(np.arange(n), vectors, query_vectors, TOP_K)
        with connect(replace(settings, database_url=copy_url)) as owner:
            row_of = bench.id_rows(owner)

        def engram_queries(qs: np.ndarray, offset: int) -> tuple[list[float], float]:
            times, hits = [], 0.0
            for i, q in enumerate(qs):
                t0 = time.perf_counter()
                got = vector_search(conn, scope, q, TOP_K, where=None, ef_search=settings.hnsw_ef_search,
                                    exact_scan_max_rows=settings.exact_scan_max_rows,
                                    iterative_scan=caps.iterative_scan, halfvec=caps.halfvec)
                times.append(1000 * (time.perf_counter() - t0))
                d = 1.0 - vectors[row_of[[r for r, _ in got]]] @ q
                hits += float(np.sum(d <= kth[offset + i] + 1e-6)) / TOP_K
            return times, hits / len(qs)

        def chroma_queries(qs: np.ndarray, offset: int) -> tuple[list[float], float]:
            np.save(work / "queries.npy", qs)
            answer = chroma.ask(cmd="query", queries=str(work / "queries.npy"))
            hits = 0.0
            for i, ids in enumerate(answer["ids"]):
                d = 1.0 - vectors[ids] @ qs[i]
                hits += float(np.sum(d <= kth[offset + i] + 1e-6)) / TOP_K
            return answer["times"], hits / len(qs)

        warm = query_vectors[-bench.WARMUP:]
        engram_queries(warm, len(query_vectors) - bench.WARMUP)
        chroma_queries(warm, len(query_vectors) - bench.WARMUP)
        store = vector_stores.create(conn, bench.TENANT, name="inserts", model="synthetic-384", dim=bench.DIM)
        rng = np.random.default_rng([args.seed, 99])
        inserted = 0
        for r in range(args.rounds):
            qs = query_vectors[r * args.queries:(r + 1) * args.queries]
            order = ("engram", "chroma") if r % 2 == 0 else ("chroma", "engram")
            row: dict[str, Any] = {}
            for side in order:
                fn = engram_queries if side == "engram" else chroma_queries
                times, recall = fn(qs, r * args.queries)
                row[f"{side}_p50_ms"] = round(percentile(times, 50), 3)
                row[f"{side}_p95_ms"] = round(percentile(times, 95), 3)
                row[f"{side}_recall@10"] = round(recall, 4)
            new_vectors = bench._normalise(vectors[rng.integers(0, n, args.insert_batch)]
                                           + 0.05 * rng.standard_normal((args.insert_batch, bench.DIM),
                                                                        dtype=np.float32))
            new_texts = chunk_texts(source, args.seed, n + inserted, args.insert_batch)
            for side in order:
                if side == "engram":
                    t0 = time.perf_counter()
                    _engram_insert(conn, store, inserted, new_texts, new_vectors)
                    seconds = time.perf_counter() - t0
                else:
                    np.save(work / "new.npy", new_vectors)
                    (work / "new.json").write_text(json.dumps(new_texts))
                    seconds = chroma.ask(cmd="insert", vectors=str(work / "new.npy"), texts=str(work / "new.json"),
                                         start=inserted)["seconds"]
                row[f"{side}_insert_rows_s"] = round(args.insert_batch / seconds, 1)
            inserted += args.insert_batch
            row["query_ratio_p50"] = round(row["engram_p50_ms"] / row["chroma_p50_ms"], 2)
            row["insert_ratio"] = round(row["engram_insert_rows_s"] / row["chroma_insert_rows_s"], 2)
            report["rounds"].append(row)
            bench.log(f"  round {r + 1}: top-10 p50 Engram {row['engram_p50_ms']:.2f} ms, Chroma "
                      f"{row['chroma_p50_ms']:.2f} ms (×{row['query_ratio_p50']:.2f}); inserts Engram "
                      f"{row['engram_insert_rows_s']:,.0f} rows/s, Chroma {row['chroma_insert_rows_s']:,.0f} rows/s "
                      f"(×{row['insert_ratio']:.2f})")
        conn.close()
        chroma.ask(cmd="delete_new", count=inserted)
    finally:
        chroma.close()
        with psycopg.connect(database_url(settings), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(copy_name)))
    rounds = report["rounds"]

    def med(key: str) -> float:
        return round(float(np.median([r[key] for r in rounds])), 3)

    summary = {k: med(k) for k in rounds[0]}
    report["median"] = summary
    print(f"\n{n:,} rows, {args.rounds} alternating rounds of {args.queries} queries and {args.insert_batch}-row "
          f"inserts (medians):")
    print(f"  {'':10s} {'top-10 p50':>11s} {'p95':>9s} {'recall@10':>10s} {'insert rows/s':>14s}")
    for side in ("engram", "chroma"):
        print(f"  {side:10s} {summary[f'{side}_p50_ms']:9.2f}ms {summary[f'{side}_p95_ms']:7.2f}ms "
              f"{summary[f'{side}_recall@10']:10.4f} {summary[f'{side}_insert_rows_s']:14,.0f}")
    q_ok, i_ok = summary["query_ratio_p50"] <= TARGET_QUERY_RATIO, summary["insert_ratio"] >= TARGET_INSERT_RATIO
    print(f"  top-10 p50 Engram / Chroma = {summary['query_ratio_p50']:.2f} (target ≤ {TARGET_QUERY_RATIO}: "
          f"{'PASS' if q_ok else 'MISS'})")
    print(f"  insert rows/s Engram / Chroma = {summary['insert_ratio']:.2f} (target ≥ {TARGET_INSERT_RATIO}: "
          f"{'PASS' if i_ok else 'MISS'})")
    print(json.dumps(report))
    return 0


def _engram_insert(conn: Any, store: Any, start: int, texts: list[str], vectors: np.ndarray) -> None:
    """One file of chunks through the ingestion write path (as ``search.load_files``)."""
    from chalicelib.store import attachments
    from chalicelib.store import files as file_rows
    from chalicelib.store.chunks import Chunk

    import search as bench

    chunks, offset = [], 0
    for j, text in enumerate(texts):
        chunks.append(Chunk(j, text, len(text.split()) + 2, offset, offset + len(text)))
        offset += len(text) + 2
    data = f"inserted rows {start}..{start + len(texts) - 1}".encode()
    with conn.transaction():
        file_id = file_rows.create_file(conn, bench.TENANT, filename=f"new{start:08d}.txt", data=data).id
        attachments.attach(conn, bench.TENANT, store.id, file_id, attributes={},
                           chunking_strategy=generated_chunking())
    attachments.complete(conn, bench.TENANT, store.id, file_id, chunks=chunks, vectors=list(vectors), dim=bench.DIM,
                         content_sha256=file_rows.sha256_hex(data), attempt=None)


if __name__ == "__main__":
    sys.exit(main())
