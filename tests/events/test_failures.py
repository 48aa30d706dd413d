"""Embedding outages through the real queues: an OpenAI-compatible fake (a real HTTP server) that answers 429/500
for a while recovers through the embedder's retries and SQS redeliveries; one that stays down fails the file with
``last_error`` after the last receive and leaves the messages in the dead-letter queue, and redriving them after
recovery completes the file."""

from __future__ import annotations

import pytest

from chalicelib import deps
from chalicelib.embed.openai_http import OpenAIEmbedder
from tests.conftest import BOTH_BACKENDS
from tests.events import state
from tests.events.conftest import EMBED_DLQ, EMBED_QUEUE, INGEST_DLQ, MAX_RECEIVES
from tests.fakes.embedding_server import FakeEmbeddingServer

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

RETRIES = 2  # the embedder's own retries per call (so one call = 3 HTTP requests)


@pytest.fixture()
def fake(harness):
    """The fake embedding service, and the process's embedder pointed at it (no sleeping between retries)."""
    with FakeEmbeddingServer(dimension=32) as server:
        deps.set_embedder(OpenAIEmbedder(base_url=server.base_url, api_key=None, model="fake-embed", dimensions=32,
                                         max_retries=RETRIES, timeout_s=5, sleep=lambda s: None))
        yield server


def _text(words: int) -> bytes:
    return " ".join(f"token{i} subject{i % 11}" for i in range(words)).encode()


def test_429_and_500_for_a_while_then_recovery(harness, fake, pipeline_settings):
    harness.after_each = lambda: state.check_invariants(pipeline_settings)
    harness.put("acme/flaky/rate-limited.txt", b"one small file embedded in one batch")
    harness.drain()
    files = state.files(pipeline_settings)
    assert files[("acme", "flaky", "rate-limited.txt")]["status"] == "completed"

    fake.fail_next(RETRIES + 3, status=429)  # the first receive exhausts its retries; the second gets through
    harness.put("acme/flaky/throttled.txt", b"a file that meets a rate limit")
    fake_failures = fake.failures
    deliveries = harness.drain()
    assert fake.failures - fake_failures == RETRIES + 3
    assert sum(len(d.failed_ids) for d in deliveries if d.queue == EMBED_QUEUE) == 1
    fake.fail_next(RETRIES + 1 + RETRIES + 1 + 1, status=500)  # two whole receives fail, the third succeeds
    harness.put("acme/flaky/erroring.txt", b"a file that meets server errors")
    harness.drain()
    files = state.files(pipeline_settings)
    for name in ("throttled.txt", "erroring.txt"):
        assert files[("acme", "flaky", name)]["status"] == "completed", name
        assert files[("acme", "flaky", name)]["last_error"] is None
    assert harness.depth(EMBED_DLQ) == harness.depth(INGEST_DLQ) == 0


def test_outage_fails_the_file_then_redrive_completes_it(harness, fake, pipeline_settings):
    harness.after_each = lambda: state.check_invariants(pipeline_settings)
    harness.put("acme/outage/big.txt", _text(1500))  # several embedding batches (4 chunks each)
    fake.go_down(503)
    harness.drain()
    failed = state.files(pipeline_settings)[("acme", "outage", "big.txt")]
    assert failed["status"] == "failed"
    assert failed["last_error"]["code"] == "server_error" and "503" in failed["last_error"]["message"]
    with state.connect(pipeline_settings) as conn:
        batches = conn.execute("SELECT batch_count FROM ingest_jobs WHERE file_id = %s AND status = 'failed'",
                               (failed["file_id"],)).fetchone()[0]
    assert batches > 1
    assert harness.depth(EMBED_DLQ) == batches  # every batch, each after its MAX_RECEIVES receives
    # Once the file failed, the outage's remaining retries stop calling the service (they wait for a redrive).
    assert MAX_RECEIVES * (RETRIES + 1) <= fake.requests < batches * MAX_RECEIVES * (RETRIES + 1)

    fake.come_up()
    assert harness.redrive(EMBED_DLQ, EMBED_QUEUE) == batches
    harness.drain()
    done = state.files(pipeline_settings)[("acme", "outage", "big.txt")]
    assert done["status"] == "completed" and done["last_error"] is None and done["file_id"] == failed["file_id"]
    assert done["chunk_count"] > 4
    assert harness.depth(EMBED_DLQ) == 0
    with state.connect(pipeline_settings) as conn:
        assert conn.execute("SELECT count(*) FROM staged_chunks").fetchone()[0] == 0
