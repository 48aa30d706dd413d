"""File objects (OpenAI Files API) and their attachments to vector stores (``vector_store.file``)."""

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
INSERT INTO files (id, tenant_id, filename, purpose, bytes, sha256, content, expires_at)
VALUES (%(id)s, %(tenant)s, %(filename)s, %(purpose)s, %(bytes)s, %(sha256)s, %(content)s,
        CASE WHEN %(expires_in)s::float8 IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(expires_in)s::float8) END)
RETURNING {_FILE_COLUMNS}"""
_REPLACE_CONTENT = f"""
UPDATE files SET content = %(content)s, bytes = %(bytes)s, sha256 = %(sha256)s
WHERE tenant_id = %(tenant)s AND id = %(id)s RETURNING {_FILE_COLUMNS}"""
_LIVE = "(expires_at IS NULL OR expires_at > now())"  # expired files are gone to callers before the sweep runs
_GET_FILE = f"SELECT {_FILE_COLUMNS} FROM files WHERE tenant_id = %(tenant)s AND id = %(id)s AND {_LIVE}"
_GET_CONTENT = f"SELECT content FROM files WHERE tenant_id = %(tenant)s AND id = %(id)s AND {_LIVE}"
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
    chunking_strategy = EXCLUDED.chunking_strategy, attempt_base = vector_store_files.attempts,
    lease_expires_at = NULL, updated_at = now()"""
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


def create_file(conn: psycopg.Connection, tenant_id: str, *, filename: str, data: bytes,
                purpose: str = "assistants", expires_in_s: float | None = None) -> FileRow:
    """Store ``data`` (bytes) as a new file of the tenant; ``expires_in_s`` (seconds from now) sets ``expires_at``."""
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        return cur.execute(_INSERT_FILE, {"id": ids.new_id(ids.FILE), "tenant": tenant_id, "filename": filename,
                                          "purpose": purpose, "bytes": len(data), "sha256": sha256_hex(data),
                                          "content": data, "expires_in": expires_in_s}).fetchone()


def list_files(conn: psycopg.Connection, tenant_id: str, page: Page, *,
               purpose: str | None = None) -> tuple[list[FileRow], bool]:
    """One page of the tenant's live files: ``(rows, has_more)``, optionally only those with ``purpose``."""
    where, order, params = keyset(page, "id")
    query = sql.SQL(_LIST_FILES).format(keyset=where, order=order)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        rows = cur.execute(query, {"tenant": tenant_id, "purpose": purpose, **params}).fetchall()
    return trim(page, rows)


def replace_content(conn: psycopg.Connection, tenant_id: str, file_id: str, data: bytes) -> FileRow:
    """Overwrite a file's bytes (a changed local file re-ingested under the same id).

    Raises:
        NotFoundError: no such file for this tenant.
    """
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        row = cur.execute(_REPLACE_CONTENT, {"tenant": tenant_id, "id": file_id, "content": data,
                                             "bytes": len(data), "sha256": sha256_hex(data)}).fetchone()
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
    """The file's bytes.

    Raises:
        NotFoundError: no such file for this tenant, or its bytes are not held in the database.
    """
    row = conn.execute(_GET_CONTENT, {"tenant": tenant_id, "id": file_id}).fetchone()
    if row is None or row[0] is None:
        raise NotFoundError(f"No content found for file '{file_id}'.", param="file_id")
    return bytes(row[0])


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
_DELETE_FILE = "DELETE FROM files WHERE tenant_id = %(tenant)s AND id = %(file)s"


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
    return conn.execute(_DELETE_FILE, params).rowcount > 0


_EXPIRED_FILES = "SELECT tenant_id, id FROM files WHERE expires_at < now() LIMIT 1000"


def sweep_expired(conn: psycopg.Connection) -> int:
    """Delete files past their ``expires_at`` (all tenants; run as the owner), detaching them everywhere; returns
    how many were deleted."""
    rows = conn.execute(_EXPIRED_FILES).fetchall()
    return sum(delete_file(conn, tenant, file_id) for tenant, file_id in rows)
