"""The drop-folder sync from outside: ``POST /v1/drop_folder/sync`` over real HTTP (the caller's tenant only, OpenAI's
error envelope, strict bodies, bounded with ``in_progress``) and ``engram sync --json`` / ``engram stats --json``,
on moto with the real handlers."""

from __future__ import annotations

import dataclasses
import json
import uuid

import httpx
import pytest
from typer.testing import CliRunner

from chalicelib import config
from chalicelib.store.db import connect
from tests.events import state
from tests.events.conftest import BUCKET, EMBED_QUEUE, INGEST_QUEUE, REGION

COUNTS = ("scanned", "new", "modified", "deleted", "unchanged", "failed")


def _counts(**nonzero: int) -> dict[str, int]:
    return {name: nonzero.get(name, 0) for name in COUNTS}


def _lose_events(harness) -> None:
    harness.sqs.purge_queue(QueueUrl=harness.urls[INGEST_QUEUE])


@pytest.fixture()
def server(harness, pipeline_settings, hashing_embedder):
    """The HTTP API on the pipeline settings (bucket and queues set, no background threads)."""
    from chalicelib.api.context import forget_keys
    from engram_cli import server as local_server

    running = local_server.start(dataclasses.replace(pipeline_settings, poll_after_ms=10), host="127.0.0.1", port=0,
                                 embedder=hashing_embedder, worker_threads=0)
    yield running
    running.stop()
    forget_keys()


@pytest.fixture()
def http(server, pipeline_settings):
    """``http(tenant)`` → an httpx client with a key of a new tenant, on ``/v1``."""
    from chalicelib.store import api_keys

    clients = []

    def make(tenant: str) -> httpx.Client:
        with connect(pipeline_settings) as conn:
            key = api_keys.create_key(conn, tenant)[1]
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def _tenant() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def _names(settings, tenant: str, store: str) -> set[str]:
    return {name for (t, s, name) in state.files(settings) if (t, s) == (tenant, store)}


def test_the_route_syncs_the_callers_drop_folder_only(harness, http, pipeline_settings):
    mine, theirs = _tenant(), _tenant()
    me, them = http(mine), http(theirs)
    for i in range(4):
        harness.put(f"{mine}/docs/d{i}.txt", f"document {i} about lighthouses".encode())
    harness.put(f"{theirs}/other/x.txt", b"the other tenant's object")
    _lose_events(harness)

    answer = me.post("/drop_folder/sync", json={})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body == {"object": "drop_folder.sync", "status": "completed", "vector_store_id": None,
                    "counts": _counts(scanned=4, new=4), "seconds": body["seconds"]}
    harness.drain()
    assert _names(pipeline_settings, mine, "docs") == {f"d{i}.txt" for i in range(4)}
    assert _names(pipeline_settings, theirs, "other") == set()  # another tenant's prefix is never touched

    store = next(s for s in me.get("/vector_stores").json()["data"] if s["name"] == "docs")
    again = me.post("/drop_folder/sync", json={"vector_store": "docs"}).json()
    assert again["vector_store_id"] == store["id"] and again["counts"] == _counts(scanned=4, unchanged=4)
    assert me.post("/drop_folder/sync", json={"vector_store": store["id"]}).json()["counts"]["unchanged"] == 4
    assert them.post("/drop_folder/sync").json()["counts"] == _counts(scanned=1, new=1)


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"bogus": 1}, "bogus", "unknown_parameter"),
    ({"vector_store": "no-such-store"}, "vector_store", "store_not_found"),
    ({"vector_store": "vs_NotAnObject0000000000000"}, "vector_store", "store_not_found"),
    ({"vector_store": ""}, "vector_store", "empty_string"),
    ({"vector_store": 7}, "vector_store", "invalid_type"),
])
def test_bad_input_is_a_400_in_openais_envelope(harness, http, body, param, code):
    client = http(_tenant())
    answer = client.post("/drop_folder/sync", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code), error
    typo = client.post("/drop_folder/sync", params={"store": "docs"}, json={})
    assert typo.status_code == 400 and typo.json()["error"]["code"] == "unknown_parameter"
    assert harness.depth(INGEST_QUEUE) <= 1  # at most S3's test event: nothing was sent


