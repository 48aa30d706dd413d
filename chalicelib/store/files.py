"""File objects (OpenAI Files API): their rows and where their bytes live. Their attachments to vector stores are
:mod:`chalicelib.store.attachments`.

Where a file's bytes live: in ``files.content`` locally; in S3 when the caller passes an S3 blob store (the API
when deployed, ``Settings.bucket`` set: see :func:`content_blobs`), under ``files/<tenant>/<file_id>``
(:func:`content_key`) with ``content`` NULL; a file that came from the S3 drop folder points at its own object
(``content_bucket``/``content_key``). :func:`get_content` reads through whichever it is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from chalicelib import ids
from chalicelib.errors import NotFoundError
from chalicelib.store import attachments
from chalicelib.store.db import one
from chalicelib.store.paging import Page, keyset, trim


@dataclass(frozen=True, slots=True)
class FileRow:
    """A row of ``files`` without its content: ``bytes`` is the size in bytes, ``sha256`` the hex digest."""

    id: str
    tenant_id: str
    filename: str
    purpose: str
    bytes: int
    sha256: str
    created_at: datetime
    expires_at: datetime | None


_FILE_COLUMNS = "id, tenant_id, filename, purpose, bytes, sha256, created_at, expires_at"
_INSERT_FILE = f"""
INSERT INTO files (id, tenant_id, filename, purpose, bytes, sha256, content, content_bucket, content_key, expires_at)
VALUES (%(id)s, %(tenant)s, %(filename)s, %(purpose)s, %(bytes)s, %(sha256)s, %(content)s, %(bucket)s, %(key)s,
        CASE WHEN %(expires_in)s::float8 IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(expires_in)s::float8) END)
RETURNING {_FILE_COLUMNS}"""
_REPLACE_CONTENT = f"""
UPDATE files SET content = %(content)s, bytes = %(bytes)s, sha256 = %(sha256)s, content_bucket = %(bucket)s,
    content_key = %(key)s
WHERE tenant_id = %(tenant)s AND id = %(id)s RETURNING {_FILE_COLUMNS}"""
_SET_DIGEST = """UPDATE files SET bytes = %(bytes)s, sha256 = %(sha256)s WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_LIVE = "(expires_at IS NULL OR expires_at > now())"  # expired files are gone to callers before the sweep runs
_GET_FILE = f"SELECT {_FILE_COLUMNS} FROM files WHERE tenant_id = %(tenant)s AND id = %(id)s AND {_LIVE}"
_GET_CONTENT = f"""SELECT content, content_bucket, content_key, sha256, filename FROM files
WHERE tenant_id = %(tenant)s AND id = %(id)s AND {_LIVE}"""
_LIST_FILES = f"""SELECT {_FILE_COLUMNS} FROM files
WHERE tenant_id = %(tenant)s AND {_LIVE} AND (%(purpose)s::text IS NULL OR purpose = %(purpose)s) AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


# Prefix of uploaded files' bytes in the bucket (see chalicelib.events.s3_keys.is_internal).
CONTENT_PREFIX = "files/"


def content_key(tenant_id: str, file_id: str) -> str:
    """The S3 key of an uploaded file's bytes: ``files/<tenant>/<file_id>`` (the drop folder ignores ``files/``)."""
    return f"{CONTENT_PREFIX}{tenant_id}/{file_id}"


def content_blobs(blobs: Any) -> Any:
    """Where new files' bytes go given the process's blob store: ``blobs`` itself when it is S3 (deployed), None —
    Postgres — for the local folder store."""
    from chalicelib.store.blobs import S3BlobStore

    return blobs if isinstance(blobs, S3BlobStore) else None


