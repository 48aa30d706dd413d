"""Uploads (OpenAI's Uploads API): a file sent in parts, each within one request, then assembled into a File.

An upload is created ``pending`` with the size the client declares (``bytes``) and expires an hour later
(:data:`UPLOAD_TTL_S`). Parts (each at most :data:`MAX_PART_BYTES`, and in practice at most the request cap) are
stored in a :class:`~chalicelib.store.blobs.BlobStore` under ``<tenant>/uploads/<upload_id>/<part_id>``, their
metadata in ``upload_parts``. Completing concatenates the parts the client names, in that order, into a new file
(:func:`chalicelib.store.files.create_file`) and deletes the parts' blobs. ``status`` is ``pending``,
``completed``, ``cancelled`` or ``expired`` — the last is derived: a pending upload past ``expires_at``.

Sizes are bytes; times are the database's clock.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from datetime import datetime

import psycopg
from psycopg.rows import class_row

from chalicelib import ids
from chalicelib.errors import InvalidRequestError, NotFoundError, PayloadTooLargeError
from chalicelib.store import files as file_rows
from chalicelib.store.blobs import BlobStore
from chalicelib.store.db import one
from chalicelib.store.files import FileRow
from chalicelib.wire import FILE_PURPOSES, UploadStatus

logger = logging.getLogger(__name__)

UPLOAD_TTL_S = 3600
"""Seconds a pending upload accepts parts and completion (OpenAI: one hour)."""

MAX_PART_BYTES = 64 * 1024 * 1024
"""Largest part, bytes (OpenAI's limit; the request cap, ``settings.max_request_bytes``, is usually lower)."""

RESEND_ALLOWANCE = 2
"""All parts of an upload together may hold at most this many times its declared ``bytes`` (room for parts a
client re-sends after a lost response; completion uses only the parts it names)."""

PURPOSES = FILE_PURPOSES
"""Purposes an upload may declare (those of the Files API)."""


@dataclass(frozen=True, slots=True)
class Upload:
    """An upload as the caller sees it. ``status`` is the effective one (``expired`` for a pending upload past
    ``expires_at``); ``bytes`` is the declared total size; ``file`` is the File made at completion (None before,
    or once that file has been deleted)."""

    id: str
    tenant_id: str
    filename: str
    purpose: str
    bytes: int
    mime_type: str
    status: UploadStatus
    file_expires_after_s: int | None
    created_at: datetime
    expires_at: datetime
    completed_at: datetime | None
    cancelled_at: datetime | None
    file_id: str | None
    file: FileRow | None = None


@dataclass(frozen=True, slots=True)
class UploadPart:
    """A stored part: ``bytes`` is its size; ``blob_key`` where its bytes are."""

    id: str
    upload_id: str
    tenant_id: str
    bytes: int
    created_at: datetime
    blob_key: str


_UPLOAD_COLUMNS = """id, tenant_id, filename, purpose, bytes, mime_type,
    CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired' ELSE status END AS status,
    file_expires_after_s, created_at, expires_at, completed_at, cancelled_at, file_id"""
_PART_COLUMNS = "id, upload_id, tenant_id, bytes, created_at, blob_key"

_INSERT_UPLOAD = f"""
INSERT INTO uploads (id, tenant_id, filename, purpose, bytes, mime_type, file_expires_after_s, expires_at)
VALUES (%(id)s, %(tenant)s, %(filename)s, %(purpose)s, %(bytes)s, %(mime_type)s, %(file_expires_after_s)s,
        now() + make_interval(secs => %(ttl)s::float8))
RETURNING {_UPLOAD_COLUMNS}"""
_GET_UPLOAD = f"SELECT {_UPLOAD_COLUMNS} FROM uploads WHERE tenant_id = %(tenant)s AND id = %(id)s"
# Taken by add_part, complete and cancel: they serialize on the upload's row, so no part lands after completion.
_LOCK_UPLOAD = _GET_UPLOAD + " FOR UPDATE"
_PARTS_TOTAL = "SELECT coalesce(sum(bytes), 0) FROM upload_parts WHERE tenant_id = %(tenant)s AND upload_id = %(id)s"
_INSERT_PART = f"""
INSERT INTO upload_parts (id, upload_id, tenant_id, bytes, blob_key)
VALUES (%(id)s, %(upload)s, %(tenant)s, %(bytes)s, %(key)s)
RETURNING {_PART_COLUMNS}"""
_GET_PARTS = f"""SELECT {_PART_COLUMNS} FROM upload_parts
WHERE tenant_id = %(tenant)s AND upload_id = %(upload)s AND id = ANY(%(ids)s)"""
_SET_COMPLETED = """UPDATE uploads SET status = 'completed', completed_at = now(), file_id = %(file)s
WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_SET_CANCELLED = """UPDATE uploads SET status = 'cancelled', cancelled_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_DELETE_PARTS = "DELETE FROM upload_parts WHERE tenant_id = %(tenant)s AND upload_id = %(id)s"
# Uploads that still have part rows but can no longer use them (finished, or expired unfinished); all tenants.
_STALE_PARTS = """SELECT DISTINCT u.tenant_id, u.id FROM uploads u JOIN upload_parts p ON p.upload_id = u.id
WHERE (u.status <> 'pending' OR u.expires_at <= now())
  AND (%(tenant)s::text IS NULL OR u.tenant_id = %(tenant)s) LIMIT %(limit)s"""


def blob_prefix(tenant_id: str, upload_id: str) -> str:
    """The blob-key prefix of an upload's parts: ``<tenant>/uploads/<upload_id>/``."""
    return f"{tenant_id}/uploads/{upload_id}/"


def create(conn: psycopg.Connection, tenant_id: str, *, filename: str, purpose: str, bytes: int, mime_type: str,
           max_bytes: int, file_expires_after_s: int | None = None) -> Upload:
    """Create a ``pending`` upload of ``bytes`` bytes (declared total), expiring in :data:`UPLOAD_TTL_S` seconds.
    ``file_expires_after_s`` (seconds) becomes the ``expires_after`` of the file made at completion.

    Raises:
        InvalidRequestError: ``purpose`` is not one of :data:`PURPOSES` (param ``purpose``), or ``bytes`` is
            negative (param ``bytes``).
        PayloadTooLargeError: ``bytes`` exceeds ``max_bytes`` (param ``bytes``).
    """
    if purpose not in PURPOSES:
        raise InvalidRequestError(f"Invalid 'purpose': expected one of {', '.join(PURPOSES)}.", param="purpose",
                                  code="invalid_value")
    if bytes < 0:
        raise InvalidRequestError("Invalid 'bytes': must not be negative.", param="bytes", code="invalid_value")
    if bytes > max_bytes:
        raise PayloadTooLargeError(f"The upload is {bytes:,} bytes; the limit is {max_bytes:,} bytes.",
                                   param="bytes")
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(Upload)) as cur:
        return one(cur.execute(_INSERT_UPLOAD, {
            "id": ids.new_id(ids.UPLOAD), "tenant": tenant_id, "filename": filename, "purpose": purpose,
            "bytes": bytes, "mime_type": mime_type, "file_expires_after_s": file_expires_after_s,
            "ttl": UPLOAD_TTL_S}))


