"""File objects (OpenAI Files API) and their attachments to vector stores (``vector_store.file``).

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
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.errors import NotFoundError
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


@dataclass(frozen=True, slots=True)
class StoreFile:
    """A file attached to a vector store, joined with the file's name. ``last_error`` is ``{"code", "message"}``
    when ``status == "failed"``; ``usage_bytes`` is what its chunks occupy (text bytes + 4 bytes per dimension)."""

    vector_store_id: str
    file_id: str
    filename: str
    status: str
    last_error: dict[str, Any] | None
    attributes: dict[str, Any]
    chunking_strategy: dict[str, Any]
    content_sha256: str | None
    chunk_count: int
    usage_bytes: int
    created_at: datetime
    updated_at: datetime


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
_GET_CONTENT = f"""SELECT content, content_bucket, content_key FROM files
WHERE tenant_id = %(tenant)s AND id = %(id)s AND {_LIVE}"""
_LIST_FILES = f"""SELECT {_FILE_COLUMNS} FROM files
WHERE tenant_id = %(tenant)s AND {_LIVE} AND (%(purpose)s::text IS NULL OR purpose = %(purpose)s) AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""

_STORE_FILE_COLUMNS = """sf.vector_store_id, sf.file_id, f.filename, sf.status, sf.last_error, sf.attributes,
    sf.chunking_strategy, sf.content_sha256, sf.chunk_count, sf.usage_bytes, sf.created_at, sf.updated_at"""
_UPSERT_STORE_FILE = """
INSERT INTO vector_store_files (tenant_id, vector_store_id, file_id, status, attributes, chunking_strategy)
VALUES (%(tenant)s, %(store)s, %(file)s, 'in_progress', %(attributes)s, %(strategy)s)
ON CONFLICT (vector_store_id, file_id) DO UPDATE
SET status = 'in_progress', last_error = NULL, attributes = EXCLUDED.attributes,
    chunking_strategy = EXCLUDED.chunking_strategy, attempts = vector_store_files.attempts + 1,
    attempt_base = vector_store_files.attempts + 1, lease_expires_at = NULL, updated_at = now()"""
_GET_STORE_FILE = f"""
SELECT {_STORE_FILE_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND sf.file_id = %(file)s"""
_STORE_FILE_BY_NAME = f"""
SELECT {_STORE_FILE_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND f.filename = %(filename)s
ORDER BY sf.created_at DESC LIMIT 1"""
_LIST_STORE_FILES = f"""
SELECT {_STORE_FILE_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s ORDER BY sf.created_at, sf.file_id"""
_PAGE_STORE_FILES = f"""
SELECT {_STORE_FILE_COLUMNS} FROM vector_store_files sf JOIN files f ON f.id = sf.file_id
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s
  AND (%(status)s::text IS NULL OR sf.status = %(status)s)
  AND (%(batch)s::text IS NULL OR sf.file_id IN (SELECT file_id FROM file_batch_files
                                                 WHERE tenant_id = %(tenant)s AND batch_id = %(batch)s))
  AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_UPDATE_ATTRIBUTES = """
UPDATE vector_store_files SET attributes = %(attributes)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
# Both only apply to a row still in_progress under the caller's attempt (when given): a cancelled file, or one a
# newer attempt took over after this worker's lease expired, is left alone.
_GUARD = """ AND (%(attempt)s::int IS NULL OR (status = 'in_progress' AND attempts = %(attempt)s::int))"""
_SET_FAILED = """
UPDATE vector_store_files SET status = 'failed', last_error = %(error)s, chunk_count = 0, usage_bytes = 0,
    lease_expires_at = NULL, updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s""" + _GUARD
_SET_COMPLETED = """
UPDATE vector_store_files SET status = 'completed', last_error = NULL, chunk_count = %(chunks)s,
    usage_bytes = %(usage)s, content_sha256 = %(sha256)s, lease_expires_at = NULL, updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s""" + _GUARD


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
        return cur.execute(_INSERT_FILE, params).fetchone()


def create_object_file(conn: psycopg.Connection, tenant_id: str, *, filename: str, bucket: str, key: str,
                       size: int) -> FileRow:
    """A new file whose bytes are the S3 object ``bucket``/``key`` of ``size`` bytes (the drop folder). Its
    ``sha256`` is empty until :func:`set_digest` records what was ingested."""
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        return cur.execute(_INSERT_FILE, {"id": ids.new_id(ids.FILE), "tenant": tenant_id, "filename": filename,
                                          "purpose": "assistants", "bytes": size, "sha256": "", "content": None,
                                          "bucket": bucket, "key": key, "expires_in": None}).fetchone()


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
    """The file's bytes, from Postgres or from S3.

    Raises:
        NotFoundError: no such file for this tenant, or it has no bytes anywhere.
        BlobNotFoundError: the S3 object the row names is gone (500: storage and database disagree).
        UpstreamError: S3 failed.
    """
    row = conn.execute(_GET_CONTENT, {"tenant": tenant_id, "id": file_id}).fetchone()
    if row is not None and row[0] is not None:
        return bytes(row[0])
    if row is None or row[2] is None:
        raise NotFoundError(f"No content found for file '{file_id}'.", param="file_id")
    return _object_store(row[1]).get(row[2])


def _object_store(bucket: str):
    from chalicelib import deps
    from chalicelib.store.blobs import S3BlobStore, blob_store

    config = deps.current_settings()
    if config.bucket == bucket:
        return blob_store(config)
    return S3BlobStore(bucket, region=config.aws_region)