def create_file(conn: psycopg.Connection, tenant_id: str, *, filename: str, data: bytes,
                purpose: str = "assistants", expires_in_s: float | None = None, blobs: Any = None) -> FileRow:
    """Store ``data`` (bytes) as a new file of the tenant; ``expires_in_s`` (seconds from now) sets ``expires_at``.
    With ``blobs`` (an S3 blob store, :func:`content_blobs`) the bytes go to S3 first (:func:`content_key`), so a
    row never names a missing object; otherwise into Postgres.

    Raises:
        UpstreamError: S3 refused or failed the upload (nothing is written to the database).
    """
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    file_id = ids.new_id(ids.FILE)
    params = {"id": file_id, "tenant": tenant_id, "filename": filename, "purpose": purpose, "bytes": len(data),
              "sha256": sha256_hex(data), "content": data, "bucket": None, "key": None,
              "expires_in": expires_in_s}
    if blobs is not None:
        key = content_key(tenant_id, file_id)
        blobs.put(key, data)
        params.update(content=None, bucket=blobs.bucket, key=key)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        return one(cur.execute(_INSERT_FILE, params))


def create_object_file(conn: psycopg.Connection, tenant_id: str, *, filename: str, bucket: str, key: str,
                       size: int) -> FileRow:
    """A new file whose bytes are the S3 object ``bucket``/``key`` of ``size`` bytes (the drop folder). Its
    ``sha256`` is empty until :func:`set_digest` records what was ingested."""
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        return one(cur.execute(_INSERT_FILE, {"id": ids.new_id(ids.FILE), "tenant": tenant_id,
                                              "filename": filename, "purpose": "assistants", "bytes": size,
                                              "sha256": "", "content": None, "bucket": bucket, "key": key,
                                              "expires_in": None}))


def point_to_object(conn: psycopg.Connection, tenant_id: str, file_id: str, *, bucket: str, key: str,
                    size: int) -> FileRow:
    """Make an existing file's bytes the S3 object ``bucket``/``key`` (``size`` bytes; an overwritten drop).

    Raises:
        NotFoundError: no such file for this tenant.
    """
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        row = cur.execute(_REPLACE_CONTENT, {"tenant": tenant_id, "id": file_id, "content": None, "bytes": size,
                                             "sha256": "", "bucket": bucket, "key": key}).fetchone()
    if row is None:
        raise NotFoundError(f"No file found with id '{file_id}'.", param="file_id")
    return row


def set_digest(conn: psycopg.Connection, tenant_id: str, file_id: str, data: bytes) -> None:
    """Record the size (bytes) and SHA-256 of the bytes just read from a file's S3 object."""
    conn.execute(_SET_DIGEST, {"tenant": tenant_id, "id": file_id, "bytes": len(data), "sha256": sha256_hex(data)})


def list_files(conn: psycopg.Connection, tenant_id: str, page: Page, *,
               purpose: str | None = None) -> tuple[list[FileRow], bool]:
    """One page of the tenant's live files: ``(rows, has_more)``, optionally only those with ``purpose``."""
    where, order, params = keyset(page, "id")
    query = sql.SQL(_LIST_FILES).format(keyset=where, order=order)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        rows = cur.execute(query, {"tenant": tenant_id, "purpose": purpose, **params}).fetchall()
    return trim(page, rows)


def replace_content(conn: psycopg.Connection, tenant_id: str, file_id: str, data: bytes, *,
                    blobs: Any = None) -> FileRow:
    """Overwrite a file's bytes (a changed local file re-ingested under the same id); with ``blobs`` (S3) they go
    to the file's S3 key, as in :func:`create_file`.

    Raises:
        NotFoundError: no such file for this tenant.
        UpstreamError: S3 refused or failed the upload.
    """
    params = {"tenant": tenant_id, "id": file_id, "content": data, "bytes": len(data), "sha256": sha256_hex(data),
              "bucket": None, "key": None}
    if blobs is not None:
        get_file(conn, tenant_id, file_id)
        key = content_key(tenant_id, file_id)
        blobs.put(key, data)
        params.update(content=None, bucket=blobs.bucket, key=key)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        row = cur.execute(_REPLACE_CONTENT, params).fetchone()
    if row is None:
        raise NotFoundError(f"No file found with id '{file_id}'.", param="file_id")
    return row


