"""No attach request holds its client long: with a slow embedder (the fake embedding service taking a scripted time
per text), a 60-file batch well under ``inline_max_bytes`` answers within the inline time budget with
``in_progress`` and completes through the SDK's polling; a small attach still completes inside its request.
The measured rate (:mod:`chalicelib.embed.rate`) is what decides, so the test also checks the meter follows a
model that slows down."""

from __future__ import annotations

import dataclasses
import time

import openai
import pytest

from chalicelib import deps
from chalicelib.embed import rate
from chalicelib.embed.openai_http import OpenAIEmbedder
from tests.fakes.embedding_server import FakeEmbeddingServer

BUDGET_S = 1.0
PER_INPUT_S = 0.05  # 60 one-chunk files: 3 s of embedding, three budgets
FILES = 60


@pytest.fixture(scope="module")
def fake():
    with FakeEmbeddingServer(dimension=32) as server:
        yield server


@pytest.fixture(scope="module")
def slow_client(settings, fake):
    """A server whose embedder is the fake at ``PER_INPUT_S`` per text, budget ``BUDGET_S``, one background
    worker; and an SDK client for it."""
    from chalicelib.api.context import forget_keys
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect
    from engram_cli import server as local_server

    embedder = OpenAIEmbedder(base_url=fake.base_url, api_key=None, model="fake-slow", dimensions=32)
    rate.forget(embedder)
    budget_settings = dataclasses.replace(settings, inline_budget_s=BUDGET_S, poll_after_ms=50)
    running = local_server.start(budget_settings, host="127.0.0.1", port=0, embedder=embedder, worker_threads=1)
    with connect(budget_settings) as conn:
        key = api_keys.create_key(conn, "budget")[1]
    yield openai.OpenAI(base_url=running.url, api_key=key, max_retries=0, timeout=60)
    running.stop()
    forget_keys()
    deps.set_embedder(None)
    deps.set_settings(None)
    fake.delay_per_input_s = 0.0


def _text(i: int) -> bytes:
    return (f"Document {i}. " + " ".join(f"term{i}x{j}" for j in range(120)) + "\n").encode()


def test_a_large_batch_answers_within_the_budget_then_completes_by_polling(slow_client, fake):
    client = slow_client
    fake.delay_per_input_s = PER_INPUT_S
    ids = [client.files.create(file=(f"doc{i}.txt", _text(i)), purpose="assistants").id for i in range(FILES)]
    store = client.vector_stores.create(name="budget-batch")
    started = time.monotonic()
    batch = client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=ids)
    held_s = time.monotonic() - started
    print(f"batch of {FILES} files: request held {held_s:.2f} s (budget {BUDGET_S} s), "
          f"{batch.file_counts.completed} completed inline")
    assert batch.status == "in_progress" and batch.file_counts.in_progress > 0, batch
    # the budget plus one probe call and one file's parse and swap; without the budget it holds ~3 s
    assert held_s < BUDGET_S + 1.0, held_s
    done = client.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=100)
    assert done.status == "completed" and done.file_counts.completed == FILES, done.file_counts


def test_a_small_attach_still_completes_inline(slow_client, fake):
    client = slow_client
    fake.delay_per_input_s = PER_INPUT_S
    upload = client.files.create(file=("small.txt", _text(1000)), purpose="assistants")
    store = client.vector_stores.create(name="budget-small")
    row = client.vector_stores.files.create(vector_store_id=store.id, file_id=upload.id)
    assert row.status == "completed", row


def test_the_meter_follows_a_model_that_slows_down():
    class Probe:
        model = "meter-probe"

    probe = Probe()
    rate.forget(probe)  # type: ignore[arg-type]
    rate.record(probe, 8, 4.0)  # type: ignore[arg-type]  # the first call (loading the model) is not counted
    assert rate.estimate_s(probe, 10) is None  # type: ignore[arg-type]
    for _ in range(10):
        rate.record(probe, 100, 1.0)  # type: ignore[arg-type]
    assert rate.chunks_per_s(probe) == pytest.approx(100.0)  # type: ignore[arg-type]
    for _ in range(10):
        rate.record(probe, 100, 10.0)  # type: ignore[arg-type]  # ten times slower now
    assert rate.chunks_per_s(probe) < 15.0  # type: ignore[arg-type]  # the old rate has all but decayed
    assert rate.estimate_s(probe, 0) == 0.0  # type: ignore[arg-type]
