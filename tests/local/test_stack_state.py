"""The state file other commands find a running stack by, the environment it exports, a taken port, a stale file.
(Its own module: starting a stack resets moto's per-process backends, which a module-scoped stack would lose.)"""

from __future__ import annotations

import json
import os

import pytest

from engram_cli.local.stack import STATE_FILE, LocalStack, apply_env, load_state


def test_state_file_env_and_restart(tmp_path, monkeypatch):
    stack = LocalStack(tmp_path, queues={"ingest": "q-ingest", "embed": "q-embed"}, notify_queue="q-ingest",
                       max_receives=5, port=0, bucket="state-bucket")
    state = stack.start()
    try:
        assert (tmp_path / STATE_FILE).exists()
        found = load_state(tmp_path)
        assert found == state and found.queues["q-embed-dlq"].endswith("/q-embed-dlq")
        env = {}
        apply_env(found, env)
        assert env["ENGRAM_BUCKET"] == "state-bucket" and env["AWS_ENDPOINT_URL_SQS"] == state.endpoint
        assert env["ENGRAM_INGEST_QUEUE"] == state.queues["q-ingest"]
        assert env["ENGRAM_EMBED_QUEUE"] == state.queues["q-embed"]
        assert "AWS_ENDPOINT_URL" not in env  # Bedrock and other clients are not redirected to moto
        with pytest.raises(OSError, match="already in use"):
            LocalStack(tmp_path / "other", queues={"i": "i"}, notify_queue="i", max_receives=1,
                       port=int(state.endpoint.rsplit(":", 1)[1])).start()
    finally:
        stack.stop()
    assert not (tmp_path / STATE_FILE).exists() and load_state(tmp_path) is None


def test_a_stale_state_file_is_ignored(tmp_path):
    (tmp_path / STATE_FILE).write_text(json.dumps({
        "endpoint": "http://127.0.0.1:1", "region": "us-east-1", "bucket": "b", "queues": {}, "roles": {},
        "dead_letter": {}, "notify_queue": "q", "secret_arn": None, "pid": os.getpid()}))
    assert load_state(tmp_path) is None


def test_an_exporting_stack_restores_the_environment_on_stop(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGRAM_BUCKET", "mine")
    monkeypatch.delenv("ENGRAM_INGEST_QUEUE", raising=False)
    stack = LocalStack(tmp_path, queues={"ingest": "x-ingest"}, notify_queue="x-ingest", max_receives=2, port=0,
                       bucket="exported", export_env=True)
    state = stack.start()
    try:
        assert os.environ["ENGRAM_BUCKET"] == "exported"
        assert os.environ["ENGRAM_INGEST_QUEUE"] == state.queues["x-ingest"]
    finally:
        stack.stop()
    assert os.environ["ENGRAM_BUCKET"] == "mine" and "ENGRAM_INGEST_QUEUE" not in os.environ
    assert "AWS_ENDPOINT_URL_SQS" not in os.environ


def test_one_stack_per_data_folder(tmp_path):
    """A second stack on a running stack's data folder refuses, naming the first's process and addresses, and
    leaves the first's state file alone; once the first stops, the folder is free again. A second process is
    refused the same way (the lock is the kernel's, per open file)."""
    import subprocess
    import sys

    from engram_cli.local.stack import StackRunningError

    first = LocalStack(tmp_path, queues={"ingest": "l-ingest"}, notify_queue="l-ingest", max_receives=2, port=0,
                       bucket="locked")
    state = first.start()
    try:
        first.record_api("http://127.0.0.1:8123/v1")
        second = LocalStack(tmp_path, queues={"ingest": "l-ingest"}, notify_queue="l-ingest", max_receives=2,
                            port=0, bucket="locked")
        with pytest.raises(StackRunningError) as refused:
            second.start()
        message = str(refused.value)
        assert f"process {os.getpid()}" in message and state.endpoint in message
        assert "http://127.0.0.1:8123/v1" in message
        second.stop()  # what `engram serve` does on the way out: the first's state file must survive it
        assert json.loads((tmp_path / STATE_FILE).read_text())["endpoint"] == state.endpoint
        code = ("import sys; from pathlib import Path; from engram_cli.local.stack import FolderLock, "
                "StackRunningError\ntry:\n    FolderLock(Path(sys.argv[1])).acquire()\nexcept StackRunningError as e:"
                "\n    print(e); sys.exit(3)")
        other = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
        assert other.returncode == 3 and f"process {os.getpid()}" in other.stdout
    finally:
        first.stop()
    again = LocalStack(tmp_path, queues={"ingest": "l-ingest"}, notify_queue="l-ingest", max_receives=2, port=0,
                       bucket="locked")
    again.start()
    again.stop()
