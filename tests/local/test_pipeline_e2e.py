"""The whole local pipeline with the real handlers of ``app.py``: files dropped into the moto bucket go S3
notification → SQS → pump → ingest handler → embed queue → embed handler → Postgres, and the API sees them.

- every file of ``../shared/data/docs`` plus 31 NFCorpus documents written out end completed, or failed with the right
  error, and are searchable through the API (official SDK);
- the pump process SIGKILLed mid-run and restarted: every file completes with the chunk counts of a clean run, and
  no chunk is duplicated;
- an embedding endpoint (a fake HTTP server) answering 429 for a while: retries succeed; one that stays down: files
  ``failed`` with ``last_error``, messages in the DLQ; after recovery ``engram redrive`` completes them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from tests.conftest import REPO, SHARED_DATA

TENANT = "acme"
EXPECTED_FAILURES = {  # see ../shared/data/docs/MANIFEST.md (and tests/test_cli.py)
    "docling_ocr_test_scanned.pdf": "invalid_file",  # image only: no text layer
    "pm_rc4-40.pdf": "invalid_file",  # needs a user password
}


def nfcorpus_files(folder: Path, count: int, docs_per_file: int = 1, skip: int = 0) -> list[Path]:
    """Write ``count`` text files of ``docs_per_file`` NFCorpus documents each under ``folder``."""
    corpus = SHARED_DATA / "beir" / "nfcorpus" / "corpus.jsonl"
    if not corpus.exists():
        pytest.skip("../shared/data/beir/nfcorpus is not present")
    folder.mkdir(parents=True, exist_ok=True)
    docs = []
    with corpus.open() as lines:
        for line in lines:
            docs.append(json.loads(line))
            if len(docs) >= skip + count * docs_per_file:
                break
    docs = docs[skip:]
    paths = []
    for i in range(count):
        group = docs[i * docs_per_file:(i + 1) * docs_per_file]
        path = folder / f"{group[0]['_id']}.txt"
        path.write_text("\n\n".join(f"{d['title']}\n\n{d['text']}" for d in group))
        paths.append(path)
    return paths


@pytest.fixture()
def pipeline(settings, monkeypatch):
    """``start(**env)`` → the local stack for this module's database with the pump not yet running; the environment
    (and whatever the stack exported) is restored afterwards."""
    from chalicelib import aws
    from chalicelib.store.db import close_pools, connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.local import run

    saved = dict(os.environ)
    started = []

    def start(visibility_timeout_s: int = 2, **env: str):
        base = {"DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(settings.data_dir),
                "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_MAX_RECEIVES": "3",
                "ENGRAM_AUTH_MODE": "keys"}
        for name, value in {**base, **env}.items():
            monkeypatch.setenv(name, value)
        config.settings.cache_clear()
        deps.set_settings(None)
        deps.set_embedder(None)
        stack = run.start_stack(config.settings(), port=0, visibility_timeout_s=visibility_timeout_s)
        with connect(config.settings()) as conn:  # drops never create tenants
            ensure_tenant(conn, TENANT)
        aws.reset()  # the handlers' cached clients must see this stack's endpoint
        started.append(stack)
        return stack

    yield start
    for stack in started:
        stack.stop()
    os.environ.clear()
    os.environ.update(saved)
    config.settings.cache_clear()
    deps.set_settings(None)
    deps.set_embedder(None)
    aws.reset()
    close_pools()


def _drop(state, folder_or_files, store: str) -> set[str]:
    from engram_cli.local import drop

    items = drop.plan(folder_or_files if isinstance(folder_or_files, list) else [folder_or_files], TENANT, store)
    drop.upload(state.client("s3"), state.bucket, items)
    return {i.name for i in items if not i.name.endswith(drop.SIDECAR_SUFFIX)}


def _wait(state, store: str, names: set[str], timeout_s: float = 240):
    from engram_cli.local import run

    rows = run.wait_for_files(config.settings(), state, TENANT, store, names, timeout_s=timeout_s)
    assert set(rows) == names and all(r.status in ("completed", "failed") for r in rows.values()), \
        {n: r.status for n, r in rows.items()}
    return rows


def _chunks_per_file(store_name: str) -> dict[str, int]:
    """Chunk rows actually stored, per filename (duplicates would show here)."""
    from chalicelib.store import vector_stores
    from chalicelib.store.db import connect

    with connect(config.settings()) as conn:
        store = vector_stores.find(conn, TENANT, store_name)
        rows = conn.execute("SELECT f.filename, count(c.id) FROM vector_store_files vsf JOIN files f ON f.id = vsf.file_id "
                            "LEFT JOIN chunks c ON c.vector_store_id = vsf.vector_store_id AND c.file_id = vsf.file_id "
                            "WHERE vsf.vector_store_id = %s GROUP BY f.filename", (store.id,)).fetchall()
    return dict(rows)


def test_fifty_dropped_files_complete_and_are_searchable_through_the_api(pipeline, docs_dir, tmp_path):
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect
    from engram_cli import server
    from engram_cli.local import run

    stack = pipeline(visibility_timeout_s=30)
    folder = tmp_path / "drop"
    folder.mkdir()
    for path in docs_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    nfcorpus_files(folder / "nfcorpus", 31)
    total = len(list(docs_dir.iterdir())) + 31
    pump = run.start_pump(stack.state, workers=2)
    try:
        names = _drop(stack.state, folder, "docs")
        assert len(names) == total
        rows = _wait(stack.state, "docs", names)
    finally:
        pump.stop()
    for name, row in rows.items():
        if name in EXPECTED_FAILURES:
            assert row.status == "failed" and row.last_error["code"] == EXPECTED_FAILURES[name], row
        elif name == "pdfjs_empty.pdf":
            assert row.status == "completed" and row.chunk_count == 0
        else:
            assert row.status == "completed" and row.chunk_count > 0, row
    assert pump.stats.errors == 0
    assert _chunks_per_file("docs") == {name: row.chunk_count for name, row in rows.items()}

    api = server.start(config.settings(), host="127.0.0.1", port=0, worker_threads=0)
    try:
        with connect(config.settings()) as conn:
            key = api_keys.create_key(conn, TENANT)[1]
        client = openai.OpenAI(base_url=api.url, api_key=key, max_retries=0, _strict_response_validation=True)
        [store] = [s for s in client.vector_stores.list() if s.name == "docs"]
        failures = len(EXPECTED_FAILURES)
        assert store.file_counts.completed == total - failures and store.file_counts.failed == failures
        assert store.file_counts.total == total
        failed = list(client.vector_stores.files.list(store.id, filter="failed"))
        assert {f.last_error.code for f in failed} == {"invalid_file"}
        page = client.vector_stores.search(store.id, query="Trace-based Just-in-Time Type Specialization",
                                           max_num_results=3)
        assert page.data[0].filename == "pdfjs_tracemonkey.pdf"
    finally:
        api.stop()


def _pump_process(data_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "ENGRAM_METRICS": "off"}
    return subprocess.Popen([sys.executable, "-m", "engram_cli.main", "pump", "--workers", "1"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkilled_pump_restarts_and_every_file_completes_like_a_clean_run(pipeline, tmp_path):
    from chalicelib.store import vector_stores
    from chalicelib.store.db import connect
    from engram_cli import service

    stack = pipeline(visibility_timeout_s=2, ENGRAM_EMBED_BATCH_CHUNKS="2")
    files = nfcorpus_files(tmp_path / "nf", 24, docs_per_file=6)
    names = _drop(stack.state, files, "killed")
    first = _pump_process(config.settings().data_dir)
    try:
        from engram_cli.local import run

        # Kill as soon as some files are done but not all: mid-run, with batches in flight.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = sum(r.status == "completed" for r in run.store_files(config.settings(), TENANT, "killed", names).values())
            if done >= 2:
                break
            time.sleep(0.1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    partial = run.store_files(config.settings(), TENANT, "killed", names)
    assert sum(r.status == "completed" for r in partial.values()) < len(names), "the run ended before the kill"

    second = _pump_process(config.settings().data_dir)
    try:
        rows = _wait(stack.state, "killed", names)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0, second.stderr.read().decode()[-2000:]
    assert {r.status for r in rows.values()} == {"completed"}

    # The clean run: the same files through the in-process pipeline into another store.
    with connect(config.settings()) as conn:
        clean = service.open_store(conn, "clean")
        expected = {path.name: service.ingest_path(conn, clean, path, path.name, None).chunk_count for path in files}
        killed_store = vector_stores.find(conn, TENANT, "killed")
    assert {n: r.chunk_count for n, r in rows.items()} == expected
    assert _chunks_per_file("killed") == expected  # no duplicated or orphaned chunk rows
    assert killed_store.chunk_count == sum(expected.values())


def test_embedding_outages_retry_then_dead_letter_then_redrive(pipeline, tmp_path):
    from engram_cli.local import run
    from engram_cli.main import app
    from tests.fakes.embedding_server import FakeEmbeddingServer

    with FakeEmbeddingServer(dimension=64) as fake:
        stack = pipeline(visibility_timeout_s=1, ENGRAM_EMBEDDING_PROVIDER="openai",
                         ENGRAM_EMBEDDING_BASE_URL=fake.base_url, ENGRAM_EMBEDDING_MODEL="text-embedding-3-small",
                         ENGRAM_EMBEDDING_DIMENSIONS="64", ENGRAM_EMBEDDING_API_KEY="test",
                         ENGRAM_EMBEDDING_MAX_RETRIES="2", ENGRAM_EMBEDDING_TIMEOUT_S="5")
        pump = run.start_pump(stack.state, workers=1, wait_s=1)
        try:
            # A blip: 429s, then the service recovers — the embedder's retries absorb it.
            fake.fail_next(2, status=429)
            blip = _drop(stack.state, nfcorpus_files(tmp_path / "blip", 3), "blip")
            rows = _wait(stack.state, "blip", blip, timeout_s=60)
            assert {r.status for r in rows.values()} == {"completed"} and fake.failures == 2

            # An outage: every receive fails until the redrive policy moves the messages to the DLQ.
            fake.go_down(503)
            down = _drop(stack.state, nfcorpus_files(tmp_path / "down", 3, skip=10), "down")
            rows = _wait(stack.state, "down", down, timeout_s=120)
            assert {r.status for r in rows.values()} == {"failed"}
            assert all(r.last_error and r.last_error["code"] == "server_error" for r in rows.values()), rows
            embed_dlq = stack.state.dead_letter[stack.state.roles["embed"]]
            assert run.queue_depth(stack.state, embed_dlq) >= 3

            fake.come_up()
            result = CliRunner().invoke(app, ["redrive", "--queue", "all"], catch_exceptions=False)
            assert result.exit_code == 0 and "embed: moved" in result.stdout, result.output
            assert run.queue_depth(stack.state, embed_dlq) == 0
            rows = _wait(stack.state, "down", down, timeout_s=60)
            assert {r.status for r in rows.values()} == {"completed"}, {n: r.last_error for n, r in rows.items()}
            assert all(r.chunk_count > 0 and r.last_error is None for r in rows.values())
        finally:
            pump.stop()
    assert _chunks_per_file("down") == {n: r.chunk_count for n, r in rows.items()}
