"""The local stack loses nothing on restart: ``engram serve``'s services (moto, the pump, the API, through the
official SDK) stopped and started again on the same data directory.

- uploaded files' bytes survive: ``files.content``, ``vector_stores.files.content``, attaching again and search
  work after the restart;
- a file still in flight (its message queued, not handled) when the stack stops completes after the restart: the
  stack re-sends open versions;
- the same after a SIGKILL of ``engram serve`` (a subprocess) mid-ingest;
- a SIGKILL of ``engram serve`` while files are being dropped: the files whose S3 events were handled settle after
  the restart, those whose events were still queued (lost with moto's queues) after one sync
  (``POST /v1/drop_folder/sync``) — every object exactly one file, no duplicate chunk;
- a file's bytes deleted or changed behind Engram's back: a 410 naming the file (``file_content_missing`` /
  ``file_content_changed``), never a 5xx, and attaching it fails with that ``last_error``;
- on the same services, an attach whose chunks a slow embedder cannot embed within the inline budget answers
  ``in_progress`` and is staged and queued through the stack's SQS queues (the embed queue), then completes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from chalicelib import config, deps
from tests.conftest import BOTH_BACKENDS, REPO
from tests.events import state
from tests.fakes.embedding_server import FakeEmbeddingServer
from tests.processes import free_port, wait_healthy

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

TENANT = "acme"
TEXT = b"Engram keeps the bytes of every uploaded file.\n\nThe pelican nests on the quay near the lighthouse.\n"


@pytest.fixture()
def services(settings, tmp_path, monkeypatch) -> Iterator[Callable[..., tuple[Any, openai.OpenAI]]]:
    """``start(pump=True, **env)`` → ``(services, client)``: the local services on ``tmp_path`` (the data
    directory, the same for every start of the test) with the API, and an SDK client with a key of ``TENANT``.
    Stop them with ``services.stop()``; whatever is still running is stopped afterwards."""
    from chalicelib import aws
    from chalicelib.api.context import forget_keys
    from chalicelib.store import api_keys
    from chalicelib.store.db import close_pools, connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.local import run

    saved = dict(os.environ)
    running: list[Any] = []
    key: list[str] = []

    def start(pump: bool = True, **env: str) -> tuple[Any, openai.OpenAI]:
        base = {"DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path),
                "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_AUTH_MODE": "keys",
                "ENGRAM_METRICS": "off", "ENGRAM_VECTOR_BACKEND": settings.vector_backend}
        for name, value in {**base, **env}.items():
            monkeypatch.setenv(name, value)
        config.settings.cache_clear()
        deps.reset()
        local = run.start_services(config.settings(), aws_port=0, workers=1, pump=pump)
        running.append(local)
        local.serve_api("127.0.0.1", 0)
        if not key:
            with connect(config.settings()) as conn:
                ensure_tenant(conn, TENANT)
                key.append(api_keys.create_key(conn, TENANT)[1])
        return local, openai.OpenAI(base_url=local.api.url, api_key=key[0], max_retries=0, timeout=60)

    yield start
    for local in running:
        try:
            local.stop()
        except Exception:
            pass
    os.environ.clear()
    os.environ.update(saved)
    config.settings.cache_clear()
    forget_keys()
    deps.reset()
    aws.reset()
    close_pools()


def _poll(client: openai.OpenAI, store_id: str, file_id: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        row = client.vector_stores.files.retrieve(file_id, vector_store_id=store_id)
        if row.status != "in_progress" or time.monotonic() > deadline:
            return row
        time.sleep(0.2)


def _content(client: openai.OpenAI, store_id: str, file_id: str) -> str:
    return "".join(part.text for part in client.vector_stores.files.content(file_id, vector_store_id=store_id))


def test_uploaded_bytes_survive_a_restart(services):
    local, client = services()
    kept = client.files.create(file=("kept.txt", TEXT), purpose="assistants")
    later = client.files.create(file=("later.txt", TEXT.replace(b"pelican", b"cormorant")), purpose="assistants")
    store = client.vector_stores.create(name="restart")
    assert client.vector_stores.files.create_and_poll(kept.id, vector_store_id=store.id).status == "completed"
    objects = local.stack.objects_dir
    local.stop()
    assert len(list(objects.glob("*.bin"))) == 2  # both uploads are on disk under the data directory

    local, client = services()
    assert client.files.content(kept.id).read() == TEXT
    assert "pelican" in _content(client, store.id, kept.id)
    attached = client.vector_stores.files.create_and_poll(later.id, vector_store_id=store.id)
    assert attached.status == "completed", attached.last_error
    again = client.vector_stores.files.create_and_poll(kept.id, vector_store_id=store.id)  # re-attach: re-read
    assert again.status == "completed", again.last_error
    hits = client.vector_stores.search(store.id, query="cormorant quay", max_num_results=2)
    assert hits.data[0].file_id == later.id


def test_a_file_in_flight_at_stop_completes_after_the_restart(services):
    local, client = services(pump=False, ENGRAM_INLINE_MAX_BYTES="0")  # every attach goes through the queue
    upload = client.files.create(file=("queued.txt", TEXT), purpose="assistants")
    store = client.vector_stores.create(name="in-flight")
    queued = client.vector_stores.files.create(vector_store_id=store.id, file_id=upload.id)
    assert queued.status == "in_progress"
    local.stop()  # its ingest message dies with moto's queue

    local, client = services(pump=True)
    row = _poll(client, store.id, upload.id)
    assert row.status == "completed", row.last_error
    assert "lighthouse" in _content(client, store.id, upload.id)


def test_a_sigkilled_serve_loses_nothing(services, settings, tmp_path):
    api_port, aws_port = free_port(), free_port()
    env = {**os.environ, "DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path),
           "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_AUTH_MODE": "keys",
           "ENGRAM_METRICS": "off", "ENGRAM_INLINE_MAX_BYTES": "0"}
    child = subprocess.Popen([sys.executable, "-m", "engram_cli.main", "serve", "--no-pump", "--port", str(api_port),
                              "--aws-port", str(aws_port)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        from chalicelib.store import api_keys
        from chalicelib.store.db import connect
        from chalicelib.store.vector_stores import ensure_tenant

        with connect(settings) as conn:
            ensure_tenant(conn, TENANT)
            key = api_keys.create_key(conn, TENANT)[1]
        wait_healthy(f"http://127.0.0.1:{api_port}", child, 60)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{api_port}/v1", api_key=key, max_retries=0)
        upload = client.files.create(file=("killed.txt", TEXT), purpose="assistants")
        store = client.vector_stores.create(name="killed")
        assert client.vector_stores.files.create(vector_store_id=store.id, file_id=upload.id).status == "in_progress"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)

    local, client = services(pump=True)  # the same data directory; the dead stack's state file is stale
    row = _poll(client, store.id, upload.id)
    assert row.status == "completed", row.last_error
    assert client.files.content(upload.id).read() == TEXT


def _serve(settings, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, dict[str, str]]:
    """``engram serve ARGS`` (or another command) as a subprocess on ``tmp_path``; returns it and its environment."""
    env = {**os.environ, "DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path),
           "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_AUTH_MODE": "keys",
           "ENGRAM_METRICS": "off", "ENGRAM_VECTOR_BACKEND": settings.vector_backend}
    child = subprocess.Popen([sys.executable, "-m", "engram_cli.main", *args], cwd=REPO, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return child, env


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 60, child: Any = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if child is not None and child.poll() is not None:
            raise AssertionError(f"{what}: the process exited: {child.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _live_objects(settings, prefix: str) -> int:
    """Drop-folder objects under ``prefix`` whose event was applied (the file is registered)."""
    from chalicelib.store.db import connect

    with connect(settings) as conn:
        return conn.execute("SELECT count(*) FROM drop_objects WHERE key LIKE %s AND NOT deleted AND file_id IS NOT "
                            "NULL", (prefix + "%",)).fetchone()[0]


def test_a_sigkill_while_dropping_loses_nothing_after_one_sync(services, settings, tmp_path):
    """The scenario of issue 24 §1: 25 files dropped while ``engram serve`` runs; the pump handles the first 10
    events, then stops (SIGKILL) and 15 more are dropped, their events queued; ``engram serve`` is SIGKILLed. After
    the restart the 10 settle (their open versions are re-sent) and the 15 left no trace; one sync brings them in."""
    from chalicelib.store.db import connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.local import run
    from engram_cli.local.stack import load_state

    store, handled, queued = "dropped", 10, 15
    names = [f"doc{i:02d}.txt" for i in range(handled + queued)]
    prefix = f"{TENANT}/{store}/"
    with connect(settings) as conn:
        ensure_tenant(conn, TENANT)
    started = time.monotonic()
    serve, _ = _serve(settings, tmp_path, "serve", "--no-pump", "--port", str(free_port()), "--aws-port",
                      str(free_port()))
    pump = None
    try:
        _wait(lambda: load_state(tmp_path) is not None, "the local stack", child=serve)
        stack = load_state(tmp_path)
        assert stack is not None
        s3 = stack.client("s3")

        def drop(name: str) -> None:
            text = f"{name}: notes on the tide tables of harbour {name}, and the lighthouse keeper's log. " * 30
            s3.put_object(Bucket=stack.bucket, Key=prefix + name, Body=text.encode())

        pump, _ = _serve(settings, tmp_path, "pump")
        for name in names[:handled]:
            drop(name)
        _wait(lambda: _live_objects(settings, prefix) == handled, "the first events to be handled", child=pump)
        pump.send_signal(signal.SIGKILL)
        pump.wait(10)
        for name in names[handled:]:
            drop(name)
        assert run.queue_depth(stack, stack.notify_queue) >= queued  # their events wait in moto's queue
    finally:
        for child in (pump, serve):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.wait(10)
    killed_s = time.monotonic() - started

    local, client = services(pump=True)  # the same data directory: the dropped objects are kept on disk
    config_now = config.settings()
    after_restart = run.wait_for_files(config_now, local.state, TENANT, store, set(names[:handled]), timeout_s=60)
    assert {f.status for f in after_restart.values()} == {"completed"} and len(after_restart) == handled
    assert set(run.store_files(config_now, TENANT, store, set(names))) == set(names[:handled])  # 15 left no trace

    answer = httpx.post(f"{local.api.url}/drop_folder/sync", json={}, timeout=60,
                        headers={"Authorization": f"Bearer {client.api_key}"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["counts"] == {"scanned": handled + queued, "new": queued, "modified": 0, "deleted": 0,
                                       "unchanged": handled, "failed": 0}
    settled = run.wait_for_files(config_now, local.state, TENANT, store, set(names), timeout_s=90)
    assert {name: f.status for name, f in settled.items()} == dict.fromkeys(names, "completed")
    with connect(settings) as conn:
        files, rows, distinct = conn.execute(
            "SELECT count(DISTINCT f.id), count(c.id), count(DISTINCT (c.file_id, c.chunk_index)) FROM files f "
            "JOIN chunks c ON c.file_id = f.id WHERE f.content_key LIKE %s", (prefix + "%",)).fetchone()
        per_object = conn.execute("SELECT count(*) FROM files WHERE content_key LIKE %s",
                                  (prefix + "%",)).fetchone()[0]
        recorded = conn.execute("SELECT sum(sf.chunk_count) FROM vector_store_files sf JOIN vector_stores s ON "
                                "s.id = sf.vector_store_id WHERE s.name = %s", (store,)).fetchone()[0]
    assert files == per_object == len(names)  # exactly one file per object
    assert rows == distinct == recorded  # no duplicate chunk
    again = httpx.post(f"{local.api.url}/drop_folder/sync", json={}, timeout=60,
                       headers={"Authorization": f"Bearer {client.api_key}"}).json()
    assert again["counts"]["unchanged"] == len(names) and again["counts"]["new"] == 0
    state.check_qdrant(config_now, (store,))  # on Qdrant: every settled file's points are exactly its chunks
    print(f"\nSIGKILL + sync: {len(names)} dropped, {handled} handled before the kill ({killed_s:.1f} s), "
          f"{len(after_restart)} settled after the restart, {len(settled)} after one sync, "
          f"{rows - distinct} duplicate chunks, {time.monotonic() - started:.1f} s in all")


def test_bytes_deleted_or_changed_behind_engrams_back_are_a_clear_error(services):
    from chalicelib.store.files import content_key

    local, client = services()
    gone = client.files.create(file=("gone.txt", TEXT), purpose="assistants")
    changed = client.files.create(file=("changed.txt", TEXT), purpose="assistants")
    s3, bucket = local.state.client("s3"), local.state.bucket
    s3.delete_object(Bucket=bucket, Key=content_key(TENANT, gone.id))
    s3.put_object(Bucket=bucket, Key=content_key(TENANT, changed.id), Body=TEXT + b"tampered")

    for file, code, name in ((gone, "file_content_missing", "gone.txt"),
                             (changed, "file_content_changed", "changed.txt")):
        with pytest.raises(openai.APIStatusError) as caught:
            client.files.content(file.id).read()
        assert caught.value.status_code == 410
        error = caught.value.body
        assert error["code"] == code and file.id in error["message"] and name in error["message"], error
    store = client.vector_stores.create(name="behind-the-back")
    for file, code in ((gone, "file_content_missing"), (changed, "file_content_changed")):
        row = client.vector_stores.files.create_and_poll(file.id, vector_store_id=store.id)
        assert row.status == "failed" and row.last_error.code == code and file.id in row.last_error.message, row

    # deleted on disk while the stack is stopped: the same error after the restart
    objects: Path = local.stack.objects_dir
    third = client.files.create(file=("third.txt", TEXT), purpose="assistants")
    local.stop()
    for path in objects.iterdir():
        if path.suffix == ".json" and third.id in path.read_text():
            path.unlink()
            path.with_suffix(".bin").unlink()
    local, client = services()
    with pytest.raises(openai.APIStatusError) as caught:
        client.files.content(third.id).read()
    assert caught.value.status_code == 410 and caught.value.body["code"] == "file_content_missing"


def test_an_attach_over_the_inline_budget_goes_through_the_stacks_queues(services):
    from chalicelib.embed import rate

    with FakeEmbeddingServer(dimension=32) as fake:
        local, client = services(ENGRAM_EMBEDDING_PROVIDER="openai", ENGRAM_EMBEDDING_BASE_URL=fake.base_url,
                                 ENGRAM_EMBEDDING_MODEL="fake-stack-slow", ENGRAM_EMBEDDING_DIMENSIONS="32",
                                 ENGRAM_INLINE_BUDGET_S="0.5", ENGRAM_EMBED_BATCH_CHUNKS="8")
        rate.forget()
        fake.delay_per_input_s = 0.05
        store = client.vector_stores.create(name="budget-stack")
        # a first attach warms the request path (a fresh clone compiles each module on its first import, which
        # alone can outlast the half-second budget on a loaded machine): inline or queued, it completes
        warm = client.files.create(file=("warm.txt", b"Warming the path: the tide tables."), purpose="assistants")
        client.vector_stores.files.create(vector_store_id=store.id, file_id=warm.id)
        assert _poll(client, store.id, warm.id).status == "completed"
        small = client.files.create(file=("small.txt", TEXT), purpose="assistants")
        assert client.vector_stores.files.create(vector_store_id=store.id, file_id=small.id).status == "completed"
        text = " ".join(f"word{i}" for i in range(20_000)).encode()  # ~40 chunks: ~2 s at 50 ms each
        big = client.files.create(file=("big.txt", text), purpose="assistants")
        started = time.monotonic()
        row = client.vector_stores.files.create(vector_store_id=store.id, file_id=big.id)
        held_s = time.monotonic() - started
        assert row.status == "in_progress" and held_s < 1.5, (row.status, held_s)
        done = _poll(client, store.id, big.id)
        assert done.status == "completed", done.last_error
        assert done.usage_bytes > 0
