"""The local stack's bucket kept on disk, so a restarted ``engram serve`` finds every object it had: API-uploaded
files' bytes (``files/…``), upload parts and drop-folder objects.

moto keeps S3 in memory and has no persistence of its own (its recorder replays every request, SQS's included).
The stack runs moto in this process, so every write of a kept bucket is mirrored to a folder as it happens —
:func:`install` wraps moto's ``S3Backend.put_object`` (which ``PutObject``, ``CopyObject`` and
``CompleteMultipartUpload`` all go through) and ``delete_object`` (``DeleteObject``, ``DeleteObjects``) — and
:func:`restore` loads the folder back into a new moto, without notifications (the objects are not new).

Layout under the folder: per object ``<sha256(key)>.bin`` (its bytes) and ``<sha256(key)>.json``
(``{"key", "etag"}``), each written to a temporary file and renamed, bytes first: a process killed mid-write leaves
either the previous object or the new one, never a torn one. The ETag is kept (a multipart object's ``"<md5>-N"``
is not the MD5 of its bytes) because the drop-folder handler reads objects ``If-Match`` the ETag an event announced.
Object metadata, tags and versions are not kept (Engram uses none of them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

__all__ = ["forget", "install", "keep", "restore"]

logger = logging.getLogger("engram.local")

_lock = threading.Lock()
_folders: dict[str, Path] = {}  # bucket name → folder its objects are kept in


def keep(bucket: str, folder: Path) -> None:
    """Mirror every later write of ``bucket`` (in this process's moto) to ``folder`` (created if missing)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    with _lock:
        _folders[bucket] = Path(folder)


def forget(bucket: str) -> None:
    """Stop mirroring ``bucket`` (the stack that kept it stopped)."""
    with _lock:
        _folders.pop(bucket, None)


def _names(folder: Path, key: str) -> tuple[Path, Path]:
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return folder / f"{digest}.bin", folder / f"{digest}.json"


def _write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _sync(backend: Any, bucket_name: str, key_name: str) -> None:
    """Make the folder's copy of ``key_name`` what moto now holds (written, or removed when moto has none). Under
    one lock, reading moto's current object, so concurrent puts and deletes of a key end as moto ends."""
    folder = _folders.get(bucket_name)
    if folder is None:
        return
    with _lock:
        try:
            current = backend.get_bucket(bucket_name).keys.get(key_name)
        except Exception:  # the bucket itself is gone
            current = None
        data_path, meta_path = _names(folder, key_name)
        value = getattr(current, "value", None) if current is not None else None
        if value is None:  # deleted (or a delete marker)
            meta_path.unlink(missing_ok=True)
            data_path.unlink(missing_ok=True)
            return
        _write(data_path, bytes(value))
        _write(meta_path, json.dumps({"key": key_name, "etag": current.etag.strip('"')}).encode())


def install() -> bool:
    """Wrap moto's S3 writes so kept buckets are mirrored (idempotent); returns whether the wrappers are installed
    (False: this moto has not the expected shape, and nothing is kept)."""
    try:
        from moto.s3.models import S3Backend
    except ImportError:  # pragma: no cover - moto is a dependency of the local stack
        return False
    put, delete = getattr(S3Backend, "put_object", None), getattr(S3Backend, "delete_object", None)
    if put is None or delete is None:
        logger.warning("moto's S3Backend has no put_object/delete_object: the local bucket is not kept on disk")
        return False
    if getattr(put, "_engram", False):
        return True

    def put_object(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        key = put(self, bucket_name, key_name, *args, **kwargs)
        _sync(self, bucket_name, key_name)
        return key

    def delete_object(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        result = delete(self, bucket_name, key_name, *args, **kwargs)
        _sync(self, bucket_name, key_name)
        return result

    put_object._engram = True  # type: ignore[attr-defined]
    S3Backend.put_object = put_object  # type: ignore[method-assign]
    S3Backend.delete_object = delete_object  # type: ignore[method-assign]
    return True


def restore(bucket: str, folder: Path) -> int:
    """Load every object kept under ``folder`` into ``bucket`` (which must exist in this process's moto) with its
    ETag and no event notification; returns how many. Call it before :func:`keep` (the folder already holds them).
    Entries whose bytes are missing are skipped (a write that a killed process did not finish).

    Raises:
        KeyError: no moto backend holds ``bucket``.
    """
    from moto.s3.models import s3_backends

    partition, account = s3_backends.bucket_accounts[bucket]
    backend = s3_backends[account][partition]
    restored = 0
    for meta_path in sorted(Path(folder).glob("*.json")):
        try:
            meta = json.loads(meta_path.read_text())
            data = meta_path.with_suffix(".bin").read_bytes()
        except (OSError, ValueError):
            logger.warning("skipping %s: unreadable or without its bytes", meta_path)
            continue
        backend.put_object(bucket, meta["key"], data, etag=meta.get("etag") or None, disable_notification=True)
        restored += 1
    return restored
