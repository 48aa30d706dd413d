"""Blob stores (chalicelib.store.blobs): local files and S3 (moto, in-process) behave alike."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib.config import Settings
from chalicelib.store.blobs import BlobNotFoundError, LocalBlobStore, S3BlobStore, build_blob_store

BUCKET = "engram-test-blobs"


@pytest.fixture()
def local_store(tmp_path):
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture()
def s3_store(monkeypatch):
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        import boto3

        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield S3BlobStore(BUCKET, client)


@pytest.fixture(params=["local", "s3"])
def store(request):
    return request.getfixturevalue(f"{request.param}_store")


def test_round_trip(store):
    data = bytes(range(256)) * 1000
    store.put("acme/uploads/upload_1/part_1", data)
    store.put("acme/uploads/upload_1/part_2", b"")
    assert store.get("acme/uploads/upload_1/part_1") == data
    assert store.get("acme/uploads/upload_1/part_2") == b""
    store.put("acme/uploads/upload_1/part_1", b"replaced")
    assert store.get("acme/uploads/upload_1/part_1") == b"replaced"


def test_missing_key(store):
    with pytest.raises(BlobNotFoundError):
        store.get("acme/uploads/upload_1/nope")


def test_delete_prefix_only_touches_the_prefix(store):
    keys = ["acme/uploads/upload_1/part_1", "acme/uploads/upload_1/part_2", "acme/uploads/upload_12/part_1",
            "other/uploads/upload_1/part_1"]
    for key in keys:
        store.put(key, key.encode())
    assert store.delete_prefix("acme/uploads/upload_1/") == 2
    for key in keys[:2]:
        with pytest.raises(BlobNotFoundError):
            store.get(key)
    assert store.get("acme/uploads/upload_12/part_1") == b"acme/uploads/upload_12/part_1"
    assert store.get("other/uploads/upload_1/part_1") == b"other/uploads/upload_1/part_1"
    assert store.delete_prefix("acme/uploads/upload_1/") == 0  # nothing left: not an error
    assert store.delete_prefix("acme/uploads/upload_1") == 1  # a string prefix: upload_12 too
    assert store.get("other/uploads/upload_1/part_1")


def test_delete_prefix_many(store):
    for i in range(25):
        store.put(f"t/uploads/u/part_{i:03d}", b"x")
    assert store.delete_prefix("t/uploads/u/") == 25
    assert store.delete_prefix("t/") == 0


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "a/./b", "a\\b", "a/b/"])
def test_bad_keys_are_refused(local_store, key):
    with pytest.raises(ValueError):
        local_store.put(key, b"x")


def test_empty_prefix_is_refused(store):
    with pytest.raises(ValueError):
        store.delete_prefix("")


def test_local_store_removes_emptied_folders(local_store):
    local_store.put("acme/uploads/upload_1/part_1", b"x")
    local_store.delete_prefix("acme/uploads/upload_1/")
    assert not (local_store.root / "acme" / "uploads" / "upload_1").exists()


def test_blob_store_follows_settings(tmp_path):
    local = build_blob_store(dataclasses.replace(Settings(), data_dir=tmp_path))
    assert isinstance(local, LocalBlobStore) and local.root == tmp_path / "blobs"
    s3 = build_blob_store(dataclasses.replace(Settings(), data_dir=tmp_path, bucket="my-bucket"))
    assert isinstance(s3, S3BlobStore) and s3.bucket == "my-bucket" and s3._client is None  # built lazily
    assert Settings.from_env({"ENGRAM_BUCKET": "b1"}).bucket == "b1"
    assert Settings.from_env({}).bucket is None
