"""The API when deployed (bucket and ingestion queue set), over real HTTP with the official SDK: uploads are kept in
S3, large attachments go through the ingestion queue instead of local threads. And the scheduled handlers:
stuck files retried through the queue or failed, orphaned S3 objects removed, the memory lane run and recorded."""

from __future__ import annotations

import dataclasses

import openai
import pytest

from chalicelib.store.db import connect
from tests.events import state
from tests.events.conftest import BUCKET, EMBED_QUEUE, INGEST_QUEUE, REGION


@pytest.fixture()
def api(harness, pipeline_settings, hashing_embedder):
    """The HTTP API on the pipeline settings (attachments over 1 KB go to the queue; no background threads) and an
    SDK client for tenant acme."""
    from chalicelib.api.context import forget_keys
    from chalicelib.store import api_keys
    from engram_cli import server as local_server

    config = dataclasses.replace(pipeline_settings, inline_max_bytes=1024, poll_after_ms=10)
    running = local_server.start(config, host="127.0.0.1", port=0, embedder=hashing_embedder, worker_threads=0)
    with connect(config) as conn:
        key = api_keys.create_key(conn, "acme")[1]
    yield openai.OpenAI(base_url=running.url, api_key=key, max_retries=0, timeout=30,
                        _strict_response_validation=True)
    running.stop()
    forget_keys()


def test_uploads_live_in_s3_and_large_attachments_go_through_the_queue(api, harness, pipeline_settings):
    small = api.files.create(file=("small.txt", b"a small file processed in the request"), purpose="assistants")
    large_bytes = (" ".join(f"queued{i} words" for i in range(800))).encode()
    large = api.files.create(file=("large.txt", large_bytes), purpose="assistants")
    with connect(pipeline_settings) as conn:
        row = conn.execute("SELECT content, content_bucket, content_key FROM files WHERE id = %s",
                           (large.id,)).fetchone()
    assert row == (None, BUCKET, f"files/acme/{large.id}")
    assert harness.s3.get_object(Bucket=BUCKET, Key=row[2])["Body"].read() == large_bytes
    assert api.files.content(large.id).read() == large_bytes

    store = api.vector_stores.create(name="api-queue")
    assert api.vector_stores.files.create(vector_store_id=store.id, file_id=small.id).status == "completed"
    attached = api.vector_stores.files.create(vector_store_id=store.id, file_id=large.id)
    assert attached.status == "in_progress"
    counts = api.vector_stores.retrieve(store.id).file_counts
    assert (counts.in_progress, counts.completed) == (1, 1)
    # The upload's own S3 notification (files/...) is internal: ignored; the ingest.file message does the work.
    deliveries = harness.drain()
    assert any(d.queue == EMBED_QUEUE for d in deliveries) and not [d for d in deliveries if d.failed_ids]
    done = api.vector_stores.files.retrieve(large.id, vector_store_id=store.id)
    assert done.status == "completed"
    counts = api.vector_stores.retrieve(store.id).file_counts
    assert (counts.in_progress, counts.completed, counts.total) == (0, 2, 2)
    hits = api.vector_stores.search(store.id, query="queued17 words")
    assert hits.data and hits.data[0].file_id == large.id

    api.files.delete(large.id)
    with pytest.raises(harness.s3.exceptions.ClientError):
        harness.s3.head_object(Bucket=BUCKET, Key=f"files/acme/{large.id}")
    with pytest.raises(openai.NotFoundError):
        api.vector_stores.files.retrieve(large.id, vector_store_id=store.id)


def _schedule_event() -> dict:
    from engram_cli.local.events import rule_arn, schedule_event

    return schedule_event(rule_arn("engram-dev-housekeeping", REGION), REGION)


def _set_stuck(settings, file_id: str, *, attempts_left: bool) -> None:
    with connect(settings) as conn:
        conn.execute("""UPDATE vector_store_files SET status = 'in_progress', last_error = NULL,
                        attempt_base = attempts - CASE WHEN %s THEN 1 ELSE %s END,
                        lease_expires_at = now() - interval '1 second' WHERE file_id = %s""",
                     (attempts_left, settings.processing_max_attempts, file_id))


def test_housekeeping_retries_stuck_files_through_the_queue_or_fails_them(harness, pipeline_settings):
    import app

    harness.put("acme/stuck/retry.txt", b"a file whose worker died, with attempts left")
    harness.put("acme/stuck/give-up.txt", b"a file whose worker died for the last time")
    harness.drain()
    # A file whose batches are merely queued (a backlog) is left to SQS even when its lease ran out.
    harness.put("acme/stuck/queued.txt", b"staged, batches waiting in the embedding queue")
    harness.deliver(INGEST_QUEUE, harness.receive(INGEST_QUEUE))
    files = state.files(pipeline_settings)
    retry, give_up = files[("acme", "stuck", "retry.txt")], files[("acme", "stuck", "give-up.txt")]
    queued = files[("acme", "stuck", "queued.txt")]
    assert queued["status"] == "in_progress" and harness.depth(EMBED_QUEUE) == 1
    _set_stuck(pipeline_settings, retry["file_id"], attempts_left=True)
    _set_stuck(pipeline_settings, give_up["file_id"], attempts_left=False)
    _set_stuck(pipeline_settings, queued["file_id"], attempts_left=True)
    result = app.housekeeping(_schedule_event(), None)
    assert result["retry_stalled_files"] == {"status": "finished", "counts": {"retried_files": 1}}
    assert result["settle_files"] == {"status": "finished", "counts": {"failed_files": 1}}
    assert harness.depth(INGEST_QUEUE) == 1
    harness.drain()
    assert state.files(pipeline_settings)[("acme", "stuck", "queued.txt")]["status"] == "completed"
    assert state.files(pipeline_settings)[("acme", "stuck", "queued.txt")]["attempts"] == queued["attempts"]
    files = state.files(pipeline_settings)
    assert files[("acme", "stuck", "retry.txt")]["status"] == "completed"
    assert files[("acme", "stuck", "retry.txt")]["attempts"] == retry["attempts"] + 1
    assert files[("acme", "stuck", "give-up.txt")]["status"] == "failed"
    assert files[("acme", "stuck", "give-up.txt")]["last_error"]["code"] == "server_error"
    state.check_invariants(pipeline_settings)


