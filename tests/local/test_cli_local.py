"""``engram drop`` and ``engram redrive`` against a running local stack found through its state file."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest
from typer.testing import CliRunner

from chalicelib import config
from chalicelib.dispatch.table import QUEUES
from engram_cli.local.stack import LocalStack
from engram_cli.main import app


@pytest.fixture()
def stack_cli(settings, tmp_path, monkeypatch):
    """A stack whose state file lives in ENGRAM_DATA_DIR, and ``run(*args)`` → the CLI's stdout (exit code 0)."""
    saved = dict(os.environ)
    tag = uuid.uuid4().hex[:6]
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ENGRAM_TENANT", "acme")
    monkeypatch.setenv("DATABASE_URL", settings.database_url)
    stack = LocalStack(tmp_path, queues={spec.role: f"cli-{spec.role}-{tag}" for spec in QUEUES},
                       notify_queue=f"cli-ingest-{tag}", max_receives=2, port=0, bucket=f"cli-{tag}")
    state = stack.start()
    config.settings.cache_clear()

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    yield state, run
    stack.stop()
    os.environ.clear()
    os.environ.update(saved)  # the CLI exported the stack's environment into this process
    config.settings.cache_clear()


def _keys_in_queue(state) -> list[str]:
    sqs, url = state.client("sqs"), state.queue_url(state.roles["ingest"])
    keys = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        if not got:
            return keys
        for m in got:
            body = json.loads(m["Body"])
            keys += [r["s3"]["object"]["key"] for r in body.get("Records", [])]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_drop_uploads_folders_with_sidecars_first(stack_cli, tmp_path):
    state, run = stack_cli
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("alpha")
    (docs / "sub" / "b.md").write_text("# beta")
    (docs / "sub" / "b.md.metadata.json").write_text('{"metadataAttributes": {"team": "sre"}}')
    (docs / ".hidden").write_text("no")
    single = tmp_path / "c.txt"
    single.write_text("gamma")
    out = run("drop", str(docs), str(single), "--store", "handbook")
    assert "uploaded 4 files" in out
    s3 = state.client("s3")
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=state.bucket)["Contents"])
    assert listed == ["acme/handbook/a.txt", "acme/handbook/c.txt", "acme/handbook/sub/b.md",
                      "acme/handbook/sub/b.md.metadata.json"]
    assert s3.get_object(Bucket=state.bucket, Key="acme/handbook/sub/b.md")["Body"].read() == b"# beta"
    from urllib.parse import unquote_plus

    keys = [unquote_plus(k) for k in _keys_in_queue(state)]
    assert keys[0] == "acme/handbook/sub/b.md.metadata.json" and len(keys) == 4

    run("drop", str(single), "--store", "other", "--tenant", "globex")
    assert s3.get_object(Bucket=state.bucket, Key="globex/other/c.txt")["Body"].read() == b"gamma"


def test_redrive_moves_dead_letters_back_unchanged(stack_cli):
    state, run = stack_cli
    sqs = state.client("sqs")
    ingest = state.roles["ingest"]
    dlq_url = state.queue_url(state.dead_letter[ingest])
    for i in range(12):  # more than one receive's worth
        sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps({"n": i}),
                         MessageAttributes={"kind": {"DataType": "String", "StringValue": f"k{i}"}})
    out = run("redrive", "--queue", "ingest")
    assert "ingest: moved 12 messages" in out
    got = []
    while True:
        batch = sqs.receive_message(QueueUrl=state.queue_url(ingest), MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                    MessageAttributeNames=["All"]).get("Messages", [])
        if not batch:
            break
        got += [m for m in batch if "Records" not in m["Body"] and "TestEvent" not in m["Body"]]
    assert sorted(json.loads(m["Body"])["n"] for m in got) == list(range(12))
    assert all(m["MessageAttributes"]["kind"]["StringValue"] == f"k{json.loads(m['Body'])['n']}" for m in got)
    moved = re.findall(r"^(\w+): moved (\d+) messages", run("redrive"), re.MULTILINE)
    assert moved == [(spec.role, "0") for spec in QUEUES]  # every queue of the message table


def test_redrive_of_the_memory_queue(stack_cli):
    state, run = stack_cli
    sqs = state.client("sqs")
    memory = state.roles["memory"]
    body = json.dumps({"type": "memory.add", "v": 1, "tenant": "acme", "job_id": "memjob_x"})
    sqs.send_message(QueueUrl=state.queue_url(state.dead_letter[memory]), MessageBody=body)
    assert "memory: moved 1 messages" in run("redrive", "--queue", "memory")
    got = sqs.receive_message(QueueUrl=state.queue_url(memory), WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in got] == [body]
    assert "ingest" not in run("redrive", "--queue", "memory")


def test_redrive_refuses_an_unknown_queue(stack_cli):
    result = CliRunner().invoke(app, ["redrive", "--queue", "nope"])
    assert result.exit_code == 2 and "ingest, embed, memory or all" in result.output


def test_pump_and_drop_without_a_stack_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ENGRAM_BUCKET", raising=False)
    config.settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["pump"])
        assert result.exit_code == 2 and "no local stack" in result.output
        result = CliRunner().invoke(app, ["drop", str(tmp_path), "--store", "x"])
        assert result.exit_code == 2 and "no local stack" in result.output
    finally:
        config.settings.cache_clear()
