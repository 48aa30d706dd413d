"""End-to-end throughput of the serverless ingestion path on the local stack: files/s and chunks/s from the first
S3 upload until every file is final and both queues are drained, with 1 and 2 pump workers (pollers per queue).

Path measured: ``engram drop``'s upload (boto3 ``put_object`` into moto) → S3 notification → SQS ``engram-ingest``
→ pump → ``ingest`` handler (parse, chunk, stage, fan out) → SQS ``engram-embed`` → pump → ``embed`` handler
(embed one batch, write; the last batch swaps the file's chunks in) → Postgres. Everything runs in this process
(moto's threaded server, the pump's threads, the handlers), against a fresh database per run on the configured
server (``DATABASE_URL``, else the embedded Postgres under ``ENGRAM_DATA_DIR``), so the embedding cache is empty.

Embedders:
* ``fake`` — a fast fake OpenAI-compatible ``/v1/embeddings`` server (``tests/fakes/embedding_server.py``, a real
  HTTP server answering SHA-256-seeded vectors): what is left is the pipeline's own overhead;
* ``local`` — the offline all-MiniLM-L6-v2 (``ENGRAM_EMBEDDING_PROVIDER=local``); loaded and warmed up before the
  clock starts. Slow on 2 cores: use a modest ``--local-files``.

Documents: NFCorpus (``../shared/data/beir/nfcorpus``; ``--corpus`` names another folder holding a BEIR
``corpus.jsonl``) written out as text files of ``--docs-per-file`` documents.

Besides files/s: milliseconds per file (the pipeline's own overhead with the fake embedder; target ≤ 50 ms, issue
11), and per file the CPU of this process (handlers, pump, moto, the fake embedder) and of the Postgres server, and
the server's WAL flushes (``common.ServerMeter``). On a shared machine the CPU figures are steadier than the wall
clock.

    ./dev python benchmarks/pipeline.py                               # fake and local, 1 and 2 workers
    ./dev python benchmarks/pipeline.py --modes fake --files 100 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import SHARED_DATA, ServerMeter

TENANT = "bench"
STORE = "pipeline"
NFCORPUS = SHARED_DATA / "beir" / "nfcorpus"


def write_files(folder: Path, count: int, docs_per_file: int, source: Path = NFCORPUS) -> list[Path]:
    """``count`` text files of ``docs_per_file`` documents each of the BEIR folder ``source`` (title + text,
    blank-line separated); exits when ``source`` holds no ``corpus.jsonl``."""
    corpus = source / "corpus.jsonl"
    if not corpus.exists():
        sys.exit(f"{corpus} is not present")
    docs = []
    with corpus.open() as lines:
        for line in lines:
            docs.append(json.loads(line))
            if len(docs) >= count * docs_per_file:
                break
    paths = []
    for i in range(count):
        group = docs[i * docs_per_file:(i + 1) * docs_per_file]
        path = folder / f"doc-{i:04d}.txt"
        path.write_text("\n\n".join(f"{d['title']}\n\n{d['text']}" for d in group))
        paths.append(path)
    return paths


def fresh_database(base_url: str) -> str:
    """Create ``engram_bench_pipeline_<hex>`` on ``base_url``'s server; returns its URL."""
    import psycopg

    name = "engram_bench_pipeline_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return psycopg.conninfo.make_conninfo(base_url, dbname=name)