def attach(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *,
           attributes: dict[str, Any], chunking_strategy: dict[str, Any]) -> None:
    """Attach (or re-attach) a file to a store with status ``in_progress``."""
    conn.execute(_UPSERT_STORE_FILE, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                      "attributes": Jsonb(attributes), "strategy": Jsonb(chunking_strategy)})


def get_store_file(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> StoreFile:
    """The attachment of ``file_id`` to ``store_id``.

    Raises:
        NotFoundError: the file is not attached to that store (for this tenant).
    """
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        row = cur.execute(_GET_STORE_FILE, {"tenant": tenant_id, "store": store_id, "file": file_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
    return row


def find_store_file_by_name(conn: psycopg.Connection, tenant_id: str, store_id: str, filename: str) -> StoreFile | None:
    """The newest attachment in ``store_id`` of a file named ``filename``, or None."""
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        return cur.execute(_STORE_FILE_BY_NAME, {"tenant": tenant_id, "store": store_id, "filename": filename}).fetchone()


def list_store_files(conn: psycopg.Connection, tenant_id: str, store_id: str) -> list[StoreFile]:
    """All attachments of a store, oldest first."""
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        return cur.execute(_LIST_STORE_FILES, {"tenant": tenant_id, "store": store_id}).fetchall()


def list_store_files_page(conn: psycopg.Connection, tenant_id: str, store_id: str, page: Page, *,
                          status: str | None = None, batch_id: str | None = None) -> tuple[list[StoreFile], bool]:
    """One page of a store's attachments ``(rows, has_more)``, optionally only ``status`` ones or a batch's."""
    where, order, params = keyset(page, "sf.file_id")
    query = sql.SQL(_PAGE_STORE_FILES).format(keyset=where, order=order)
    with conn.cursor(row_factory=class_row(StoreFile)) as cur:
        rows = cur.execute(query, {"tenant": tenant_id, "store": store_id, "status": status, "batch": batch_id,
                                   **params}).fetchall()
    return trim(page, rows)


def update_attributes(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                      attributes: dict[str, Any]) -> StoreFile:
    """Replace a store file's attributes and its chunks' copies (which filters read) in one transaction.

    Raises:
        NotFoundError: the file is not attached to the store.
    """
    from chalicelib.store import chunks

    with conn.transaction():
        params = {"tenant": tenant_id, "store": store_id, "file": file_id, "attributes": Jsonb(attributes)}
        if conn.execute(_UPDATE_ATTRIBUTES, params).rowcount == 0:
            raise NotFoundError(f"No file found with id '{file_id}' in vector store '{store_id}'.", param="file_id")
        chunks.set_attributes(conn, tenant_id, store_id, file_id, attributes)
    return get_store_file(conn, tenant_id, store_id, file_id)


def mark_failed(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, code: str, message: str,
                attempt: int | None = None) -> bool:
    """Set status ``failed`` with ``last_error = {"code", "message"}`` (call inside the transaction that removed
    the file's chunks, so no failed file keeps searchable chunks). With ``attempt``, only a row still
    ``in_progress`` under that attempt changes; returns whether the row changed."""
    return conn.execute(_SET_FAILED, {"tenant": tenant_id, "store": store_id, "file": file_id, "attempt": attempt,
                                      "error": Jsonb({"code": code, "message": message})}).rowcount > 0


def mark_completed(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, chunk_count: int,
                   usage_bytes: int, content_sha256: str, attempt: int | None = None) -> bool:
    """Set status ``completed`` with the counts of the chunks just written (usage in bytes). With ``attempt``,
    only a row still ``in_progress`` under that attempt changes; returns whether the row changed."""
    return conn.execute(_SET_COMPLETED, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                         "chunks": chunk_count, "usage": usage_bytes, "sha256": content_sha256,
                                         "attempt": attempt}).rowcount > 0


_DETACH = """DELETE FROM vector_store_files
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
_DELETE_FILE = """DELETE FROM files WHERE tenant_id = %(tenant)s AND id = %(file)s
RETURNING content_bucket, content_key"""


def detach(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> bool:
    """Remove a file from a store with its chunks and their statistics, atomically; False if not attached."""
    from chalicelib.store import chunks

    params = {"tenant": tenant_id, "store": store_id, "file": file_id}
    with conn.transaction():
        chunks.lock_store(conn, tenant_id, store_id)
        chunks.delete_file_chunks(conn, tenant_id, store_id, file_id)
        removed = conn.execute(_DETACH, params).rowcount > 0
        chunks.refresh_store_usage(conn, tenant_id, store_id)
    return removed


def delete_file(conn: psycopg.Connection, tenant_id: str, file_id: str) -> bool:
    """Delete a file and detach it from every store of the tenant; False if it did not exist."""
    params = {"tenant": tenant_id, "file": file_id}
    stores = [r[0] for r in conn.execute(
        "SELECT vector_store_id FROM vector_store_files WHERE tenant_id = %(tenant)s AND file_id = %(file)s ORDER BY 1",
        params).fetchall()]
    for store_id in stores:
        detach(conn, tenant_id, store_id, file_id)
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


_EXPIRED_FILES = "SELECT tenant_id, id FROM files WHERE expires_at < now() LIMIT 1000"


def sweep_expired(conn: psycopg.Connection) -> int:
    """Delete files past their ``expires_at`` (all tenants; run as the owner), detaching them everywhere; returns
    how many were deleted."""
    rows = conn.execute(_EXPIRED_FILES).fetchall()
    return sum(delete_file(conn, tenant, file_id) for tenant, file_id in rows)
