"""Asynchronous memory adds through the local stack as deployed: ``POST /v1/memories`` (202, a ``memjob_`` job) →
SQS ``engram-memory`` on moto → the event pump → ``app.memory`` → Postgres, with the scripted fake chat server as
the memory model (``ENGRAM_MEMORY_MODEL`` + ``ENGRAM_CHAT_BASE_URL``).

- the job completes with the add's results and token usage;
- a memory model that stays down: every receive fails (``attempts`` = the receive count), the last one fails the
  job with ``last_error``, the message waits in the dead-letter queue, and ``engram redrive --queue memory``
  completes the job once the model is back;
- the same SQS record delivered twice, one after the other or at the same moment, stores one memory and completes
  the job once;
- the same ``Idempotency-Key`` twice is one job and one message.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from chalicelib.dispatch.table import queue
from tests.fakes.chat_server import FakeChatServer, error, text

TENANT = "acme"
MEMORY_MODEL = "fake-memory-model"
MAX_RECEIVES = 3
MEMORY = queue("memory")


def facts(*items: str, **kwargs: Any) -> Any:
    """An extraction answer with these facts."""
    return text(json.dumps({"facts": [{"fact": i, "confidence": 0.9} for i in items]}), **kwargs)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatServer]:
    """The scripted chat model."""
    with FakeChatServer() as server:
        yield server


@pytest.fixture(scope="module")
def stack(settings, fake, hashing_embedder, tmp_path_factory):
    """The local stack (every queue of the message table, visibility 1 s, ``MAX_RECEIVES`` receives) and the API
    on it, with the fake as the memory model; the environment is restored afterwards."""
    from chalicelib import aws
    from chalicelib.api.context import forget_keys
    from chalicelib.store.db import close_pools
    from engram_cli import server
    from engram_cli.local import run

    saved = dict(os.environ)
    env = {"DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path_factory.mktemp("memq")),
           "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_MAX_RECEIVES": str(MAX_RECEIVES),
           "ENGRAM_AUTH_MODE": "keys", "ENGRAM_MEMORY_MODEL": MEMORY_MODEL, "ENGRAM_CHAT_BASE_URL": fake.base_url,
           "ENGRAM_CHAT_API_KEY": "sk-test", "ENGRAM_CHAT_MAX_RETRIES": "0", "ENGRAM_CHAT_TIMEOUT_S": "5",
           "ENGRAM_POLL_AFTER_MS": "50"}
    os.environ.update(env)
    config.settings.cache_clear()
    deps.set_settings(None)
    local = run.start_stack(config.settings(), port=0, visibility_timeout_s=1)
    aws.reset()  # cached clients must see this stack's endpoint
    api = server.start(config.settings(), port=0, embedder=hashing_embedder, worker_threads=0)
    try:
        yield local, api
    finally:
        api.stop()
        local.stop()
        os.environ.clear()
        os.environ.update(saved)
        config.settings.cache_clear()
        forget_keys()
        deps.reset()
        aws.reset()
        close_pools()


@pytest.fixture()
def state(stack, fake):
    """The running stack's state; the fake's script is cleared around each test."""
    fake.clear()
    fake.default = None
    yield stack[0].state
    fake.clear()
    fake.default = None


@pytest.fixture()
def pump(state):
    """``pump()`` starts the event pump on the stack (stopped after the test)."""
    from engram_cli.local import run

    started = []

    def start():
        started.append(run.start_pump(state, workers=1, wait_s=1))
        return started[-1]

    yield start
    for running in started:
        running.stop()


@pytest.fixture()
def api(stack) -> Iterator[Callable[[], httpx.Client]]:
    """``api()`` → an ``httpx.Client`` on the ``/v1`` root with a new key of ``TENANT``."""
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect

    clients: list[httpx.Client] = []

    def make() -> httpx.Client:
        with connect(config.settings()) as conn:
            key = api_keys.create_key(conn, TENANT)[1]
        clients.append(httpx.Client(base_url=stack[1].url, headers={"Authorization": f"Bearer {key}"}, timeout=60))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def _submit(client: httpx.Client, user: str, messages: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/memories", json={"messages": messages, "user_id": user}, **extra)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["object"] == "memory.job" and job["id"].startswith("memjob_"), job
    return job


def _wait_job(client: httpx.Client, job_id: str, status: str, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/memories/jobs/{job_id}").json()
        if job["status"] == status or time.monotonic() > deadline:
            assert job["status"] == status, job
            return job
        time.sleep(0.1)


def _wait_depth(state, name: str, depth: int, timeout_s: float = 30) -> None:
    from engram_cli.local import run

    deadline = time.monotonic() + timeout_s
    while run.queue_depth(state, name) != depth:
        assert time.monotonic() < deadline, f"{name} holds {run.queue_depth(state, name)} messages, not {depth}"
        time.sleep(0.2)


def _memories(client: httpx.Client, user: str) -> list[dict[str, Any]]:
    response = client.get("/memories", params={"user_id": user})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def _rows(user: str) -> dict[str, list]:
    """What the add wrote for ``user``, read as the owner: memories, history events, jobs."""
    from chalicelib.store.db import connect

    with connect(config.settings()) as conn:
        return {
            "memories": conn.execute("SELECT id, memory, valid_from, updated_at FROM memories WHERE user_id = %s "
                                     "ORDER BY id", (user,)).fetchall(),
            "history": conn.execute("SELECT memory_id, event, new_memory FROM memory_history WHERE user_id = %s "
                                    "ORDER BY id", (user,)).fetchall(),
            "jobs": conn.execute("SELECT id, status, results, usage, completed_at FROM memory_jobs "
                                 "WHERE user_id = %s ORDER BY id", (user,)).fetchall(),
        }


def test_the_stack_has_the_memory_queue_and_the_api_uses_it(state):
    assert state.roles["memory"] == MEMORY.name
    assert state.dead_letter[MEMORY.name] == MEMORY.dlq
    assert config.settings().memory_queue == state.queue_url(MEMORY.name)
    attrs = state.client("sqs").get_queue_attributes(QueueUrl=state.queue_url(MEMORY.name),
                                                     AttributeNames=["RedrivePolicy"])["Attributes"]
    assert int(json.loads(attrs["RedrivePolicy"])["maxReceiveCount"]) == MAX_RECEIVES


def test_an_async_add_is_a_job_the_pump_completes(state, api, pump, fake):
    client = api()
    fake.push(facts("Likes green tea", "Lives in Lisbon"))
    job = _submit(client, "u-async", "I like green tea. I live in Lisbon.")
    assert job["status"] in ("queued", "in_progress") and job["results"] is None
    pump()
    done = _wait_job(client, job["id"], "completed")
    assert sorted((r["event"], r["memory"]) for r in done["results"]) == [("ADD", "Likes green tea"),
                                                                        ("ADD", "Lives in Lisbon")]
    assert done["usage"]["model_calls"] == 1 and done["usage"]["total_tokens"] > 0
    assert done["last_error"] is None and done["attempts"] == 1 and done["completed_at"] >= done["created_at"]
    assert fake.requests[0]["model"] == MEMORY_MODEL
    stored = {m["id"]: m["memory"] for m in _memories(client, "u-async")}
    assert stored == {r["id"]: r["memory"] for r in done["results"]}
    _wait_depth(state, MEMORY.name, 0)
    # inline still when asked
    fake.push(facts("Has a cat"))
    inline = client.post("/memories", json={"messages": "I have a cat", "user_id": "u-inline", "async": False})
    assert inline.status_code == 200 and [r["event"] for r in inline.json()["results"]] == ["ADD"], inline.text


def test_model_down_retries_then_fails_the_job_and_a_redrive_completes_it(state, api, pump, fake):
    from engram_cli.main import app

    client = api()
    fake.default = error(503, "the model is down")
    job = _submit(client, "u-down", "My favourite colour is teal.")
    pump()
    failed = _wait_job(client, job["id"], "failed")
    # every receive ran the add once (no retries inside a call): the last receive failed the job
    assert failed["attempts"] == MAX_RECEIVES and len(fake.requests) == MAX_RECEIVES
    assert failed["last_error"]["code"] == "upstream_error" and "503" in failed["last_error"]["message"]
    assert failed["results"] is None and _memories(client, "u-down") == []
    _wait_depth(state, MEMORY.dlq, 1)
    _wait_depth(state, MEMORY.name, 0)

    fake.default = None
    fake.push(facts("Favourite colour is teal"))
    result = CliRunner().invoke(app, ["redrive", "--queue", "memory"], catch_exceptions=False)
    assert result.exit_code == 0 and "memory: moved 1 messages" in result.stdout, result.output
    done = _wait_job(client, job["id"], "completed")
    assert [(r["event"], r["memory"]) for r in done["results"]] == [("ADD", "Favourite colour is teal")]
    assert done["last_error"] is None and done["attempts"] == MAX_RECEIVES + 1
    assert [m["memory"] for m in _memories(client, "u-down")] == ["Favourite colour is teal"]
    _wait_depth(state, MEMORY.dlq, 0)


def _receive_one(state) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one message waiting in the memory queue, received, and the Lambda event holding it."""
    from engram_cli.local.events import sqs_event

    sqs, url = state.client("sqs"), state.queue_url(MEMORY.name)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2, VisibilityTimeout=60,
                              AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
    assert len(got) == 1, got
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return got[0], sqs_event(got, arn, state.region)


