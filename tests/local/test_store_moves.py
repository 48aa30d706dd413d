"""A backend move a user can run (issue 33 §3): ``engram stores reindex STORE --backend qdrant`` works the same
whether or not ``engram serve`` holds the embedded Qdrant engine, shows its progress, and resumes after an
interrupt.

- **No stack**: the CLI holds the engine and moves the store itself; a move interrupted after two files (Ctrl-C)
  resumes from the third when run again, and the new backend's index is built when it ends.
- **Stack running**: ``engram serve`` (a subprocess, with its pump) has opened the embedded engine's shards by
  ingesting into a Qdrant store — the state in which the CLI used to fail with "Can't init WAL". The CLI (another
  subprocess) asks the stack, which moves the store in its own process; the CLI watches the move's row and prints
  it. A move interrupted before the stack started resumes through the stack; the moved store answers through the
  API, and its index is built.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from chalicelib.ingest.pipeline import ingest_bytes
from chalicelib.search.backends.reindex import move
from chalicelib.store import vector_stores
from chalicelib.store.db import connect
from engram_cli.main import app
from tests.conftest import REPO
from tests.processes import free_port, stop, wait_healthy

TENANT = "movers"
FILES = {f"note-{i:02d}.txt": f"Note {i}: the heron {i} waits by the reed bed number {i} at dawn.".encode()
         for i in range(8)}


def _pgvector_store(settings, embedder, name: str) -> vector_stores.VectorStore:
    with connect(settings) as conn:
        store = vector_stores.create(conn, TENANT, name=name, model=embedder.model, dim=embedder.dimension,
                                     backend="pgvector")
        for filename, data in FILES.items():
            assert ingest_bytes(conn, settings, TENANT, store, filename=filename, data=data,
                                embedder=embedder).status == "completed"
        return vector_stores.get(conn, TENANT, store.id)


def _interrupt_after_two(settings, store) -> None:
    """A move to Qdrant stopped by Ctrl-C after its second file (the store stays on pgvector)."""
    def ctrl_c(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with connect(settings) as conn, pytest.raises(KeyboardInterrupt):
        move(conn, settings, store, "qdrant", progress=ctrl_c)
    with connect(settings) as conn:
        assert vector_stores.get(conn, TENANT, store.id).backend == "pgvector"


def _env(settings, data_dir: Path) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(data_dir),
            "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_AUTH_MODE": "keys",
            "ENGRAM_METRICS": "off", "ENGRAM_VECTOR_BACKEND": "qdrant", "ENGRAM_QDRANT_INDEXING_THRESHOLD_KB": "1",
            "COLUMNS": "200"}


def _engram(env: dict[str, str], *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engram_cli.main", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


def test_without_a_stack_the_cli_moves_the_store_and_resumes_after_an_interrupt(settings, hashing_embedder,
                                                                                tmp_path, monkeypatch):
    for name, value in _env(settings, tmp_path).items():
        if name.startswith(("ENGRAM_", "DATABASE_URL")):
            monkeypatch.setenv(name, value)
    config.settings.cache_clear()
    deps.reset()
    local = config.settings()
    store = _pgvector_store(local, hashing_embedder, "cli-move")
    _interrupt_after_two(local, store)

    result = CliRunner().invoke(app, ["stores", "reindex", "cli-move", "--backend", "qdrant"],
                                catch_exceptions=False, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "moving" in result.output and "8/8" in result.output  # the progress bar, to the last file
    assert "is on qdrant: 6 files moved (resumed)" in result.output, result.output
    [row] = [s for s in json.loads(CliRunner().invoke(app, ["stores", "--json"]).stdout) if s["name"] == "cli-move"]
    assert row["backend"] == "qdrant"
    assert row["index"] == {"indexed": True, "points": row["chunks"], "pending_files": 0,
                            "detail": row["index"]["detail"]} and row["chunks"] == len(FILES)
    hits = json.loads(CliRunner().invoke(app, ["search", "heron 5 reed bed", "--store", "cli-move", "--json"]).stdout)
    assert hits[0]["filename"] == "note-05.txt"
    deps.qdrant(local).close()  # release the embedded engine
    config.settings.cache_clear()
    deps.reset()


def test_with_engram_serve_holding_the_engine_the_stack_moves_the_store(settings, hashing_embedder, tmp_path):
    env = _env(settings, tmp_path)
    local = config.Settings.from_env(env)
    interrupted = _pgvector_store(local, hashing_embedder, "resumed-in-stack")
    _interrupt_after_two(local, interrupted)
    deps.qdrant(local).close()  # the test process lets go of the engine: the stack takes it
    fresh = _pgvector_store(local, hashing_embedder, "moved-in-stack")
    with connect(local) as conn:
        from chalicelib.store import api_keys

        key = api_keys.create_key(conn, TENANT)[1]

    api_port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "engram_cli.main", "serve", "--port", str(api_port),
                              "--aws-port", str(free_port())], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        wait_healthy(f"http://127.0.0.1:{api_port}", serve, 90)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{api_port}/v1", api_key=key, max_retries=0)
        # serve opens the embedded engine's shards: a Qdrant store ingests through the stack
        upload = client.files.create(file=("held.txt", b"The stack holds the embedded engine now."),
                                     purpose="assistants")
        held = client.vector_stores.create(name="held")
        assert client.vector_stores.files.create_and_poll(upload.id, vector_store_id=held.id).status == "completed"

        for store, resumed in ((fresh, False), (interrupted, True)):
            result = _engram(env, "stores", "reindex", store.name, "--backend", "qdrant", "--json")
            assert result.returncode == 0, result.stderr[-2000:]
            outcome = json.loads(result.stdout)
            assert (outcome["backend"], outcome["ran_in"], outcome["resumed"]) == ("qdrant", "stack", resumed)
            assert outcome["files"] == len(FILES)  # the row's count: every file moved, by either run
            shown = _engram(env, "stores", "reindex", store.name, "--backend", "qdrant")  # on it already
            assert shown.returncode == 0 and "is on qdrant" in shown.stdout, shown.stderr[-2000:]
            hits = client.vector_stores.search(store.id, query="heron 3 reed bed", max_num_results=1)
            assert hits.data[0].filename == "note-03.txt"
        progress = _engram(env, "stores", "reindex", "held", "--backend", "pgvector")
        assert progress.returncode == 0, progress.stderr[-2000:]
        assert "(in engram serve's stack)" in progress.stderr and "1/1" in progress.stderr, progress.stderr

        listed = _engram(env, "stores", "--json")
        assert listed.returncode == 0, listed.stderr[-2000:]
        rows = {s["name"]: s for s in json.loads(listed.stdout)}
        for name in ("moved-in-stack", "resumed-in-stack"):
            # the index was built by the stack; this process cannot open the engine to count the points
            assert rows[name]["backend"] == "qdrant" and rows[name]["index"]["indexed"] is True, rows[name]
            assert rows[name]["index"]["pending_files"] == 0
        assert rows["held"]["backend"] == "pgvector"
    finally:
        stop(serve, signal.SIGINT)
