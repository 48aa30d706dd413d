"""A tenant's knowledge limits (seed 000 "Data Retention"), over HTTP with the official SDK: a request over a limit
gets a 4xx naming it and nothing is half-written; other tenants are not limited by it."""

from __future__ import annotations

import openai
import pytest

from chalicelib.store import tenants
from chalicelib.store.db import connect


@pytest.fixture()
def limited(api_settings, make_client):
    with connect(api_settings) as conn:
        tenants.set_limits(conn, "limited", {"max_file_size_bytes": 200, "max_files_per_store": 2,
                                             "max_storage_bytes": 10_000})
    yield make_client("limited")
    with connect(api_settings) as conn:
        tenants.set_limits(conn, "limited", {name: None for name in tenants.TenantLimits.names()})


def test_file_size_limit(limited, make_client):
    with pytest.raises(openai.APIStatusError) as caught:
        limited.files.create(file=("big.txt", b"x" * 201), purpose="assistants")
    assert caught.value.status_code == 413 and "max_file_size_bytes" in caught.value.message
    with pytest.raises(openai.APIStatusError) as caught:
        limited.uploads.create(bytes=201, filename="big.txt", mime_type="text/plain", purpose="assistants")
    assert caught.value.status_code == 413
    assert limited.files.create(file=("ok.txt", b"x" * 200), purpose="assistants").bytes == 200
    assert make_client("unlimited").files.create(file=("big.txt", b"x" * 201), purpose="assistants").bytes == 201


def test_files_per_store_limit_refuses_the_whole_batch(limited):
    files = [limited.files.create(file=(f"f{i}.txt", f"document number {i}".encode()), purpose="assistants")
             for i in range(3)]
    store = limited.vector_stores.create(name="capped")
    with pytest.raises(openai.BadRequestError) as caught:
        limited.vector_stores.file_batches.create(store.id, file_ids=[f.id for f in files])
    assert caught.value.body["code"] == "too_many_files" and "max_files_per_store" in caught.value.message
    assert limited.vector_stores.files.list(store.id).data == []
    for f in files[:2]:
        assert limited.vector_stores.files.create(vector_store_id=store.id, file_id=f.id).status == "completed"
    with pytest.raises(openai.BadRequestError):
        limited.vector_stores.files.create(vector_store_id=store.id, file_id=files[2].id)
    # re-attaching a file already there is not a new file
    assert limited.vector_stores.files.create(vector_store_id=store.id, file_id=files[0].id).status == "completed"
    with pytest.raises(openai.BadRequestError) as caught:
        limited.vector_stores.create(name="too many", file_ids=[f.id for f in files])
    assert caught.value.body["param"] == "file_ids"
    assert [s.name for s in limited.vector_stores.list().data] == ["capped"]  # nothing half-written


def test_storage_limit(api_settings, limited):
    with connect(api_settings) as conn:
        tenants.set_limits(conn, "limited", {"max_storage_bytes": 150})
    f = limited.files.create(file=("mid.txt", b"y" * 160), purpose="assistants")
    store = limited.vector_stores.create(name="full")
    with pytest.raises(openai.BadRequestError) as caught:
        limited.vector_stores.files.create(vector_store_id=store.id, file_id=f.id)
    assert caught.value.body["code"] == "storage_limit_exceeded" and "max_storage_bytes" in caught.value.message
