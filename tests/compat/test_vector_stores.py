"""Vector stores through the official SDK (OPENAI-COMPAT.md §2): create/retrieve/update/delete, metadata limits,
chunking strategies reported back, and "a rejected request changes nothing"."""

from __future__ import annotations

import time
import uuid

import httpx
import openai
import pytest

from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

UNKNOWN_FILE_ID = "file-" + "0" * 10 + "B" * 14
UNKNOWN_STORE_ID = "vs_" + "0" * 10 + "C" * 14


def _tenant_client(make_client) -> openai.OpenAI:
    return make_client("vs-" + uuid.uuid4().hex[:10])


def _count(client: openai.OpenAI) -> int:
    return sum(1 for _ in client.vector_stores.list(limit=100))


def _upload(client: openai.OpenAI, name: str, text: str) -> str:
    return client.files.create(file=(name, text.encode()), purpose="assistants").id


def test_create_with_no_fields(client):
    before = int(time.time())
    store = client.vector_stores.create()
    assert store.id.startswith("vs_") and store.object == "vector_store"
    assert isinstance(store.created_at, int) and before - 1 <= store.created_at <= time.time() + 1
    assert store.status == "completed" and store.usage_bytes == 0
    assert store.file_counts.model_dump() == {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0,
                                              "total": 0}
    assert store.metadata == {} and store.expires_at is None and store.expires_after is None
    assert isinstance(store.name, str)
    assert client.vector_stores.retrieve(store.id) == store


def test_create_with_no_body_at_all(server, make_key):
    response = httpx.post(f"{server.url}/vector_stores", headers={"Authorization": f"Bearer {make_key('acme')}"})
    assert response.status_code == 200, response.text
    assert response.json()["object"] == "vector_store"


def test_create_with_name_metadata_and_expiry(client):
    store = client.vector_stores.create(name="docs", metadata={"team": "search", "env": "test"},
                                        expires_after={"anchor": "last_active_at", "days": 1})
    assert store.name == "docs"
    assert store.metadata == {"team": "search", "env": "test"}
    assert store.expires_after is not None
    assert store.expires_after.anchor == "last_active_at" and store.expires_after.days == 1
    assert store.last_active_at is not None and store.expires_at is not None
    assert abs(store.expires_at - (store.last_active_at + 86_400)) <= 1
    assert store.status == "completed"


def test_create_with_files_and_static_chunking(client):
    file_ids = [_upload(client, f"doc{i}.txt", f"Document number {i} talks about topic {i}.") for i in range(3)]
    strategy = {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50}}
    store = client.vector_stores.create(name="with-files", file_ids=file_ids, chunking_strategy=strategy)
    assert store.file_counts.completed == 3 and store.file_counts.total == 3
    attached = list(client.vector_stores.files.list(vector_store_id=store.id))
    assert sorted(f.id for f in attached) == sorted(file_ids)
    for item in attached:
        assert item.status == "completed" and item.vector_store_id == store.id
        assert item.chunking_strategy is not None and item.chunking_strategy.type == "static"
        assert item.chunking_strategy.static.max_chunk_size_tokens == 200
        assert item.chunking_strategy.static.chunk_overlap_tokens == 50


def test_auto_chunking_comes_back_static(client):
    file_id = _upload(client, "auto.txt", "Auto chunking resolves to a static strategy.")
    store = client.vector_stores.create(file_ids=[file_id], chunking_strategy={"type": "auto"})
    item = client.vector_stores.files.retrieve(file_id, vector_store_id=store.id)
    assert item.chunking_strategy is not None and item.chunking_strategy.type == "static"
    static = item.chunking_strategy.static
    assert static.max_chunk_size_tokens >= 100
    assert 0 <= static.chunk_overlap_tokens <= static.max_chunk_size_tokens // 2
    # No strategy at all behaves like auto.
    default = client.vector_stores.create(file_ids=[file_id])
    assert client.vector_stores.files.retrieve(file_id, vector_store_id=default.id).chunking_strategy.type == "static"


