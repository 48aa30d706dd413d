"""Blob storage for bytes too large for one request (the parts of an Upload): a key → bytes store.

Keys are ``/``-separated paths that begin with the tenant, e.g. ``acme/uploads/upload_.../part_...``, so one
tenant's blobs share a prefix. :func:`build_blob_store` picks the backend from the settings: S3 when
``settings.bucket`` (``ENGRAM_BUCKET``) is set, else files under ``settings.data_dir / "blobs"``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

from chalicelib.config import Settings
from chalicelib.errors import EngramError, UpstreamError

# S3 DeleteObjects takes at most this many keys per call.
_S3_DELETE_BATCH = 1000


class BlobNotFoundError(EngramError):
    """500: a blob the database refers to is missing from the store (the two disagree; not the caller's fault)."""


class BlobStore(Protocol):
    """Bytes by key. Keys are ``/``-separated, without a leading ``/``, and never contain ``.``/``..`` segments."""

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing any blob already there."""

    def get(self, key: str) -> bytes:
        """The bytes stored under ``key``.

        Raises:
            BlobNotFoundError: nothing is stored under ``key``.
        """

    def delete_prefix(self, prefix: str) -> int:
        """Delete every blob whose key starts with ``prefix`` (a string prefix; end it with ``/`` to mean a
        folder); returns how many were deleted. Deleting nothing is not an error."""


def _check_key(key: str) -> list[str]:
    parts = key.split("/")
    if not key or key.startswith("/") or "\\" in key or "\x00" in key or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"Invalid blob key {key[:200]!r}")
    return parts


class LocalBlobStore:
    """Blobs as files under ``root`` (one file per key; writes are atomic renames)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*_check_key(key))

    def put(self, key: str, data: bytes) -> None:
        """See :meth:`BlobStore.put`."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        """See :meth:`BlobStore.get`."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise BlobNotFoundError(f"Stored blob {key!r} is missing.") from None

    def delete_prefix(self, prefix: str) -> int:
        """See :meth:`BlobStore.delete_prefix`. Folders left empty under the prefix are removed too."""
        if not prefix:
            raise ValueError("Refusing to delete every blob of the store (empty prefix).")
        folder = prefix.rpartition("/")[0]
        base = self.root.joinpath(*_check_key(folder)) if folder else self.root
        if not base.is_dir():
            return 0
        deleted = 0
        folders = []
        for path in base.rglob("*"):
            key = path.relative_to(self.root).as_posix()
            if path.is_dir():
                if key.startswith(prefix):
                    folders.append(path)
            elif key.startswith(prefix) and not path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)
                deleted += 1
        if prefix.endswith("/") and folder:
            folders.append(base)
        for path in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            _remove_if_empty(path)
        return deleted


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # not empty (other keys, or a concurrent write): leave it


class S3BlobStore:
    """Blobs as objects of an S3 bucket. ``client`` is a boto3 S3 client; when None one is built (for
    ``region``) on first use, so constructing the store costs nothing."""

    def __init__(self, bucket: str, client: Any | None = None, *, region: str | None = None) -> None:
        self.bucket = bucket
        self._client = client
        self._region = region

    @property
    def client(self) -> Any:
        """The boto3 S3 client (built lazily)."""
        if self._client is None:
            from chalicelib import aws

            self._client = aws.client("s3", self._region)
        return self._client

    def put(self, key: str, data: bytes) -> None:
        """See :meth:`BlobStore.put`.

        Raises:
            UpstreamError: S3 refused or failed the request.
        """
        _check_key(key)
        with _s3_errors("put"):
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        """See :meth:`BlobStore.get`.

        Raises:
            UpstreamError: S3 refused or failed the request.
        """
        _check_key(key)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobNotFoundError(f"Stored blob {key!r} is missing.") from None
            raise UpstreamError(f"Blob storage get failed: {str(exc)[:300]}") from exc
        except BotoCoreError as exc:
            raise UpstreamError(f"Blob storage get failed: {str(exc)[:300]}") from exc

    def delete_prefix(self, prefix: str) -> int:
        """See :meth:`BlobStore.delete_prefix`.

        Raises:
            UpstreamError: S3 refused or failed a request (some blobs may already be deleted).
        """
        if not prefix:
            raise ValueError("Refusing to delete every blob of the bucket (empty prefix).")
        deleted = 0
        with _s3_errors("delete"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                for start in range(0, len(keys), _S3_DELETE_BATCH):
                    batch = keys[start:start + _S3_DELETE_BATCH]
                    self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                    deleted += len(batch)
        return deleted


class _s3_errors:
    """Translate botocore failures into :class:`UpstreamError` (502), keeping the original as ``__cause__``."""

    def __init__(self, action: str) -> None:
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        if exc is not None and isinstance(exc, (BotoCoreError, ClientError)):
            raise UpstreamError(f"Blob storage {self.action} failed: {str(exc)[:300]}") from exc


def build_blob_store(config: Settings) -> BlobStore:
    """The blob store ``config`` names: :class:`S3BlobStore` on ``config.bucket`` when set, else
    :class:`LocalBlobStore` under ``config.data_dir / "blobs"`` (:func:`chalicelib.deps.blob_store` caches it)."""
    if config.bucket:
        return S3BlobStore(config.bucket, region=config.aws_region)
    return LocalBlobStore(config.data_dir / "blobs")


# Error codes meaning "not this object any more": it was overwritten (If-Match failed) or deleted since the event.
_GONE = ("PreconditionFailed", "412", "NoSuchKey", "404")


def read_object(bucket: str, key: str, etag: str | None = None, *, region: str | None = None) -> bytes | None:
    """The bytes of S3 object ``bucket``/``key`` (a drop-folder file) at the version an event announced: None when
    it no longer exists or (with ``etag``) was overwritten since — a newer S3 event for the key carries the work on.

    Raises:
        UpstreamError: S3 failed otherwise (the message is retried).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from chalicelib import aws

    kwargs = {"Bucket": bucket, "Key": key}
    if etag:
        kwargs["IfMatch"] = f'"{etag}"'
    try:
        return aws.client("s3", region).get_object(**kwargs)["Body"].read()
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in _GONE:
            return None
        raise UpstreamError(f"Reading s3://{bucket}/{key} failed: {str(exc)[:300]}") from exc
    except BotoCoreError as exc:
        raise UpstreamError(f"Reading s3://{bucket}/{key} failed: {str(exc)[:300]}") from exc