def get(conn: psycopg.Connection, tenant_id: str, upload_id: str) -> Upload:
    """The tenant's upload ``upload_id``, with its ``file`` when completed (and that file still exists).

    Raises:
        NotFoundError: no such upload for this tenant.
    """
    row = _fetch(conn, tenant_id, upload_id, _GET_UPLOAD)
    if row.file_id is None:
        return row
    try:
        return _with_file(row, file_rows.get_file(conn, tenant_id, row.file_id))
    except NotFoundError:
        return row


def add_part(conn: psycopg.Connection, blobs: BlobStore, tenant_id: str, upload_id: str, data: bytes) -> UploadPart:
    """Store ``data`` as a new part of a pending upload. Parts may arrive in any order (and in parallel); the
    order that counts is the one :func:`complete` is given.

    Raises:
        NotFoundError: no such upload for this tenant.
        InvalidRequestError: the upload is completed, cancelled or expired; ``data`` is empty; or the upload's
            parts would exceed :data:`RESEND_ALLOWANCE` times its declared ``bytes`` (param ``data``).
        PayloadTooLargeError: ``data`` is larger than :data:`MAX_PART_BYTES` (param ``data``).
        UpstreamError: the blob store failed.
    """
    if len(data) > MAX_PART_BYTES:
        raise PayloadTooLargeError(f"A part may hold at most {MAX_PART_BYTES:,} bytes; this one has {len(data):,}.",
                                   param="data")
    if not data:
        raise InvalidRequestError("A part may not be empty.", param="data", code="invalid_value")
    upload = _fetch(conn, tenant_id, upload_id, _GET_UPLOAD)
    _require_pending(upload, "add parts to")
    _check_room(conn, upload, len(data))
    part_id = ids.new_id(ids.UPLOAD_PART)
    key = blob_prefix(tenant_id, upload_id) + part_id
    blobs.put(key, data)  # before the row: a row never names a missing blob
    try:
        with conn.transaction():
            upload = _fetch(conn, tenant_id, upload_id, _LOCK_UPLOAD)
            _require_pending(upload, "add parts to")  # completed or cancelled while the bytes were stored
            _check_room(conn, upload, len(data))
            with conn.cursor(row_factory=class_row(UploadPart)) as cur:
                return one(cur.execute(_INSERT_PART, {"id": part_id, "upload": upload_id, "tenant": tenant_id,
                                                      "bytes": len(data), "key": key}))
    except BaseException:
        _forget(blobs, key)
        raise