def test_update_name_metadata_and_clear_expiry(client):
    store = client.vector_stores.create(name="before", metadata={"a": "1"},
                                        expires_after={"anchor": "last_active_at", "days": 7})
    renamed = client.vector_stores.update(store.id, name="after")
    assert renamed.name == "after" and renamed.metadata == {"a": "1"}
    assert renamed.expires_after is not None and renamed.expires_after.days == 7
    changed = client.vector_stores.update(store.id, metadata={"b": "2"})
    assert changed.metadata == {"b": "2"} and changed.name == "after"
    cleared = client.vector_stores.update(store.id, expires_after=None)
    assert cleared.expires_after is None and cleared.expires_at is None
    assert cleared.name == "after" and cleared.metadata == {"b": "2"}
    again = client.vector_stores.retrieve(store.id)
    assert again.expires_after is None and again.expires_at is None and again.name == "after"
    extended = client.vector_stores.update(store.id, expires_after={"anchor": "last_active_at", "days": 2})
    assert abs(extended.expires_at - (extended.last_active_at + 2 * 86_400)) <= 1


def test_delete_then_retrieve_is_404(client):
    store = client.vector_stores.create(name="doomed")
    deleted = client.vector_stores.delete(store.id)
    assert deleted.id == store.id and deleted.object == "vector_store.deleted" and deleted.deleted is True
    with pytest.raises(openai.NotFoundError) as exc:
        client.vector_stores.retrieve(store.id)
    assert exc.value.param == "vector_store_id" and exc.value.code == "not_found"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.delete(store.id)
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.update(store.id, name="zombie")


def test_deleting_a_store_keeps_its_files(client):
    file_id = _upload(client, "survivor.txt", "This file outlives its vector store.")
    store = client.vector_stores.create(file_ids=[file_id])
    client.vector_stores.delete(store.id)
    assert client.files.retrieve(file_id).id == file_id


@pytest.mark.parametrize("call", ["retrieve", "delete"])
def test_malformed_store_id_is_400(client, call):
    with pytest.raises(openai.BadRequestError) as exc:
        getattr(client.vector_stores, call)("abc")
    assert exc.value.param == "vector_store_id" and exc.value.code == "invalid_value"
    assert exc.value.body["message"] == "Invalid 'vector_store_id': 'abc'. Expected an ID that begins with 'vs'."


def test_unknown_store_id_is_404(client):
    with pytest.raises(openai.NotFoundError) as exc:
        client.vector_stores.retrieve(UNKNOWN_STORE_ID)
    assert exc.value.param == "vector_store_id"


def test_another_tenants_store_is_404(client, make_client):
    store = client.vector_stores.create(name="private")
    other = _tenant_client(make_client)
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.retrieve(store.id)
    with pytest.raises(openai.NotFoundError):
        other.vector_stores.delete(store.id)
    assert client.vector_stores.retrieve(store.id).name == "private"


@pytest.mark.parametrize("metadata", [
    {f"k{i}": "v" for i in range(17)},
    {"k" * 65: "v"},
    {"": "v"},
    {"k": "v" * 513},
    {"k": 1},
    {"k": None},
], ids=["17-pairs", "65-char-key", "empty-key", "513-char-value", "int-value", "null-value"])
def test_metadata_limits(make_client, metadata):
    client = _tenant_client(make_client)
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(name="meta", metadata=metadata)
    assert exc.value.param is not None and exc.value.param.startswith("metadata")
    store = client.vector_stores.create(name="meta-ok")
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.update(store.id, metadata=metadata)
    assert exc.value.param is not None and exc.value.param.startswith("metadata")
    assert client.vector_stores.retrieve(store.id).metadata == {}
    assert _count(client) == 1


def test_metadata_at_the_limits_is_accepted(client):
    metadata = {f"{i:02d}" + "k" * 62: "v" * 512 for i in range(16)}
    store = client.vector_stores.create(metadata=metadata)
    assert store.metadata == metadata


