"""``rewrite_query`` through the official SDK over real HTTP, with the scripted fake chat model as the configured
chat model: the rewritten query is searched and returned as ``search_query``; without a model, or when the model
fails, the query is searched as given."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from chalicelib import deps
from chalicelib.search.rewrite import INSTRUCTION
from tests.fakes.chat_server import FakeChatServer, error, text

DOCS = {
    "ferries.txt": "Ferries leave the harbour every hour for the islands.",
    "bakery.txt": "The bakery sells sourdough loaves and rye bread each morning.",
    "library.txt": "The library lends atlases, novels and old newspapers.",
}
MODEL = "fake-rewriter"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatServer]:
    with FakeChatServer() as server_:
        yield server_


@pytest.fixture(autouse=True)
def _fresh(fake):
    fake.clear()
    yield
    fake.clear()


@pytest.fixture()
def with_model(server, api_settings, fake):
    """The server runs with the fake as ``ENGRAM_CHAT_MODEL`` (no retries) for this test."""
    deps.set_settings(dataclasses.replace(api_settings, chat_base_url=fake.base_url, chat_api_key="sk-test",
                                          chat_model=MODEL, chat_timeout_s=2.0, chat_max_retries=0))
    yield
    deps.set_settings(api_settings)


@pytest.fixture(scope="module")
def store(client):
    store = client.vector_stores.create(name="rewrite")
    ids = {}
    for name, body in DOCS.items():
        file_id = client.files.create(file=(name, body.encode()), purpose="assistants").id
        assert client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id).status == "completed"
        ids[name] = file_id
    return store.id, ids


def test_the_model_rewrites_the_query(client, store, fake, with_model):
    store_id, ids = store
    fake.push(text("sourdough rye bread bakery"))
    page = client.vector_stores.search(store_id, query="where can i get some bred??", rewrite_query=True)
    assert page.search_query == ["sourdough rye bread bakery"]
    assert page.data and page.data[0].file_id == ids["bakery.txt"]
    (request,) = fake.requests
    assert request["model"] == MODEL
    assert request["messages"][0] == {"role": "system", "content": INSTRUCTION}
    assert request["messages"][-1]["content"] == "where can i get some bred??"


def test_each_query_of_a_list_is_rewritten(client, store, fake, with_model):
    store_id, ids = store
    fake.push(text('"harbour ferries to the islands"'), text("Query: library atlases"))
    page = client.vector_stores.search(store_id, query=["boats?", "maps to borrow"], rewrite_query=True)
    assert page.search_query == ["harbour ferries to the islands", "library atlases"]
    assert {ids["ferries.txt"], ids["library.txt"]} <= {h.file_id for h in page.data[:2]}
    assert [r["messages"][-1]["content"] for r in fake.requests] == ["boats?", "maps to borrow"]


def test_a_failed_rewrite_keeps_the_query(client, store, fake, with_model):
    store_id, ids = store
    fake.push(error(500, "model overloaded"))
    page = client.vector_stores.search(store_id, query="sourdough loaves", rewrite_query=True)
    assert page.search_query == ["sourdough loaves"] and page.data[0].file_id == ids["bakery.txt"]
    fake.push(text("   \n  "))  # an empty answer is no query either
    page = client.vector_stores.search(store_id, query="sourdough loaves", rewrite_query=True)
    assert page.search_query == ["sourdough loaves"] and len(fake.requests) == 2


def test_no_rewrite_without_the_flag(client, store, fake, with_model):
    page = client.vector_stores.search(store[0], query="sourdough loaves")
    assert page.search_query == ["sourdough loaves"] and fake.requests == []


def test_without_a_chat_model_the_query_is_kept(client, store, fake):
    page = client.vector_stores.search(store[0], query="sourdough loaves", rewrite_query=True)
    assert page.search_query == ["sourdough loaves"] and fake.requests == []
