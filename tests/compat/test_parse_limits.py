"""The limits a file can hit while it is parsed are settings, named in the errors they cause, and checked as early
as the file's size allows (issue: a 200 MiB text file uploaded and attached, then failed in ingestion on a
50,000,000-character limit no setting or doc named). Here ``ENGRAM_PARSE_MAX_CHARS`` is 1,000, so a text file of
more than 4,000 bytes is refused at attach, and one of 1,001 to 4,000 ASCII bytes fails in ingestion."""

from __future__ import annotations

import dataclasses

import openai
import pytest

from chalicelib.config import ENV_PARSE_MAX_CHARS, Settings
from chalicelib.ingest.parse import ParseLimits

MAX_CHARS = 1000


@pytest.fixture(scope="module")
def api_settings(settings):
    """The module's settings with a 1,000-character parse limit."""
    return dataclasses.replace(settings, inline_max_bytes=64 * 1024, poll_after_ms=50, parse_max_chars=MAX_CHARS)


def test_every_parse_limit_is_a_setting():
    defaults = ParseLimits()
    configured = ParseLimits.from_settings(dataclasses.replace(Settings(), parse_max_chars=7, parse_max_pages=3,
                                                               max_file_bytes=11))
    assert (configured.max_chars, configured.max_pages, configured.max_bytes) == (7, 3, 11)
    assert ParseLimits.from_settings(Settings()) == defaults


def test_a_file_its_size_refuses_is_refused_at_attach(client):
    store = client.vector_stores.create(name="limits")
    big = client.files.create(file=("big.txt", b"word " * (4 * MAX_CHARS // 5 + 1)), purpose="assistants")
    for attach in (lambda: client.vector_stores.files.create(vector_store_id=store.id, file_id=big.id),
                   lambda: client.vector_stores.file_batches.create(store.id, file_ids=[big.id]),
                   lambda: client.vector_stores.create(name="new", file_ids=[big.id])):
        with pytest.raises(openai.BadRequestError) as caught:
            attach()
        assert caught.value.body["code"] == "file_too_large"
        assert ENV_PARSE_MAX_CHARS in caught.value.message and "file_id" in (caught.value.param or "")
    assert client.vector_stores.files.list(store.id).data == []
    assert [s.name for s in client.vector_stores.list().data] == ["limits"]  # nothing half-written


def test_a_file_over_the_limit_that_its_size_cannot_tell_fails_naming_the_setting(client):
    store = client.vector_stores.create(name="limits-late")
    text = ("a" * 9 + " ") * (2 * MAX_CHARS // 10)  # 2,000 characters in 2,000 bytes: attach cannot tell
    file = client.files.create(file=("long.txt", text.encode()), purpose="assistants")
    attached = client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=file.id)
    assert attached.status == "failed" and attached.last_error is not None
    assert ENV_PARSE_MAX_CHARS in attached.last_error.message
    # the same file as multi-byte text that fits is ingested: the limit counts characters, not bytes
    fits = client.files.create(file=("fits.txt", ("é" * 900).encode()), purpose="assistants")
    assert client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=fits.id).status == \
        "completed"