def test_orphaned_objects_are_removed_and_referenced_ones_kept(harness, pipeline_settings):
    from chalicelib import deps
    from chalicelib.events import orphans
    from chalicelib.store import files as file_rows
    from chalicelib.store.vector_stores import ensure_tenant

    with connect(pipeline_settings) as conn:
        ensure_tenant(conn, "acme")
        kept = file_rows.create_file(conn, "acme", filename="kept.txt", data=b"still referenced",
                                     blobs=file_rows.content_blobs(deps.blob_store(pipeline_settings)))
    harness.put("files/acme/file-00000000000000000000orphan", b"its row is gone")
    harness.put("acme/uploads/upload_gone/part_gone", b"its upload is gone")
    harness.put("acme/uploads/notes.txt", b"a drop into a store named uploads: the user's")
    harness.put("acme/docs/dropped.txt", b"the user's")
    with connect(pipeline_settings) as conn:
        assert orphans.sweep(conn, pipeline_settings, grace_s=3600) == 0  # too young
        assert orphans.sweep(conn, pipeline_settings, grace_s=-1) == 2
    left = {o["Key"] for o in harness.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert left == {f"files/acme/{kept.id}", "acme/uploads/notes.txt", "acme/docs/dropped.txt"}


def test_the_memory_lane_runs_its_jobs_once_per_cadence_and_records_them(harness, pipeline_settings):
    import app

    first = app.memory_jobs(_schedule_event(), None)
    assert first["summarize_conversations"] == {"status": "finished", "counts": {"summaries": 0}}
    # A second tick within the cadence finds nothing due: the job is skipped, not run twice.
    assert app.memory_jobs(_schedule_event(), None)["summarize_conversations"]["status"] == "skipped"
    with connect(pipeline_settings) as conn:
        runs = conn.execute("SELECT status, counts, finished_at IS NOT NULL FROM job_runs "
                            "WHERE job = 'summarize_conversations'").fetchall()
    assert runs == [("finished", {"summaries": 0}, True)]


# Top-level packages of the parsers' dependencies (infra/build.py PARSER_REQUIREMENTS and what they pull in) and
# Engram's format modules: what the deployed API function does not have.
PARSER_MODULES = ("pypdf", "pdfminer", "docx", "lxml", "bs4", "bidi", "cryptography", "charset_normalizer",
                  "chalicelib.ingest.parse.")


def _without_parsers(mp: pytest.MonkeyPatch) -> None:
    """Make every import of the parsers' modules fail in this process, as in the API function's layers."""
    import sys

    for name in [*PARSER_MODULES, *sys.modules]:
        if name.startswith(PARSER_MODULES) and name != "chalicelib.ingest.parse.limits":
            mp.setitem(sys.modules, name.rstrip("."), None)


def test_with_inline_ingest_off_the_api_never_parses(harness, pipeline_settings, hashing_embedder):
    from chalicelib.api.context import forget_keys
    from chalicelib.store import api_keys
    from engram_cli import server as local_server

    config = dataclasses.replace(pipeline_settings, inline_ingest=False, poll_after_ms=10)
    running = local_server.start(config, host="127.0.0.1", port=0, embedder=hashing_embedder, worker_threads=0)
    try:
        with connect(config) as conn:
            key = api_keys.create_key(conn, "acme")[1]
        api = openai.OpenAI(base_url=running.url, api_key=key, max_retries=0, timeout=30)
        text = "Tiny tidal notes.\n\nThe second paragraph about the moon."
        with pytest.MonkeyPatch.context() as mp:
            _without_parsers(mp)
            small = api.files.create(file=("tiny.txt", text.encode()), purpose="assistants")
            store = api.vector_stores.create(name="never-parses")
            attached = api.vector_stores.files.create(vector_store_id=store.id, file_id=small.id)
            assert attached.status == "in_progress"  # a tiny file too: it goes through the queue
        deliveries = harness.drain()  # the ingest consumer parses
        assert deliveries and not [d for d in deliveries if d.failed_ids]
        with pytest.MonkeyPatch.context() as mp:
            _without_parsers(mp)
            done = api.vector_stores.files.retrieve(small.id, vector_store_id=store.id)
            assert done.status == "completed"
            page = api.vector_stores.files.content(small.id, vector_store_id=store.id)
            assert [item.text for item in page.data] == [text]  # from the chunks, not parsed again
    finally:
        running.stop()
        forget_keys()