def complete(conn: psycopg.Connection, blobs: BlobStore, tenant_id: str, upload_id: str, part_ids: list[str], *,
             md5: str | None = None) -> Upload:
    """Concatenate the parts ``part_ids`` in that order into a new file (named, purposed and expiring as the
    upload declared), mark the upload ``completed`` and delete the parts' blobs. ``md5``, when given, is the hex
    MD5 the client expects of the whole file (case-insensitive).

    Returns:
        The completed upload with ``file`` set.

    Raises:
        NotFoundError: no such upload for this tenant.
        InvalidRequestError: the upload is completed, cancelled or expired; a part id repeats, is unknown or
            belongs to another upload (param ``part_ids[i]``); the parts' total differs from the declared
            ``bytes`` (param ``part_ids``); or the MD5 differs (param ``md5``).
        FileContentError: a part's stored bytes are gone (410, ``upload_part_missing``; nothing changed).
        UpstreamError: the blob store failed (nothing changed).
    """
    seen: set[str] = set()
    for index, part_id in enumerate(part_ids):
        if part_id in seen:
            raise InvalidRequestError(f"Part '{part_id}' is listed more than once.", param=f"part_ids[{index}]",
                                      code="duplicate_part")
        seen.add(part_id)
    with conn.transaction():
        upload = _fetch(conn, tenant_id, upload_id, _LOCK_UPLOAD)
        _require_pending(upload, "complete")
        with conn.cursor(row_factory=class_row(UploadPart)) as cur:
            found = {p.id: p for p in cur.execute(_GET_PARTS, {"tenant": tenant_id, "upload": upload_id,
                                                                "ids": list(part_ids)}).fetchall()}
        for index, part_id in enumerate(part_ids):
            if part_id not in found:
                raise InvalidRequestError(f"No part with id '{part_id}' was added to upload '{upload_id}'.",
                                          param=f"part_ids[{index}]", code="invalid_part")
        total = sum(found[p].bytes for p in part_ids)
        if total != upload.bytes:
            raise InvalidRequestError(
                f"The parts hold {total:,} bytes, but the upload was created with bytes={upload.bytes:,}; the "
                "sizes must match.", param="part_ids", code="bytes_mismatch")
        data = b"".join(_part_bytes(blobs, upload_id, found[p], f"part_ids[{i}]") for i, p in enumerate(part_ids))
        if md5 is not None and hashlib.md5(data).hexdigest() != md5.strip().lower():
            raise InvalidRequestError("The MD5 checksum of the uploaded bytes does not match 'md5'.", param="md5",
                                      code="checksum_mismatch")
        file = file_rows.create_file(conn, tenant_id, filename=upload.filename, data=data, purpose=upload.purpose,
                                     expires_in_s=upload.file_expires_after_s, blobs=file_rows.content_blobs(blobs))
        del data
        conn.execute(_SET_COMPLETED, {"tenant": tenant_id, "id": upload_id, "file": file.id})
    _discard_parts(conn, blobs, tenant_id, upload_id)
    return _with_file(_fetch(conn, tenant_id, upload_id, _GET_UPLOAD), file)


