"""Vector store files through the official SDK over real HTTP (OPENAI-COMPAT.md §3, §5, §7): inline and background
processing, attributes, status filters, content, detaching, failures, chunking strategies and id/tenant checks."""

from __future__ import annotations

import os
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


def within(seconds: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` run in a daemon thread, failing the test after ``seconds`` (SDK polls never time
    out on their own, so a stuck ``in_progress`` must not hang the suite)."""
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


def large_text(word: str) -> bytes:
    """A text file of more than ``LARGE_BYTES`` bytes whose every paragraph mentions ``word``."""
    paragraph = (f"The {word} appears in this paragraph about distributed indexing, write-ahead logs and "
                 "approximate nearest neighbour graphs that make retrieval fast.\n\n")
    return (paragraph * (LARGE_BYTES // len(paragraph) + 1)).encode()


def upload(client: openai.OpenAI, name: str, data: bytes) -> str:
    return client.files.create(file=(name, data), purpose="assistants").id


def search_file_ids(client: openai.OpenAI, store_id: str, query: str, **kwargs: Any) -> set[str]:
    return {hit.file_id for hit in client.vector_stores.search(store_id, query=query, max_num_results=50, **kwargs).data}


def counts(client: openai.OpenAI, store_id: str) -> dict[str, int]:
    return client.vector_stores.retrieve(store_id).file_counts.model_dump()


def test_small_file_completes_inside_the_request(client):
    store = client.vector_stores.create(name="inline")
    first = client.vector_stores.files.create(vector_store_id=store.id,
                                              file_id=upload(client, "a.txt", b"Kestrels hover over meadows."))
    assert first.status == "completed" and first.last_error is None
    assert first.object == "vector_store.file" and first.vector_store_id == store.id
    assert first.usage_bytes > 0
    second = within(POLL_DEADLINE_S, client.vector_stores.files.upload_and_poll, vector_store_id=store.id,
                    file=("b.md", b"# Osprey\n\nOspreys dive for fish in shallow water."))
    assert second.status == "completed" and second.usage_bytes > 0
    again = client.vector_stores.files.retrieve(first.id, vector_store_id=store.id)
    assert again.status == "completed" and again.usage_bytes == first.usage_bytes
    retrieved = client.vector_stores.retrieve(store.id)
    assert retrieved.usage_bytes == first.usage_bytes + second.usage_bytes
    assert retrieved.status == "completed"
    assert retrieved.file_counts.completed == 2 and retrieved.file_counts.total == 2
    # The default strategy is reported resolved, never as "auto".
    assert first.chunking_strategy is not None and first.chunking_strategy.type == "static"


def test_large_file_goes_to_the_background_worker(client, api_settings):
    store = client.vector_stores.create(name="background")
    file_id = upload(client, "big.txt", large_text("capybara"))
    raw = client.vector_stores.files.with_raw_response.create(vector_store_id=store.id, file_id=file_id)
    created = raw.parse()
    assert created.status == "in_progress" and created.id == file_id
    assert raw.headers.get("openai-poll-after-ms") == str(api_settings.poll_after_ms)
    done = client.vector_stores.files.poll(file_id, vector_store_id=store.id, max_wait_seconds=POLL_DEADLINE_S)
    assert done.status == "completed" and done.usage_bytes > 0
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 1
    assert file_id in search_file_ids(client, store.id, "capybara")
    # A completed object carries no polling header.
    assert "openai-poll-after-ms" not in client.vector_stores.files.with_raw_response.retrieve(
        file_id, vector_store_id=store.id).headers


def test_create_and_poll_large_file(client):
    store = client.vector_stores.create(name="create-and-poll")
    file_id = upload(client, "big2.txt", large_text("wombat"))
    done = within(POLL_DEADLINE_S, client.vector_stores.files.create_and_poll, file_id, vector_store_id=store.id,
                  attributes={"size": "large"}, max_wait_seconds=POLL_DEADLINE_S)
    assert done.status == "completed" and done.attributes == {"size": "large"}
    hits = client.vector_stores.search(store.id, query="wombat").data
    assert hits and all(h.file_id == file_id and h.attributes == {"size": "large"} for h in hits)


def test_attributes_round_trip(client):
    store = client.vector_stores.create(name="attributes")
    attributes = {"author": "ada", "year": 1843, "score": 0.5, "draft": False}
    file_id = upload(client, "notes.txt", b"Analytical engine notes on Bernoulli numbers.")
    created = client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id, attributes=attributes)
    assert created.attributes == attributes
    assert client.vector_stores.files.retrieve(file_id, vector_store_id=store.id).attributes == attributes
    listed = client.vector_stores.files.list(vector_store_id=store.id)
    assert [f.attributes for f in listed.data] == [attributes]
    hits = client.vector_stores.search(store.id, query="Bernoulli numbers").data
    assert hits and hits[0].file_id == file_id and hits[0].attributes == attributes
    assert hits[0].filename == "notes.txt"


def test_update_attributes_changes_filters_at_once(client):
    store = client.vector_stores.create(name="update")
    one = client.vector_stores.files.create(vector_store_id=store.id, attributes={"team": "red"},
                                            file_id=upload(client, "one.txt", b"Quarterly roadmap for red team."))
    two = client.vector_stores.files.create(vector_store_id=store.id, attributes={"team": "blue"},
                                            file_id=upload(client, "two.txt", b"Quarterly roadmap for blue team."))
    red = {"type": "eq", "key": "team", "value": "red"}
    assert search_file_ids(client, store.id, "quarterly roadmap", filters=red) == {one.id}
    updated = client.vector_stores.files.update(two.id, vector_store_id=store.id, attributes={"team": "red"})
    assert updated.attributes == {"team": "red"} and updated.status == "completed"
    assert search_file_ids(client, store.id, "quarterly roadmap", filters=red) == {one.id, two.id}
    hits = client.vector_stores.search(store.id, query="blue team", filters=red).data
    assert {h.file_id: h.attributes for h in hits}[two.id] == {"team": "red"}
    cleared = client.vector_stores.files.update(one.id, vector_store_id=store.id, attributes=None)
    assert not cleared.attributes
    assert search_file_ids(client, store.id, "quarterly roadmap", filters=red) == {two.id}


def test_update_while_processing_reaches_the_chunks(client):
    """An update that lands while the background worker processes the file must not be lost on its chunks."""
    store = client.vector_stores.create(name="update-in-progress")
    for i, delay_s in enumerate((0.0, 0.05, 0.1)):
        file_id = upload(client, f"u{i}.txt", large_text(f"marmot{i}"))
        created = client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id,
                                                    attributes={"v": "old"})
        assert created.status == "in_progress"
        time.sleep(delay_s)  # land the update before, during or after the worker reads the file
        client.vector_stores.files.update(file_id, vector_store_id=store.id, attributes={"v": "new"})
        done = client.vector_stores.files.poll(file_id, vector_store_id=store.id, max_wait_seconds=POLL_DEADLINE_S)
        assert done.status == "completed" and done.attributes == {"v": "new"}
        hits = [h for h in client.vector_stores.search(store.id, query=f"marmot{i}", max_num_results=50).data
                if h.file_id == file_id]
        assert hits and all(h.attributes == {"v": "new"} for h in hits)
        new = {"type": "eq", "key": "v", "value": "new"}
        assert file_id in search_file_ids(client, store.id, f"marmot{i}", filters=new)


def test_list_with_status_filter(client):
    store = client.vector_stores.create(name="list-filter")
    good = client.vector_stores.files.create(vector_store_id=store.id,
                                             file_id=upload(client, "good.txt", b"Herons stand in the reeds."))
    bad = client.vector_stores.files.create(vector_store_id=store.id,
                                            file_id=upload(client, "bad.bin", os.urandom(512)))
    assert good.status == "completed" and bad.status == "failed"
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, filter="completed")] == [good.id]
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, filter="failed")] == [bad.id]
    assert list(client.vector_stores.files.list(vector_store_id=store.id, filter="in_progress")) == []
    assert {f.id for f in client.vector_stores.files.list(vector_store_id=store.id)} == {good.id, bad.id}
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.list(vector_store_id=store.id, filter="done")  # type: ignore[arg-type]
    assert info.value.param == "filter"


def test_content_of_a_small_text_file(client):
    text = "Line one about tides.\n\nLine two about the moon."
    store = client.vector_stores.create(name="content")
    attached = client.vector_stores.files.create(vector_store_id=store.id,
                                                 file_id=upload(client, "tides.txt", text.encode()))
    page = client.vector_stores.files.content(attached.id, vector_store_id=store.id)
    assert page.object == "vector_store.file_content.page" and page.has_more is False
    assert len(page.data) == 1 and page.data[0].type == "text" and page.data[0].text == text


@pytest.mark.parametrize("overlap", [0, 50])
def test_content_of_a_many_chunk_file_is_its_text(client, overlap):
    # Put back together from the chunks (overlapping or not), not parsed again: the separators between
    # non-overlapping chunks are the paragraph break or the space between sentences, so the text comes back whole.
    paragraphs = [" ".join(f"Paragraph {p} sentence {s} on harbour{p * 10 + s} and tide{s}." for s in range(12))
                  for p in range(6)]
    text = "\n\n".join(paragraphs)
    store = client.vector_stores.create(name=f"content-{overlap}")
    strategy = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": overlap}}
    attached = client.vector_stores.files.create(vector_store_id=store.id, chunking_strategy=strategy,
                                                 file_id=upload(client, "many.txt", text.encode()))
    assert attached.status == "completed"
    page = client.vector_stores.files.content(attached.id, vector_store_id=store.id)
    assert [item.text for item in page.data] == [text]


def test_delete_detaches_but_keeps_the_file(client):
    store = client.vector_stores.create(name="delete")
    keep = client.vector_stores.files.create(vector_store_id=store.id,
                                             file_id=upload(client, "keep.txt", b"Lighthouses guide ships at night."))
    gone = client.vector_stores.files.create(
        vector_store_id=store.id, file_id=upload(client, "gone.txt", b"Platypus eggs hatch in burrows."))
    assert search_file_ids(client, store.id, "platypus eggs") >= {gone.id}
    before = client.vector_stores.retrieve(store.id)
    deleted = client.vector_stores.files.delete(gone.id, vector_store_id=store.id)
    assert deleted.id == gone.id and deleted.deleted is True and deleted.object == "vector_store.file.deleted"
    assert client.files.retrieve(gone.id).id == gone.id  # the File itself survives
    assert gone.id not in search_file_ids(client, store.id, "platypus eggs")
    after = client.vector_stores.retrieve(store.id)
    assert after.file_counts.total == before.file_counts.total - 1 == 1
    assert after.file_counts.completed == 1
    assert after.usage_bytes == keep.usage_bytes
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(gone.id, vector_store_id=store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.delete(gone.id, vector_store_id=store.id)
    # It can be attached again.
    again = client.vector_stores.files.create(vector_store_id=store.id, file_id=gone.id)
    assert again.status == "completed" and gone.id in search_file_ids(client, store.id, "platypus eggs")


@pytest.mark.parametrize("name,data,codes", [
    ("x.bin", os.urandom(2048), {"unsupported_file"}),
    ("broken.pdf", b"%PDF-1.7\n" + os.urandom(1024), {"invalid_file"}),
    ("binary.txt", os.urandom(4096), {"invalid_file"}),
])
def test_unreadable_files_fail_with_last_error(client, name, data, codes):
    store = client.vector_stores.create(name=f"fail-{name}")
    attached = within(POLL_DEADLINE_S, client.vector_stores.files.upload_and_poll, vector_store_id=store.id,
                      file=(name, data), max_wait_seconds=POLL_DEADLINE_S)
    assert attached.status == "failed"
    assert attached.last_error is not None and attached.last_error.code in codes and attached.last_error.message
    assert attached.usage_bytes == 0
    retrieved = client.vector_stores.retrieve(store.id)
    assert retrieved.file_counts.failed == 1 and retrieved.file_counts.total == 1 and retrieved.usage_bytes == 0
    assert client.vector_stores.files.content(attached.id, vector_store_id=store.id).data == []


def test_large_unreadable_file_fails_in_the_background(client):
    store = client.vector_stores.create(name="fail-background")
    file_id = upload(client, "big.bin", os.urandom(LARGE_BYTES))
    created = client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id)
    # Queued, not processed inline; a background worker may already have failed it (no parse needed) by the time
    # the answer is read.
    assert created.status in ("in_progress", "failed")
    done = client.vector_stores.files.poll(file_id, vector_store_id=store.id, max_wait_seconds=POLL_DEADLINE_S)
    assert done.status == "failed" and done.last_error is not None
    assert done.last_error.code == "unsupported_file"


def test_static_chunking_strategy_round_trips(client):
    store = client.vector_stores.create(name="chunking")
    strategy = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}}
    text = " ".join(f"sentence {i} mentions the heron." for i in range(200)).encode()
    attached = client.vector_stores.files.create(vector_store_id=store.id, file_id=upload(client, "c.txt", text),
                                                 chunking_strategy=strategy)
    assert attached.status == "completed"
    assert attached.chunking_strategy.model_dump() == strategy
    assert client.vector_stores.files.retrieve(
        attached.id, vector_store_id=store.id).chunking_strategy.model_dump() == strategy
    # Small chunks: a query yields several distinct chunks of the one file.
    hits = client.vector_stores.search(store.id, query="heron sentence", max_num_results=5).data
    assert len(hits) == 5 and len({h.content[0].text for h in hits}) == 5
    auto = client.vector_stores.files.create(vector_store_id=store.id, file_id=upload(client, "d.txt", b"auto"),
                                             chunking_strategy={"type": "auto"})
    assert auto.chunking_strategy.type == "static"


@pytest.mark.parametrize("strategy", [
    {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 51}},
    {"type": "static", "static": {"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}},
    {"type": "static", "static": {"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}},
    {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": -1}},
    {"type": "static"},
    {"type": "semantic"},
])
def test_invalid_chunking_strategy_is_rejected(client, strategy):
    store = client.vector_stores.create(name="bad-chunking")
    file_id = upload(client, "e.txt", b"some text")
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id,
                                          chunking_strategy=strategy)  # type: ignore[arg-type]
    assert info.value.param and info.value.param.startswith("chunking_strategy")
    assert counts(client, store.id)["total"] == 0


def test_overlap_above_half_names_the_field(client):
    store = client.vector_stores.create(name="overlap")
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.create(
            vector_store_id=store.id, file_id=upload(client, "f.txt", b"text"),
            chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 60}})
    assert info.value.param == "chunking_strategy.static.chunk_overlap_tokens"


def test_malformed_ids_are_400(client):
    store = client.vector_stores.create(name="ids")
    file_id = upload(client, "g.txt", b"text")
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.create(vector_store_id=store.id, file_id="abc123")
    assert info.value.param == "file_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.create(vector_store_id="not_a_store", file_id=file_id)
    assert info.value.param == "vector_store_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.retrieve("abc123", vector_store_id=store.id)
    assert info.value.param == "file_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.retrieve(file_id, vector_store_id="abc123")
    assert info.value.param == "vector_store_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.list(vector_store_id="abc123")
    assert info.value.param == "vector_store_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.delete("abc123", vector_store_id=store.id)
    assert info.value.param == "file_id"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.files.update("abc123", vector_store_id=store.id, attributes={})
    assert info.value.param == "file_id"
    # Well-formed but unknown: 404.
    with pytest.raises(openai.NotFoundError) as info:
        client.vector_stores.files.create(vector_store_id=store.id, file_id="file-" + "0" * 24)
    assert info.value.param == "file_id"
    with pytest.raises(openai.NotFoundError) as info:
        client.vector_stores.files.create(vector_store_id="vs_" + "0" * 24, file_id=file_id)
    assert info.value.param == "vector_store_id"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(file_id, vector_store_id=store.id)  # uploaded, never attached
    assert counts(client, store.id)["total"] == 0


def test_invalid_attributes_are_400(client):
    store = client.vector_stores.create(name="bad-attributes")
    file_id = upload(client, "h.txt", b"text")
    for attributes in ({f"k{i}": i for i in range(17)}, {"k": "v" * 513}, {"k" * 65: 1}, {"k": [1, 2]}):
        with pytest.raises(openai.BadRequestError) as info:
            client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id,
                                              attributes=attributes)  # type: ignore[arg-type]
        assert info.value.param and info.value.param.startswith("attributes")
    assert counts(client, store.id)["total"] == 0


def test_another_tenants_file_and_store_are_not_found(client, make_client):
    other = make_client("globex")
    theirs = other.files.create(file=("secret.txt", b"Globex launch codes."), purpose="assistants")
    their_store = other.vector_stores.create(name="theirs")
    other.vector_stores.files.create(vector_store_id=their_store.id, file_id=theirs.id)
    mine = client.vector_stores.create(name="mine")
    with pytest.raises(openai.NotFoundError) as info:
        client.vector_stores.files.create(vector_store_id=mine.id, file_id=theirs.id)
    assert info.value.param == "file_id"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(theirs.id, vector_store_id=their_store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.list(vector_store_id=their_store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.content(theirs.id, vector_store_id=their_store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.delete(theirs.id, vector_store_id=their_store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.update(theirs.id, vector_store_id=their_store.id, attributes={"x": 1})
    assert counts(client, mine.id)["total"] == 0
    # Their attachment is untouched.
    assert other.vector_stores.files.retrieve(theirs.id, vector_store_id=their_store.id).status == "completed"
    assert not other.vector_stores.files.retrieve(theirs.id, vector_store_id=their_store.id).attributes


def test_pagination_over_store_files(client):
    store = client.vector_stores.create(name="paging")
    attached = [client.vector_stores.files.create(vector_store_id=store.id,
                                                  file_id=upload(client, f"p{i}.txt", f"page {i}".encode())).id
                for i in range(5)]
    first = client.vector_stores.files.list(vector_store_id=store.id, limit=2, order="asc")
    assert [f.id for f in first.data] == attached[:2] and first.has_more is True
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, limit=2, order="asc")] == attached
    newest_first = [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, limit=2)]
    assert newest_first == attached[::-1]
