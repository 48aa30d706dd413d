"""File batches through the official SDK over real HTTP (OPENAI-COMPAT.md §3, §5): upload_and_poll, per-file
attributes, request validation, all-or-nothing creation, list_files, cancel, and counts that always equal the
per-file statuses."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

POLL_DEADLINE_S = 30.0
LARGE_BYTES = 100 * 1024  # above the fixture's 64 KiB inline threshold: processed by the background worker
STATUSES = ("in_progress", "completed", "failed", "cancelled")


def within(seconds: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` run in a daemon thread, failing the test after ``seconds`` (the SDK's batch poll has
    no timeout, so a stuck ``in_progress`` must not hang the suite)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__qualname__', fn)} did not return within {seconds:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def wait_until(predicate: Callable[[], Any], seconds: float = POLL_DEADLINE_S, interval_s: float = 0.05) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {seconds:.0f} s")
        time.sleep(interval_s)


def large_text(word: str) -> bytes:
    paragraph = (f"The {word} appears in this paragraph about distributed indexing, write-ahead logs and "
                 "approximate nearest neighbour graphs that make retrieval fast.\n\n")
    return (paragraph * (LARGE_BYTES // len(paragraph) + 1)).encode()


def upload(client: openai.OpenAI, name: str, data: bytes) -> str:
    return client.files.create(file=(name, data), purpose="assistants").id


def listed_counts(client: openai.OpenAI, store_id: str) -> dict[str, int]:
    """File counts as the per-file statuses report them (auto-paginating ``files.list`` per status)."""
    counts = {s: len(list(client.vector_stores.files.list(vector_store_id=store_id, filter=s, limit=2)))
              for s in STATUSES}
    counts["total"] = len(list(client.vector_stores.files.list(vector_store_id=store_id, limit=2)))
    return counts


def assert_store_counts_consistent(client: openai.OpenAI, store_id: str) -> dict[str, int]:
    reported = client.vector_stores.retrieve(store_id).file_counts.model_dump()
    assert reported == listed_counts(client, store_id)
    assert reported["total"] == sum(reported[s] for s in STATUSES)
    return reported


def test_upload_and_poll(client):
    store = client.vector_stores.create(name="batch-upload")
    files = [(f"doc{i}.txt", f"Document {i} is about the {word}.".encode())
             for i, word in enumerate(["pelican", "cormorant", "albatross"])]
    batch = within(POLL_DEADLINE_S, client.vector_stores.file_batches.upload_and_poll, store.id, files=files)
    assert batch.id.startswith("vsfb_") and batch.object == "vector_store.files_batch"
    assert batch.vector_store_id == store.id and batch.status == "completed"
    assert batch.file_counts.model_dump() == {"in_progress": 0, "completed": 3, "failed": 0, "cancelled": 0,
                                              "total": 3}
    again = client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
    assert again.status == "completed" and again.file_counts == batch.file_counts
    members = list(client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id))
    assert len(members) == 3 and all(f.status == "completed" for f in members)
    hits = client.vector_stores.search(store.id, query="albatross").data
    assert hits and hits[0].filename == "doc2.txt"
    assert assert_store_counts_consistent(client, store.id)["completed"] == 3


def test_create_returns_completed_for_small_files(client):
    store = client.vector_stores.create(name="batch-inline")
    ids = [upload(client, f"s{i}.txt", f"small file {i}".encode()) for i in range(2)]
    raw = client.vector_stores.file_batches.with_raw_response.create(store.id, file_ids=ids)
    batch = raw.parse()
    assert batch.status == "completed" and batch.file_counts.completed == 2
    assert "openai-poll-after-ms" not in raw.headers


def test_per_file_attributes(client):
    store = client.vector_stores.create(name="batch-attributes")
    a = upload(client, "a.txt", b"Granite is an igneous rock.")
    b = upload(client, "b.txt", b"Limestone is a sedimentary rock.")
    batch = within(POLL_DEADLINE_S, client.vector_stores.file_batches.create_and_poll, store.id,
                   files=[{"file_id": a, "attributes": {"kind": "igneous", "hardness": 6}},
                          {"file_id": b, "attributes": {"kind": "sedimentary", "hardness": 3},
                           "chunking_strategy": {"type": "static",
                                                 "static": {"max_chunk_size_tokens": 200,
                                                            "chunk_overlap_tokens": 100}}}],
                   # top-level values are ignored when files= is used
                   attributes={"kind": "ignored"})
    assert batch.file_counts.completed == 2
    got_a = client.vector_stores.files.retrieve(a, vector_store_id=store.id)
    got_b = client.vector_stores.files.retrieve(b, vector_store_id=store.id)
    assert got_a.attributes == {"kind": "igneous", "hardness": 6}
    assert got_b.attributes == {"kind": "sedimentary", "hardness": 3}
    assert got_b.chunking_strategy.model_dump() == {
        "type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 100}}
    hits = client.vector_stores.search(store.id, query="rock",
                                       filters={"type": "gt", "key": "hardness", "value": 5}).data
    assert {h.file_id for h in hits} == {a}
    # file_ids= applies the top-level attributes to every file.
    c = upload(client, "c.txt", b"Marble is a metamorphic rock.")
    d = upload(client, "d.txt", b"Slate is a metamorphic rock too.")
    within(POLL_DEADLINE_S, client.vector_stores.file_batches.create_and_poll, store.id, file_ids=[c, d],
           attributes={"kind": "metamorphic"})
    for file_id in (c, d):
        assert client.vector_stores.files.retrieve(file_id, vector_store_id=store.id).attributes == {
            "kind": "metamorphic"}


def test_file_ids_and_files_are_mutually_exclusive(client):
    store = client.vector_stores.create(name="batch-exclusive")
    file_id = upload(client, "x.txt", b"text")
    with pytest.raises(openai.BadRequestError):
        client.vector_stores.file_batches.create(store.id, file_ids=[file_id], files=[{"file_id": file_id}])
    with pytest.raises(openai.BadRequestError):
        client.vector_stores.file_batches.create(store.id)
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.create(store.id, file_ids=[])
    assert info.value.param == "file_ids"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.create(store.id, file_ids=[file_id, file_id])
    assert info.value.param == "file_ids"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.create(store.id, file_ids=[file_id, "abc"])
    assert info.value.param == "file_ids[1]"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.create(
            store.id, files=[{"file_id": file_id, "chunking_strategy": {"type": "static", "static": {
                "max_chunk_size_tokens": 100, "chunk_overlap_tokens": 90}}}])
    assert info.value.param and info.value.param.startswith("files[0].chunking_strategy")
    assert client.vector_stores.retrieve(store.id).file_counts.total == 0


def test_unknown_file_attaches_nothing(client, api_settings):
    from chalicelib.store.db import connect

    store = client.vector_stores.create(name="batch-missing")
    good = upload(client, "good.txt", b"good file")
    client.vector_stores.files.create(vector_store_id=store.id, file_id=good)
    before = client.vector_stores.retrieve(store.id).file_counts
    fresh = upload(client, "fresh.txt", b"fresh file")
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.file_batches.create(store.id, file_ids=[fresh, "file-" + "0" * 24])
    assert client.vector_stores.retrieve(store.id).file_counts == before
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(fresh, vector_store_id=store.id)
    with connect(api_settings) as conn:
        (batches,) = conn.execute("SELECT count(*) FROM file_batches WHERE vector_store_id = %s",
                                  (store.id,)).fetchone()
    assert batches == 0


def test_bad_and_unknown_batch_ids(client, make_client):
    store = client.vector_stores.create(name="batch-ids")
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.retrieve("non_existent_batch_id", vector_store_id=store.id)
    assert info.value.param == "batch_id"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.file_batches.retrieve("vsfb_" + "0" * 24, vector_store_id=store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.file_batches.cancel("vsfb_" + "0" * 24, vector_store_id=store.id)
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.create("abc123", file_ids=["file-" + "0" * 24])
    assert info.value.param == "vector_store_id"
    # Another tenant's batch is invisible.
    batch = client.vector_stores.file_batches.create(store.id, file_ids=[upload(client, "t.txt", b"tenant")])
    other = make_client("initech")
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.file_batches.create(store.id, file_ids=[upload(other, "o.txt", b"theirs")])


def test_list_files_pagination_and_filter(client):
    store = client.vector_stores.create(name="batch-list")
    good = [upload(client, f"ok{i}.txt", f"readable file number {i}".encode()) for i in range(5)]
    bad = [upload(client, f"bad{i}.bin", b"\x00\x01binary") for i in range(2)]
    outside = upload(client, "outside.txt", b"not in the batch")
    client.vector_stores.files.create(vector_store_id=store.id, file_id=outside)
    batch = within(POLL_DEADLINE_S, client.vector_stores.file_batches.create_and_poll, store.id,
                   file_ids=good + bad)
    assert batch.file_counts.model_dump() == {"in_progress": 0, "completed": 5, "failed": 2, "cancelled": 0,
                                              "total": 7}
    assert batch.status == "completed"
    page = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, limit=3, order="asc")
    assert [f.id for f in page.data] == good[:3] and page.has_more is True
    assert page.data[-1].id == good[2]
    second = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, limit=3, order="asc",
                                                          after=page.data[-1].id)
    assert [f.id for f in second.data] == good[3:] + bad[:1]
    everything = [f.id for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id,
                                                                             limit=2, order="asc")]
    assert everything == good + bad and outside not in everything
    desc = [f.id for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, limit=4)]
    assert desc == (good + bad)[::-1]
    failed = list(client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, filter="failed"))
    assert [f.id for f in failed] == bad[::-1] and all(f.last_error is not None for f in failed)
    completed = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id,
                                                             filter="completed", limit=100)
    assert {f.id for f in completed.data} == set(good) and completed.has_more is False
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id, limit=101)
    assert info.value.param == "limit"
    assert_store_counts_consistent(client, store.id)


def test_batch_of_large_files_completes_in_the_background(client):
    store = client.vector_stores.create(name="batch-large")
    ids = [upload(client, f"large{i}.txt", large_text(word)) for i, word in enumerate(["okapi", "tapir"])]
    raw = client.vector_stores.file_batches.with_raw_response.create(store.id, file_ids=ids)
    created = raw.parse()
    assert created.status == "in_progress" and created.file_counts.total == 2
    assert raw.headers.get("openai-poll-after-ms") is not None
    done = within(POLL_DEADLINE_S, client.vector_stores.file_batches.poll, created.id, vector_store_id=store.id)
    assert done.status == "completed" and done.file_counts.completed == 2
    assert {h.file_id for h in client.vector_stores.search(store.id, query="tapir", max_num_results=50).data} == {ids[1]}
    assert_store_counts_consistent(client, store.id)


def test_cancelling_a_finished_batch_returns_it_unchanged(client):
    store = client.vector_stores.create(name="batch-done")
    ids = [upload(client, f"d{i}.txt", b"small finished file about otters") for i in range(2)]
    batch = client.vector_stores.file_batches.create(store.id, file_ids=ids)
    assert batch.status == "completed"
    again = client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert again.status == "completed" and again.file_counts.completed == 2 and again.file_counts.cancelled == 0
    assert client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).status == "completed"


def test_cancel_a_batch_of_large_files(client):
    store = client.vector_stores.create(name="batch-cancel")
    words = ["narwhal", "axolotl", "pangolin", "quetzal"]
    ids = [upload(client, f"c{i}.txt", large_text(word)) for i, word in enumerate(words)]
    batch = client.vector_stores.file_batches.create(store.id, file_ids=ids)
    assert batch.status == "in_progress"
    cancelled = client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert cancelled.id == batch.id and cancelled.status == "cancelled"
    assert cancelled.file_counts.total == 4
    # Cancelling again is harmless.
    assert client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id).status == "cancelled"
    settled = wait_until(lambda: (b := client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id))
                         .file_counts.in_progress == 0 and b)
    assert settled.status == "cancelled"
    counts = settled.file_counts
    assert counts.cancelled >= 1 and counts.failed == 0
    assert counts.completed + counts.cancelled == counts.total == 4
    # The SDK's poll stops on in_progress == 0.
    assert within(POLL_DEADLINE_S, client.vector_stores.file_batches.poll, batch.id,
                  vector_store_id=store.id).status == "cancelled"
    # Give a worker that held a lease when the batch was cancelled time to finish (its write must be refused).
    time.sleep(0.5)
    statuses = {f.id: f for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)}
    assert len(statuses) == 4
    for file_id, word in zip(ids, words):
        hit_ids = {h.file_id for h in client.vector_stores.search(store.id, query=word, max_num_results=50).data}
        if statuses[file_id].status == "cancelled":
            assert file_id not in hit_ids, f"cancelled {word} file still has chunks"
            assert statuses[file_id].usage_bytes == 0 and statuses[file_id].last_error is None
        else:
            assert statuses[file_id].status == "completed" and file_id in hit_ids
    final = client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id).file_counts
    assert final == counts
    cancelled_ids = [f.id for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id,
                                                                                filter="cancelled")]
    assert len(cancelled_ids) == counts.cancelled
    reported = assert_store_counts_consistent(client, store.id)
    assert reported["cancelled"] == counts.cancelled and reported["in_progress"] == 0
    assert client.vector_stores.retrieve(store.id).status == "completed"
    # A cancelled file can be attached again and then completes.
    if cancelled_ids:
        again = client.vector_stores.files.create_and_poll(cancelled_ids[0], vector_store_id=store.id,
                                                           max_wait_seconds=POLL_DEADLINE_S)
        assert again.status == "completed"


def test_cancel_a_completed_batch_changes_nothing(client):
    store = client.vector_stores.create(name="batch-cancel-done")
    batch = client.vector_stores.file_batches.create(store.id, file_ids=[upload(client, "z.txt", b"zebra stripes")])
    assert batch.status == "completed"
    cancelled = client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert cancelled.file_counts.completed == 1 and cancelled.file_counts.cancelled == 0
    hits = client.vector_stores.search(store.id, query="zebra").data
    assert hits and hits[0].file_id == batch_file(client, store.id, batch.id)


def batch_file(client: openai.OpenAI, store_id: str, batch_id: str) -> str:
    (only,) = list(client.vector_stores.file_batches.list_files(batch_id, vector_store_id=store_id))
    return only.id


def test_store_counts_follow_the_files_through_a_mixed_history(client):
    store = client.vector_stores.create(name="batch-history")
    small = [upload(client, f"h{i}.txt", f"history file {i}".encode()) for i in range(3)]
    broken = upload(client, "h.pdf", b"%PDF-1.4 broken")
    within(POLL_DEADLINE_S, client.vector_stores.file_batches.create_and_poll, store.id, file_ids=small + [broken])
    assert_store_counts_consistent(client, store.id)
    big = upload(client, "h-big.txt", large_text("ibex"))
    batch = client.vector_stores.file_batches.create(store.id, file_ids=[big])
    client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    wait_until(lambda: client.vector_stores.retrieve(store.id).file_counts.in_progress == 0)
    assert_store_counts_consistent(client, store.id)
    client.vector_stores.files.delete(small[0], vector_store_id=store.id)
    reported = assert_store_counts_consistent(client, store.id)
    assert reported["total"] == 4 and reported["failed"] == 1