def _delete(state, message: dict[str, Any]) -> None:
    """What the event source mapping does after a successful invocation."""
    state.client("sqs").delete_message(QueueUrl=state.queue_url(MEMORY.name), ReceiptHandle=message["ReceiptHandle"])


def test_a_record_delivered_twice_changes_nothing(state, api, fake):
    import app

    client = api()
    fake.push(facts("Plays the cello"))
    job = _submit(client, "u-twice", "I play the cello.")
    message, event = _receive_one(state)
    assert json.loads(message["Body"]) == {"type": "memory.add", "v": 1, "tenant": TENANT, "job_id": job["id"]}
    assert app.memory(event, None) == {"batchItemFailures": []}
    once = _rows("u-twice")
    assert len(once["memories"]) == 1 and [j[1] for j in once["jobs"]] == ["completed"]
    assert app.memory(event, None) == {"batchItemFailures": []}  # the same record again, after success
    assert _rows("u-twice") == once and len(fake.requests) == 1  # no second model call either
    done = _wait_job(client, job["id"], "completed")
    assert done["attempts"] == 1 and [r["memory"] for r in done["results"]] == ["Plays the cello"]
    _delete(state, message)


def test_a_record_delivered_twice_at_once_stores_one_memory(state, api, fake):
    import app

    client = api()
    # both deliveries reach the model (the check that the job is done comes after it) and wait there together
    fake.push(facts("Runs marathons", delay_s=0.5), facts("Runs marathons", delay_s=0.5))
    job = _submit(client, "u-race", "I run marathons.")
    message, event = _receive_one(state)
    start = threading.Barrier(2)
    answers: list[Any] = []

    def deliver() -> None:
        start.wait()
        answers.append(app.memory(event, None))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [{"batchItemFailures": []}] * 2 and len(fake.requests) == 2
    rows = _rows("u-race")
    assert [m[1] for m in rows["memories"]] == ["Runs marathons"]
    assert [(h[1], h[2]) for h in rows["history"]] == [("ADD", "Runs marathons")]
    done = _wait_job(client, job["id"], "completed")
    # completed once: by the delivery that added the memory (a second completion would report a NOOP)
    assert [j[1] for j in rows["jobs"]] == ["completed"] and done["attempts"] == 2
    assert [(r["event"], r["id"]) for r in done["results"]] == [("ADD", rows["memories"][0][0])]
    _delete(state, message)


def test_the_same_idempotency_key_is_one_job_and_one_message(state, api, pump, fake):
    from engram_cli.local import run

    client = api()
    headers = {"Idempotency-Key": "memq-1"}
    first = _submit(client, "u-idem", "I drink oat milk.", headers=headers)
    again = _submit(client, "u-idem", "I drink oat milk.", headers=headers)
    assert again["id"] == first["id"]
    assert run.queue_depth(state, MEMORY.name) == 1
    assert len(_rows("u-idem")["jobs"]) == 1
    other = client.post("/memories", json={"messages": "Something else", "user_id": "u-idem"}, headers=headers)
    assert other.status_code == 400 and other.json()["error"]["code"] == "idempotency_key_reused"

    fake.push(facts("Drinks oat milk"))
    pump()
    _wait_job(client, first["id"], "completed")
    _wait_depth(state, MEMORY.name, 0)
    assert [m["memory"] for m in _memories(client, "u-idem")] == ["Drinks oat milk"] and len(fake.requests) == 1
    replay = client.post("/memories", json={"messages": "I drink oat milk.", "user_id": "u-idem"}, headers=headers)
    assert replay.status_code == 202 and replay.json()["id"] == first["id"]
    assert len(_rows("u-idem")["jobs"]) == 1
