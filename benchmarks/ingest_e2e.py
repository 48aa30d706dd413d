"""Ingestion at the embedder's speed (issue 33 §4): what the pipeline adds over the embedder alone, per backend, in
one run (``ingest.py --e2e N``).

The same ``N`` documents (NFCorpus, one document per file: title, blank line, text) go

* to the **embedder alone**: chunked as ingestion chunks them (the default strategy, the model's tokenizer), then
  each file's chunks embedded in one call, as the ingestion engine embeds a file's missing chunks — chunks/s;
* through the **drop folder**: uploaded into the local stack's bucket (moto), S3 notifications → SQS → the pump →
  the ingest and embed handlers → Postgres (and Qdrant) — chunks/s from the first upload until every file is final;
* through the **SDK**: the official ``openai`` client against ``engram serve``'s API on the same kind of stack:
  every file uploaded (``files.create``), then attached as one batch (``vector_stores.file_batches.create_and_poll``)
  — chunks/s from the first upload until the batch is final;

on each backend (a fresh database and data folder per path: the embedding cache starts empty, and the embedded
Qdrant engine is the stack's). The embedder-alone rate is measured before and after the pipelines and averaged, so
load that drifts during the run hits both sides. Target: end-to-end ≥ 0.7× the embedder's own rate.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TENANT = "bench"
TARGET_RATIO = 0.7


def embedder_alone(files: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Chunk the files as ingestion does and embed each file's chunks in one call with the local model (loaded and
    warmed up first): ``{"files", "chunks", "seconds", "chunks_per_s"}``."""
    from chalicelib.embed import LocalEmbedder
    from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
    from chalicelib.ingest.parse import parse_document

    local = LocalEmbedder()
    local.embed(["warm up the model before the clock starts"])
    strategy = resolve_chunking_strategy(None, embedder_max_tokens=local.max_input_tokens)
    per_file = [[c.text for c in chunk_document(parse_document(data, name), strategy, local.tokenizer)]
                for name, data in files]
    started = time.perf_counter()
    for texts in per_file:
        if texts:
            local.embed(texts)
    seconds = time.perf_counter() - started
    chunks = sum(len(t) for t in per_file)
    return {"files": len(files), "chunks": chunks, "seconds": round(seconds, 2),
            "chunks_per_s": round(chunks / seconds, 1)}


def _fresh_database(base_url: str) -> str:
    import psycopg

    name = "engram_bench_e2e_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return psycopg.conninfo.make_conninfo(base_url, dbname=name)