def test_unknown_body_fields_are_refused(make_client):
    """OpenAI answers 400 ``unknown_parameter`` to a field it does not know (the SDK's ``extra_body`` sends them
    as they are), naming it; nothing is created."""
    client = _tenant_client(make_client)
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(name="extras", extra_body={"embedding_model": "x"})
    assert (exc.value.code, exc.value.param) == ("unknown_parameter", "embedding_model")
    assert exc.value.body["message"] == "Unknown parameter: 'embedding_model'."
    assert _count(client) == 0
    store = client.vector_stores.create(name="plain")
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.update(store.id, name="renamed", extra_body={"expires_after": {
            "anchor": "last_active_at", "days": 2, "hours": 3}})
    assert (exc.value.code, exc.value.param) == ("unknown_parameter", "expires_after.hours")
    assert client.vector_stores.retrieve(store.id).name == "plain"


def test_every_field_the_sdk_sends_is_accepted(make_client):
    client = _tenant_client(make_client)
    good = _upload(client, "sdk.txt", "Every documented field, at once.")
    store = client.vector_stores.create(
        name="documented", description="not echoed", file_ids=[good], metadata={"k": "v"},
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 20}},
        expires_after={"anchor": "last_active_at", "days": 3})
    assert store.name == "documented" and store.metadata == {"k": "v"}
    updated = client.vector_stores.update(store.id, name=None, metadata=None,
                                          expires_after={"anchor": "last_active_at", "days": 4})
    assert updated.expires_after is not None and updated.expires_after.days == 4
    page = client.vector_stores.search(store.id, query=["documented", "field"], max_num_results=3,
                                       rewrite_query=False, ranking_options={"ranker": "none", "score_threshold": 0},
                                       filters={"type": "or", "filters": [{"type": "eq", "key": "k", "value": 1},
                                                                         {"type": "nin", "key": "k", "value": [2]}]})
    assert page.search_query == ["documented", "field"]


@pytest.mark.parametrize("expires_after", [
    {"anchor": "last_active_at", "days": 0},
    {"anchor": "last_active_at", "days": 366},
    {"anchor": "created_at", "days": 1},
])
def test_bad_expires_after_is_400(make_client, expires_after):
    client = _tenant_client(make_client)
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(expires_after=expires_after)
    assert exc.value.param is not None and exc.value.param.startswith("expires_after")
    assert _count(client) == 0


def test_nonexistent_file_id_creates_nothing(make_client):
    client = _tenant_client(make_client)
    good = _upload(client, "good.txt", "A perfectly fine file.")
    client.vector_stores.create(name="existing")
    assert _count(client) == 1
    with pytest.raises(openai.NotFoundError) as exc:
        client.vector_stores.create(name="rejected", file_ids=[good, UNKNOWN_FILE_ID])
    assert exc.value.param == "file_ids[1]"
    assert UNKNOWN_FILE_ID in exc.value.message
    assert _count(client) == 1
    assert [s.name for s in client.vector_stores.list()] == ["existing"]


@pytest.mark.parametrize("body, param", [
    ({"file_ids": ["abc"]}, "file_ids[0]"),
    ({"file_ids": ["file-ok"], "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 50,
                                                                                  "chunk_overlap_tokens": 0}}},
     "chunking_strategy"),
    ({"file_ids": ["file-ok"], "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 200,
                                                                                  "chunk_overlap_tokens": 101}}},
     "chunking_strategy"),
    ({"file_ids": ["file-ok"], "chunking_strategy": {"type": "semantic"}}, "chunking_strategy"),
])
def test_invalid_file_ids_or_strategy_create_nothing(make_client, body, param):
    client = _tenant_client(make_client)
    good = _upload(client, "good.txt", "A perfectly fine file.")
    body = {k: ([good if f == "file-ok" else f for f in v] if k == "file_ids" else v) for k, v in body.items()}
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(**body)
    assert exc.value.param is not None and exc.value.param.startswith(param)
    assert _count(client) == 0
