"""Files API through the official SDK (OPENAI-COMPAT.md §1): shapes, list/retrieve/content/delete, and errors."""

from __future__ import annotations

import time
import uuid

import openai
import pytest

UNKNOWN_FILE_ID = "file-" + "0" * 10 + "A" * 14  # well-formed, never issued


def _tenant_client(make_client) -> openai.OpenAI:
    return make_client("files-" + uuid.uuid4().hex[:10])


def _all_ids(client: openai.OpenAI, **kwargs) -> list[str]:
    return [f.id for f in client.files.list(**kwargs)]


def test_create_returns_a_file_object(client):
    before = int(time.time())
    created = client.files.create(file=("notes.txt", b"hello files"), purpose="assistants")
    assert created.id.startswith("file-")
    assert created.object == "file"
    assert isinstance(created.created_at, int) and before - 1 <= created.created_at <= time.time() + 1
    assert created.bytes == len(b"hello files")
    assert created.filename == "notes.txt"
    assert created.purpose == "assistants"
    assert created.status == "processed"
    assert created.expires_at is None


def test_create_with_expires_after_sets_expires_at(client):
    created = client.files.create(file=("exp.txt", b"expiring"), purpose="assistants",
                                  expires_after={"anchor": "created_at", "seconds": 3600})
    assert created.expires_at == created.created_at + 3600
    assert client.files.retrieve(created.id).expires_at == created.expires_at


def test_list_filters_by_purpose_and_orders(make_client):
    client = _tenant_client(make_client)
    a = client.files.create(file=("a.txt", b"a"), purpose="assistants")
    b = client.files.create(file=("b.jsonl", b"{}"), purpose="batch")
    c = client.files.create(file=("c.txt", b"c"), purpose="assistants")
    page = client.files.list()
    assert page.object == "list"
    assert [f.id for f in page.data] == [c.id, b.id, a.id]  # default order: desc
    assert _all_ids(client, order="asc") == [a.id, b.id, c.id]
    assert _all_ids(client, order="desc") == [c.id, b.id, a.id]
    assert _all_ids(client, purpose="assistants") == [c.id, a.id]
    assert _all_ids(client, purpose="batch", order="asc") == [b.id]
    assert _all_ids(client, purpose="vision") == []


def test_retrieve_and_content(client):
    data = bytes(range(256)) * 4
    created = client.files.create(file=("blob.bin", data), purpose="user_data")
    got = client.files.retrieve(created.id)
    assert got == created
    assert client.files.content(created.id).read() == data


def test_delete_then_retrieve_is_404(client):
    created = client.files.create(file=("gone.txt", b"bye"), purpose="assistants")
    deleted = client.files.delete(created.id)
    assert deleted.id == created.id and deleted.object == "file" and deleted.deleted is True
    with pytest.raises(openai.NotFoundError) as exc:
        client.files.retrieve(created.id)
    assert exc.value.param == "file_id" and exc.value.code == "not_found"
    with pytest.raises(openai.NotFoundError):
        client.files.content(created.id)
    with pytest.raises(openai.NotFoundError):
        client.files.delete(created.id)
    assert created.id not in _all_ids(client)


def test_deleting_an_attached_file_detaches_it(client):
    store = client.vector_stores.create(name="detach-on-delete")
    keep = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("keep.txt", b"Bananas are yellow tropical fruit rich in potassium."))
    drop = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("drop.txt", b"Zeppelins are rigid airships filled with lifting gas."))
    assert keep.status == drop.status == "completed"
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 2
    hits = client.vector_stores.search(store.id, query="rigid airships zeppelins")
    assert drop.id in {h.file_id for h in hits.data}

    client.files.delete(drop.id)

    counts = client.vector_stores.retrieve(store.id).file_counts
    assert counts.completed == 1 and counts.total == 1
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id)] == [keep.id]
    hits = client.vector_stores.search(store.id, query="rigid airships zeppelins")
    assert drop.id not in {h.file_id for h in hits.data}
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(drop.id, vector_store_id=store.id)


# ---- errors ----------------------------------------------------------------------------------------------------


def test_bad_purpose_is_400(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.files.create(file=("x.txt", b"x"), purpose="bogus")  # type: ignore[arg-type]
    assert exc.value.status_code == 400 and exc.value.param == "purpose"


def test_missing_purpose_is_400(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.files.create(file=("x.txt", b"x"), purpose=openai.omit)  # type: ignore[arg-type]
    assert exc.value.param == "purpose"


def test_missing_file_is_400(client):
    with pytest.raises(openai.BadRequestError) as exc:
        client.post("/files", cast_to=object, body={"purpose": "assistants"},
                    options={"headers": {"Content-Type": "multipart/form-data"}}, files=[])
    assert exc.value.param == "file"


@pytest.mark.parametrize("call", ["retrieve", "content", "delete"])
def test_malformed_id_is_400(client, call):
    with pytest.raises(openai.BadRequestError) as exc:
        getattr(client.files, call)("abc")
    assert exc.value.param == "file_id" and exc.value.code == "invalid_value"


@pytest.mark.parametrize("call", ["retrieve", "content", "delete"])
def test_unknown_id_is_404(client, call):
    with pytest.raises(openai.NotFoundError) as exc:
        getattr(client.files, call)(UNKNOWN_FILE_ID)
    assert exc.value.param == "file_id"


def test_another_tenants_file_is_404(client, make_client):
    created = client.files.create(file=("mine.txt", b"mine"), purpose="assistants")
    other = _tenant_client(make_client)
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        other.files.delete(created.id)
    assert client.files.retrieve(created.id).id == created.id


@pytest.mark.parametrize("expires_after, param", [
    ({"anchor": "created_at", "seconds": 3599}, "expires_after.seconds"),
    ({"anchor": "created_at", "seconds": 2_592_001}, "expires_after.seconds"),
    ({"anchor": "created_at", "seconds": "soon"}, "expires_after.seconds"),
    ({"anchor": "last_active_at", "seconds": 3600}, "expires_after.anchor"),
])
def test_expires_after_out_of_range_is_400(make_client, expires_after, param):
    client = _tenant_client(make_client)
    with pytest.raises(openai.BadRequestError) as exc:
        client.files.create(file=("x.txt", b"x"), purpose="assistants", expires_after=expires_after)
    assert exc.value.param == param
    assert _all_ids(client) == []


def test_request_over_10_mb_is_413_and_stores_nothing(make_client, api_settings):
    client = _tenant_client(make_client)
    existing = client.files.create(file=("small.txt", b"small"), purpose="assistants")
    assert api_settings.max_request_bytes == 10 * 1024 * 1024
    with pytest.raises(openai.APIStatusError) as exc:
        client.files.create(file=("big.bin", b"\0" * (10 * 1024 * 1024 + 1)), purpose="assistants")
    assert exc.value.status_code == 413 and exc.value.code == "request_too_large"
    assert set(exc.value.body) == {"message", "type", "param", "code"}
    assert _all_ids(client) == [existing.id]
