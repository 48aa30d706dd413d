"""File objects (OpenAI Files API) and their attachments to vector stores (``vector_store.file``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.errors import NotFoundError


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
INSERT INTO files (id, tenant_id, filename, purpose, bytes, sha256, content)
VALUES (%(id)s, %(tenant)s, %(filename)s, %(purpose)s, %(bytes)s, %(sha256)s, %(content)s)
RETURNING {_FILE_COLUMNS}"""
_REPLACE_CONTENT = f"""
UPDATE files SET content = %(content)s, bytes = %(bytes)s, sha256 = %(sha256)s
WHERE tenant_id = %(tenant)s AND id = %(id)s RETURNING {_FILE_COLUMNS}"""
_GET_FILE = f"SELECT {_FILE_COLUMNS} FROM files WHERE tenant_id = %(tenant)s AND id = %(id)s"
_GET_CONTENT = "SELECT content FROM files WHERE tenant_id = %(tenant)s AND id = %(id)s"

_STORE_FILE_COLUMNS = """sf.vector_store_id, sf.file_id, f.filename, sf.status, sf.last_error, sf.attributes,
    sf.chunking_strategy, sf.content_sha256, sf.chunk_count, sf.usage_bytes, sf.created_at, sf.updated_at"""
_UPSERT_STORE_FILE = """
INSERT INTO vector_store_files (tenant_id, vector_store_id, file_id, status, attributes, chunking_strategy)
VALUES (%(tenant)s, %(store)s, %(file)s, 'in_progress', %(attributes)s, %(strategy)s)
ON CONFLICT (vector_store_id, file_id) DO UPDATE
SET status = 'in_progress', last_error = NULL, attributes = EXCLUDED.attributes,
    chunking_strategy = EXCLUDED.chunking_strategy, updated_at = now()"""
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
_SET_FAILED = """
UPDATE vector_store_files SET status = 'failed', last_error = %(error)s, chunk_count = 0, usage_bytes = 0,
    updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
_SET_COMPLETED = """
UPDATE vector_store_files SET status = 'completed', last_error = NULL, chunk_count = %(chunks)s,
    usage_bytes = %(usage)s, content_sha256 = %(sha256)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def create_file(conn: psycopg.Connection, tenant_id: str, *, filename: str, data: bytes,
                purpose: str = "assistants") -> FileRow:
    """Store ``data`` (bytes) as a new file of the tenant."""
    from chalicelib.store.vector_stores import ensure_tenant

    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(FileRow)) as cur:
        return cur.execute(_INSERT_FILE, {"id": ids.new_id(ids.FILE), "tenant": tenant_id, "filename": filename,
                                          "purpose": purpose, "bytes": len(data), "sha256": sha256_hex(data),
                                          "content": data}).fetchone()


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


def mark_failed(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, code: str, message: str) -> None:
    """Set status ``failed`` with ``last_error = {"code", "message"}`` (call inside the transaction that removed
    the file's chunks, so no failed file keeps searchable chunks)."""
    conn.execute(_SET_FAILED, {"tenant": tenant_id, "store": store_id, "file": file_id,
                               "error": Jsonb({"code": code, "message": message})})


def mark_completed(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, chunk_count: int,
                   usage_bytes: int, content_sha256: str) -> None:
    """Set status ``completed`` with the counts of the chunks just written (usage in bytes)."""
    conn.execute(_SET_COMPLETED, {"tenant": tenant_id, "store": store_id, "file": file_id, "chunks": chunk_count,
                                  "usage": usage_bytes, "sha256": content_sha256})


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