def _part_bytes(blobs: BlobStore, upload_id: str, part: UploadPart, param: str) -> bytes:
    """A part's bytes from the blob store.

    Raises:
        FileContentError: they are gone (deleted behind Engram's back, or a store that did not keep them).
    """
    from chalicelib.errors import FileContentError
    from chalicelib.store.blobs import BlobNotFoundError

    try:
        return blobs.get(part.blob_key)
    except BlobNotFoundError:
        raise FileContentError(f"The stored bytes of part '{part.id}' of upload '{upload_id}' are missing; add the "
                               "part again (a new part id) or start a new upload.", param=param,
                               code="upload_part_missing") from None


def cancel(conn: psycopg.Connection, blobs: BlobStore, tenant_id: str, upload_id: str) -> Upload:
    """Cancel a pending upload: no parts may be added and it cannot be completed; its parts' blobs are deleted.

    Raises:
        NotFoundError: no such upload for this tenant.
        InvalidRequestError: the upload is already completed, cancelled or expired.
    """
    with conn.transaction():
        upload = _fetch(conn, tenant_id, upload_id, _LOCK_UPLOAD)
        _require_pending(upload, "cancel")
        conn.execute(_SET_CANCELLED, {"tenant": tenant_id, "id": upload_id})
    _discard_parts(conn, blobs, tenant_id, upload_id)
    return _fetch(conn, tenant_id, upload_id, _GET_UPLOAD)


def sweep_expired(conn: psycopg.Connection, blobs: BlobStore, *, tenant_id: str | None = None,
                  limit: int = 1000) -> int:
    """Delete the part blobs and rows of up to ``limit`` uploads that can no longer use them — completed or
    cancelled ones whose cleanup failed, and expired ones (one tenant's, or every tenant's as the owner). The
    uploads themselves stay. Returns how many uploads were cleaned."""
    rows = conn.execute(_STALE_PARTS, {"tenant": tenant_id, "limit": limit}).fetchall()
    for tenant_id, upload_id in rows:
        blobs.delete_prefix(blob_prefix(tenant_id, upload_id))
        conn.execute(_DELETE_PARTS, {"tenant": tenant_id, "id": upload_id})
    return len(rows)


def _fetch(conn: psycopg.Connection, tenant_id: str, upload_id: str, query: str) -> Upload:
    with conn.cursor(row_factory=class_row(Upload)) as cur:
        row = cur.execute(query, {"tenant": tenant_id, "id": upload_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No upload found with id '{upload_id}'.", param="upload_id")
    return row


def _with_file(upload: Upload, file: FileRow) -> Upload:
    return replace(upload, file=file)


def _require_pending(upload: Upload, action: str) -> None:
    if upload.status != "pending":
        raise InvalidRequestError(f"Cannot {action} upload '{upload.id}': its status is '{upload.status}'.",
                                  param="upload_id", code="invalid_upload_status")


def _check_room(conn: psycopg.Connection, upload: Upload, size: int) -> None:
    stored = one(conn.execute(_PARTS_TOTAL, {"tenant": upload.tenant_id, "id": upload.id}))[0]
    if size > upload.bytes or stored + size > RESEND_ALLOWANCE * upload.bytes:
        raise InvalidRequestError(
            f"This part ({size:,} bytes) would take upload '{upload.id}' past the {upload.bytes:,} bytes it was "
            "created for.", param="data", code="upload_too_large")


def _discard_parts(conn: psycopg.Connection, blobs: BlobStore, tenant_id: str, upload_id: str) -> None:
    # Best effort once the upload is final: a failure leaves the part rows for sweep_expired to retry.
    try:
        blobs.delete_prefix(blob_prefix(tenant_id, upload_id))
    except Exception:
        logger.warning("deleting the parts of upload %s failed; sweep_expired will retry", upload_id, exc_info=True)
        return
    conn.execute(_DELETE_PARTS, {"tenant": tenant_id, "id": upload_id})


def _forget(blobs: BlobStore, key: str) -> None:
    try:
        blobs.delete_prefix(key)
    except Exception:
        logger.warning("deleting orphaned part blob %s failed", key, exc_info=True)