def test_a_sync_over_its_time_budget_answers_in_progress_and_the_next_call_continues(harness, http,
                                                                                   pipeline_settings, monkeypatch):
    from chalicelib.api.routes import drop_folder

    tenant = _tenant()
    client = http(tenant)
    for i in range(5):
        harness.put(f"{tenant}/slow/s{i}.txt", f"slow {i}".encode())
    _lose_events(harness)
    monkeypatch.setattr(drop_folder, "REQUEST_BUDGET_S", 0.0)  # out of time after each key
    answers = []
    while not answers or answers[-1]["status"] == "in_progress":
        answer = client.post("/drop_folder/sync", json={})
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        assert len(answers) < 20
    assert len(answers) > 1 and answers[0]["status"] == "in_progress"
    assert sum(a["counts"]["new"] for a in answers) == 5
    harness.drain()
    assert _names(pipeline_settings, tenant, "slow") == {f"s{i}.txt" for i in range(5)}


def test_engram_sync_json_and_stats(harness, pipeline_settings, tmp_path, monkeypatch):
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli.main import app

    tenant = _tenant()
    with connect(pipeline_settings) as conn:
        ensure_tenant(conn, tenant)
    env = {"DATABASE_URL": pipeline_settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path), "ENGRAM_TENANT": tenant,
           "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_BUCKET": BUCKET, "ENGRAM_INGEST_QUEUE": INGEST_QUEUE,
           "ENGRAM_EMBED_QUEUE": EMBED_QUEUE, "AWS_REGION": REGION, "ENGRAM_METRICS": "off"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config.settings.cache_clear()
    harness.put(f"{tenant}/cli/a.txt", b"dropped while nothing listened")
    harness.put(f"{tenant}/cli/b.txt", b"dropped while nothing listened either")
    _lose_events(harness)
    runner = CliRunner()
    try:
        result = runner.invoke(app, ["sync", "--tenant", tenant, "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["status"] == "finished" and out["scope"] == tenant and out["counts"] == _counts(scanned=2, new=2)
        harness.drain()
        assert _names(pipeline_settings, tenant, "cli") == {"a.txt", "b.txt"}
        by_store = runner.invoke(app, ["sync", "--store", "cli", "--json"], catch_exceptions=False)  # ENGRAM_TENANT
        assert by_store.exit_code == 0, by_store.output
        assert json.loads(by_store.stdout)["counts"] == _counts(scanned=2, unchanged=2)
        stats = json.loads(runner.invoke(app, ["stats", "--json"], catch_exceptions=False).stdout)
        last = stats["drop_folder_sync"]
        assert last["scope"].startswith(f"{tenant}?store=vs_") and last["status"] == "finished"
        assert last["counts"] == _counts(scanned=2, unchanged=2)
        jobs = json.loads(runner.invoke(app, ["jobs", "list", "--json"], catch_exceptions=False).stdout)
        assert any(row["job"] == "sync_drop_folder" and row["scope"] == tenant
                   and row["last_counts"] == _counts(scanned=2, new=2) for row in jobs)
        # A store the bucket holds and the database does not yet (its drop events were lost before it existed).
        harness.put(f"{tenant}/syncme/c.txt", b"dropped into a store nobody has seen")
        queue = harness.urls[INGEST_QUEUE]  # lost without a purge (SQS allows one a minute)
        while lost := harness.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages"):
            for message in lost:
                harness.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        unseen = runner.invoke(app, ["sync", "--store", "syncme", "--json"], catch_exceptions=False)
        assert unseen.exit_code == 0, unseen.output
        assert json.loads(unseen.stdout)["counts"] == _counts(scanned=1, new=1)
        harness.drain()
        assert _names(pipeline_settings, tenant, "syncme") == {"c.txt"}
        missing = runner.invoke(app, ["sync", "--store", "no-such-store"])
        assert missing.exit_code == 2 and "store_not_found" in missing.output
    finally:
        config.settings.cache_clear()