def get_file(conn: psycopg.Connection, tenant_id: str, file_id: str) -> FileRow:
    """The tenant's file ``file_id``.

    Raises:
        NotFoundError: no such file for this tenant.
    """
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        row = cur.execute(_GET_FILE, {"tenant": tenant_id, "id": file_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No file found with id '{file_id}'.", param="file_id")
    return row


def get_content(conn: psycopg.Connection, tenant_id: str, file_id: str) -> bytes:
    """The file's bytes, from Postgres or from S3. An uploaded file's bytes are checked against the SHA-256
    recorded at upload; a drop-folder object is the user's to change (each change is a new S3 event, ingested
    under its ETag), so its bytes are returned as they are.

    Raises:
        NotFoundError: no such file for this tenant, or it has no bytes anywhere.
        FileContentError: the stored bytes are gone (``file_content_missing``) or differ from those uploaded
            (``file_content_changed``); 410, naming the file.
        UpstreamError: S3 failed.
    """
    from chalicelib.errors import FileContentError
    from chalicelib.store.blobs import BlobNotFoundError

    row = conn.execute(_GET_CONTENT, {"tenant": tenant_id, "id": file_id}).fetchone()
    if row is None or (row[0] is None and row[2] is None):
        raise NotFoundError(f"No content found for file '{file_id}'.", param="file_id")
    content, bucket, key, recorded, filename = row
    if content is not None:
        data = bytes(content)
    else:
        try:
            data = _object_store(bucket).get(key)
        except BlobNotFoundError:
            raise FileContentError(f"The stored bytes of file '{file_id}' ({filename}) are missing (s3://{bucket}/"
                                   f"{key} does not exist); upload the file again.", param="file_id") from None
    uploaded = content is not None or key.startswith(CONTENT_PREFIX)
    if uploaded and recorded and sha256_hex(data) != recorded:
        raise FileContentError(f"The stored bytes of file '{file_id}' ({filename}) are not those uploaded (their "
                               f"SHA-256 differs from {recorded}); upload the file again.", param="file_id",
                               code="file_content_changed")
    return data


def _object_store(bucket: str) -> Any:
    """The S3 bucket a row names (its region: the process's, ``AWS_REGION``)."""
    from chalicelib.store.blobs import S3BlobStore

    return S3BlobStore(bucket)


_DELETE_FILE = """DELETE FROM files WHERE tenant_id = %(tenant)s AND id = %(file)s
RETURNING content_bucket, content_key"""


def delete_file(conn: psycopg.Connection, tenant_id: str, file_id: str) -> bool:
    """Delete a file and detach it from every store of the tenant; False if it did not exist."""
    params = {"tenant": tenant_id, "file": file_id}
    stores = [r[0] for r in conn.execute(
        "SELECT vector_store_id FROM vector_store_files WHERE tenant_id = %(tenant)s AND file_id = %(file)s ORDER BY 1",
        params).fetchall()]
    for store_id in stores:
        attachments.detach(conn, tenant_id, store_id, file_id)
    row = conn.execute(_DELETE_FILE, params).fetchone()
    if row is not None and row[1] is not None and row[1].startswith(CONTENT_PREFIX):
        _forget_blob(row[0], row[1])  # an uploaded file's own object; a drop-folder object stays the user's
    return row is not None


def _forget_blob(bucket: str, key: str) -> None:
    import logging

    try:
        _object_store(bucket).delete_prefix(key)
    except Exception:  # the housekeeping orphan sweep removes it later
        logging.getLogger("engram.files").warning("could not delete s3://%s/%s", bucket, key, exc_info=True)


_EXPIRED_FILES = """SELECT tenant_id, id FROM files
WHERE expires_at < now() AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) LIMIT %(limit)s"""


def sweep_expired(conn: psycopg.Connection, *, tenant_id: str | None = None, limit: int = 1000) -> int:
    """Delete up to ``limit`` files past their ``expires_at`` (one tenant's, or every tenant's as the owner),
    detaching them everywhere; returns how many were deleted."""
    rows = conn.execute(_EXPIRED_FILES, {"tenant": tenant_id, "limit": limit}).fetchall()
    return sum(delete_file(conn, tenant, file_id) for tenant, file_id in rows)