def drop_database(base_url: str, url: str) -> None:
    """Drop the benchmark database ``url`` (connections are closed first)."""
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_once(base_url: str, files: list[Path], workers: int, embedding_env: dict[str, str],
             timeout_s: float) -> dict:
    """One measured run on a fresh database; returns ``{"files", "chunks", "failed", "seconds", "files_per_s",
    "chunks_per_s", "ms_per_file"}`` and, per file, this process's CPU milliseconds (pump, moto, handlers, fake
    embedder), the Postgres server's CPU milliseconds and its WAL flushes, records and kilobytes (None when the
    server is not local)."""
    from chalicelib import config, deps
    from chalicelib import aws
    from chalicelib.store.db import close_pools, connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.local import drop, run

    url = fresh_database(base_url)
    meter = ServerMeter(base_url)
    saved = dict(os.environ)
    os.environ.update({"DATABASE_URL": url, "ENGRAM_TENANT": TENANT, **embedding_env})
    config.settings.cache_clear()
    deps.set_settings(None)
    deps.set_embedder(None)
    stack = run.start_stack(config.settings(), port=0)
    state = stack.state
    assert state is not None  # start_stack started it
    aws.reset()
    pump = None
    try:
        settings = config.settings()
        with connect(settings) as conn:
            ensure_tenant(conn, TENANT)
        deps.embedder(settings).embed(["warm up the model before the clock starts"])
        pump = run.start_pump(state, workers=workers)
        items = drop.plan(files, TENANT, STORE)
        names = {i.name for i in items}
        server_before, cpu_before = meter.read(), _process_cpu_s()
        started = time.perf_counter()
        drop.upload(state.client("s3"), state.bucket, items)
        rows = run.wait_for_files(settings, state, TENANT, STORE, names, timeout_s=timeout_s, interval_s=0.1)
        seconds = time.perf_counter() - started
        cpu_s = _process_cpu_s() - cpu_before
    finally:
        if pump is not None:
            pump.stop()
        stack.stop()
        close_pools()
        os.environ.clear()
        os.environ.update(saved)
        config.settings.cache_clear()
        aws.reset()
    time.sleep(1.1)  # idle backends report their WAL statistics within a second (PGSTAT_MIN_INTERVAL)
    server = ServerMeter.delta(server_before, meter.read())
    drop_database(base_url, url)
    done = [r for r in rows.values() if r.status in ("completed", "failed")]
    if len(done) < len(names):
        raise RuntimeError(f"only {len(done)} of {len(names)} files finished within {timeout_s} s")
    chunks = sum(r.chunk_count for r in rows.values())
    return {"files": len(names), "chunks": chunks, "failed": sum(r.status == "failed" for r in rows.values()),
            "seconds": round(seconds, 2), "files_per_s": round(len(names) / seconds, 2),
            "chunks_per_s": round(chunks / seconds, 1), "ms_per_file": round(1000 * seconds / len(names), 1),
            "process_cpu_ms_per_file": round(1000 * cpu_s / len(names), 1),
            "server_cpu_ms_per_file": _per(server["cpu_s"], len(names), 1000),
            "wal_flushes_per_file": _per(server["wal_sync"], len(names), 1),
            "wal_records_per_file": _per(server["wal_records"], len(names), 1),
            "wal_kb_per_file": _per(server["wal_bytes"], len(names), 1 / 1024)}


def _per(value: float | None, count: int, scale: float) -> float | None:
    return None if value is None else round(scale * value / count, 2)


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="fake,local", help="comma-separated: fake, local")
    parser.add_argument("--workers", default="1,2", help="comma-separated pump workers per queue")
    parser.add_argument("--files", type=int, default=60, help="files per run with the fake embedder")
    parser.add_argument("--local-files", type=int, default=12, help="files per run with the local model")
    parser.add_argument("--docs-per-file", type=int, default=5, help="NFCorpus documents per file")
    parser.add_argument("--corpus", type=Path, default=NFCORPUS, help="BEIR folder whose corpus.jsonl is written out")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for one run")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    os.environ.setdefault("ENGRAM_METRICS", "off")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # no log line per record while timing

    from chalicelib.config import Settings
    from chalicelib.store.db import database_url
    from tests.fakes.embedding_server import FakeEmbeddingServer

    base = Settings.from_env()
    base_url = database_url(base)
    results = []
    with tempfile.TemporaryDirectory() as tmp, FakeEmbeddingServer(dimension=384) as fake:
        os.environ["ENGRAM_DATA_DIR"] = str(base.data_dir)  # the stack's state file; the database is per run
        for mode in args.modes.split(","):
            count = args.files if mode == "fake" else args.local_files
            folder = Path(tmp) / f"{mode}-{count}"
            folder.mkdir()
            files = write_files(folder, count, args.docs_per_file, args.corpus)
            env = ({"ENGRAM_EMBEDDING_PROVIDER": "openai", "ENGRAM_EMBEDDING_BASE_URL": fake.base_url,
                    "ENGRAM_EMBEDDING_MODEL": "text-embedding-3-small", "ENGRAM_EMBEDDING_DIMENSIONS": "384",
                    "ENGRAM_EMBEDDING_API_KEY": "bench"} if mode == "fake" else
                   {"ENGRAM_EMBEDDING_PROVIDER": "local"})
            for workers in (int(w) for w in args.workers.split(",")):
                result = {"embedder": mode, "workers": workers,
                          **run_once(base_url, files, workers, env, args.timeout)}
                results.append(result)
                if not args.json:
                    print(f"  {mode:5} workers={workers}: {result}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"\n{'embedder':10} {'workers':>7} {'files':>6} {'chunks':>7} {'seconds':>8} {'files/s':>8} {'chunks/s':>9} "
          f"{'ms/file':>8} {'cpu ms/file (us / pg)':>22} {'WAL flushes/file':>17}")
    for r in results:
        cpu = f"{r['process_cpu_ms_per_file']} / {r['server_cpu_ms_per_file']}"
        print(f"{r['embedder']:10} {r['workers']:>7} {r['files']:>6} {r['chunks']:>7} {r['seconds']:>8} "
              f"{r['files_per_s']:>8} {r['chunks_per_s']:>9} {r['ms_per_file']:>8} {cpu:>22} "
              f"{r['wal_flushes_per_file']!s:>17}")


if __name__ == "__main__":
    main()