def _drop_database(base_url: str, url: str) -> None:
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def through_pipeline(base_url: str, files: list[tuple[str, bytes]], backend: str, path: str,
                     timeout_s: float = 3600.0) -> dict[str, Any]:
    """One path (``drop`` or ``sdk``) on ``backend``, on a fresh database and data folder: ``{"files", "chunks",
    "failed", "seconds", "chunks_per_s"}``.

    Raises:
        RuntimeError: files still unfinished after ``timeout_s`` seconds.
    """
    import openai

    from chalicelib import aws, config, deps
    from chalicelib.store import api_keys
    from chalicelib.store.db import close_pools, connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.local import drop, run

    url = _fresh_database(base_url)
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as data_dir:
        folder = Path(data_dir) / "files"
        folder.mkdir()
        for name, data in files:
            (folder / name).write_bytes(data)
        os.environ.update({"DATABASE_URL": url, "ENGRAM_TENANT": TENANT, "ENGRAM_DATA_DIR": data_dir,
                           "ENGRAM_EMBEDDING_PROVIDER": "local", "ENGRAM_VECTOR_BACKEND": backend,
                           "ENGRAM_AUTH_MODE": "keys", "ENGRAM_METRICS": "off"})
        config.settings.cache_clear()
        deps.reset()
        aws.reset()
        services = None
        try:
            settings = config.settings()
            with connect(settings) as conn:
                ensure_tenant(conn, TENANT)
                key = api_keys.create_key(conn, TENANT)[1]
            deps.embedder(settings).embed(["warm up the model before the clock starts"])
            services = run.start_services(settings, aws_port=0, workers=1, pump=True)
            state = services.state
            store = f"e2e-{backend}-{path}"
            if path == "drop":
                items = drop.plan(sorted(folder.iterdir()), TENANT, store)
                names = {i.name for i in items}
                started = time.perf_counter()
                drop.upload(state.client("s3"), state.bucket, items)
                rows = run.wait_for_files(settings, state, TENANT, store, names, timeout_s=timeout_s,
                                          interval_s=0.1)
                seconds = time.perf_counter() - started
                done = [r for r in rows.values() if r.status in ("completed", "failed")]
                if len(done) < len(names):
                    raise RuntimeError(f"only {len(done)} of {len(names)} files finished within {timeout_s} s")
                chunks = sum(r.chunk_count for r in rows.values())
                failed = sum(r.status == "failed" for r in rows.values())
            else:
                api = services.serve_api("127.0.0.1", 0)
                api._server.server.RequestHandlerClass.log_message = lambda *a, **k: None  # no line per poll
                client = openai.OpenAI(base_url=api.url, api_key=key, max_retries=2, timeout=timeout_s)
                vs = client.vector_stores.create(name=store)
                started = time.perf_counter()
                ids = [client.files.create(file=(name, data), purpose="assistants").id for name, data in files]
                batch = client.vector_stores.file_batches.create_and_poll(vector_store_id=vs.id, file_ids=ids,
                                                                          poll_interval_ms=100)
                seconds = time.perf_counter() - started
                counts = batch.file_counts
                if counts.in_progress:
                    raise RuntimeError(f"{counts.in_progress} files unfinished")
                failed = counts.failed
                with connect(settings) as conn:
                    chunks = int(conn.execute("SELECT count(*) FROM chunks WHERE vector_store_id = %s",
                                              (vs.id,)).fetchone()[0])  # type: ignore[index]
        finally:
            if services is not None:
                services.stop()
            close_pools()
            deps.reset()
            os.environ.clear()
            os.environ.update(saved)
            config.settings.cache_clear()
            aws.reset()
    _drop_database(base_url, url)
    return {"files": len(files), "chunks": chunks, "failed": failed, "seconds": round(seconds, 2),
            "chunks_per_s": round(chunks / seconds, 1)}


def run(files: list[tuple[str, bytes]], backends: list[str], log: Any = print) -> dict[str, Any]:
    """The whole comparison (module docstring): ``{"embedder": {...}, "<backend>": {"drop": {...}, "sdk": {...}},
    "ratios": {"<backend> drop": x, ...}, "targets": {name: bool}}`` (printed as it goes)."""
    from chalicelib.config import Settings
    from chalicelib.store.db import database_url

    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    base_url = database_url(Settings.from_env())
    first = embedder_alone(files)
    log(f"  e2e: embedder alone {first['chunks']} chunks in {first['seconds']} s: {first['chunks_per_s']} chunks/s")
    out: dict[str, Any] = {}
    for backend in backends:
        for path in ("drop", "sdk"):
            result = through_pipeline(base_url, files, backend, path)
            out.setdefault(backend, {})[path] = result
            log(f"  e2e: {backend} {path}: {result['chunks']} chunks in {result['seconds']} s: "
                f"{result['chunks_per_s']} chunks/s ({result['failed']} failed)")
    last = embedder_alone(files)
    log(f"  e2e: embedder alone again: {last['chunks_per_s']} chunks/s")
    rate = (first["chunks_per_s"] + last["chunks_per_s"]) / 2
    out["embedder"] = {"before": first, "after": last, "chunks_per_s": round(rate, 1)}
    out["ratios"] = {f"{b} {p}": round(out[b][p]["chunks_per_s"] / rate, 3) for b in backends for p in ("drop", "sdk")}
    out["targets"] = {f"{name} ≥ {TARGET_RATIO}× the embedder": ratio >= TARGET_RATIO
                      for name, ratio in out["ratios"].items()}
    for name, ratio in out["ratios"].items():
        log(f"  {'PASS' if ratio >= TARGET_RATIO else 'MISS'}  e2e {name}: {ratio:.3f}× the embedder's "
            f"{rate:.1f} chunks/s (target ≥ {TARGET_RATIO}×)")
    return out
