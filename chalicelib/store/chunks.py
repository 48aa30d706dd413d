"""Chunk rows: a file's chunks written by binary COPY and removed; the BM25 statistics (``keyword_stats``
document frequencies, store chunk count and total keyword length) and the impact-ordered postings follow them by
trigger in the same transaction (migrations/0009_keyword_postings.sql), so they are always exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document: ``text == document.text[char_start:char_end]``, ``token_count`` in embedder
    tokens, ``index`` 0-based in document order, pages 1-based (None for unpaged documents)."""

    index: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    page_start: int | None = None
    page_end: int | None = None


# Bytes a vector occupies per dimension (float4), for usage_bytes.
BYTES_PER_DIMENSION = 4

_LOCK_STORE = "SELECT id FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(store)s FOR UPDATE"
_DELETE = """DELETE FROM chunks WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
# Postgres refuses COPY FROM into a table with row-level security for a role it applies to, so rows are copied
# (binary) into a transaction-local staging table and moved with one INSERT ... SELECT, which the policies check.
_CHUNK_COLUMNS = """tenant_id, vector_store_id, file_id, chunk_index, text, token_count, char_start, char_end,
    page_start, page_end, attributes, embedding_dim, embedding"""
_STAGE = f"""CREATE TEMPORARY TABLE IF NOT EXISTS chunks_staging ON COMMIT DELETE ROWS AS
    SELECT {_CHUNK_COLUMNS} FROM chunks WITH NO DATA"""
_COPY = f"COPY chunks_staging ({_CHUNK_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
# The tsvector is computed once per row, here; its length (BM25's |d|) from it.
_MOVE = f"""INSERT INTO chunks ({_CHUNK_COLUMNS}, keywords, keyword_length)
SELECT {_CHUNK_COLUMNS}, v, engram_tsvector_length(v)
FROM (SELECT *, to_tsvector('english', text) AS v FROM chunks_staging) AS s;
TRUNCATE chunks_staging"""
_COPY_TYPES = ["text", "text", "text", "int4", "text", "int4", "int4", "int4", "int4", "int4", "jsonb", "int4",
               "vector"]
_TOUCH_STORE = "UPDATE vector_stores SET last_active_at = now() WHERE tenant_id = %(tenant)s AND id = %(store)s"
_REFRESH_USAGE = """
UPDATE vector_stores SET usage_bytes = (SELECT coalesce(sum(usage_bytes), 0) FROM vector_store_files
                                        WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s)
WHERE tenant_id = %(tenant)s AND id = %(store)s"""
_SET_ATTRIBUTES = """
UPDATE chunks SET attributes = %(attributes)s
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""


def usage_bytes(chunks: Sequence[Chunk], dim: int) -> int:
    """Bytes the chunks occupy: UTF-8 text plus ``dim`` × 4 bytes of vector each."""
    return sum(len(c.text.encode("utf-8")) + dim * BYTES_PER_DIMENSION for c in chunks)


def lock_store(conn: psycopg.Connection, tenant_id: str, store_id: str) -> None:
    """Serialise writers of one store for the rest of the transaction (keeps BM25 statistics race-free)."""
    conn.execute(_LOCK_STORE, {"tenant": tenant_id, "store": store_id})


def delete_file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> int:
    """Remove a file's chunks from a store; returns chunks removed. Their BM25 statistics and postings go with
    them (the ``chunks_deleted`` trigger, same transaction). Call inside a transaction that has taken
    :func:`lock_store`."""
    return conn.execute(_DELETE, {"tenant": tenant_id, "store": store_id, "file": file_id}).rowcount


def insert_file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                       chunks: Sequence[Chunk], vectors: Sequence[Any], *, dim: int,
                       attributes: dict[str, Any]) -> None:
    """Write ``chunks`` with their ``vectors`` (n × ``dim``) by binary COPY; their BM25 statistics and postings
    follow (the ``chunks_inserted`` trigger, same transaction). Call inside a transaction that has taken
    :func:`lock_store` and deleted the file's previous chunks.

    Raises:
        ValueError: ``len(chunks) != len(vectors)`` (a programming error, not a client one).
    """
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    params = {"tenant": tenant_id, "store": store_id, "file": file_id}
    attrs = Jsonb(attributes)
    conn.execute(_STAGE)
    with conn.cursor() as cur, cur.copy(_COPY) as copy:
        copy.set_types(_COPY_TYPES)
        for chunk, vector in zip(chunks, vectors):
            copy.write_row((tenant_id, store_id, file_id, chunk.index, chunk.text, chunk.token_count,
                            chunk.char_start, chunk.char_end, chunk.page_start, chunk.page_end, attrs, dim, vector))
    conn.execute(_MOVE)
    if chunks:
        conn.execute(_TOUCH_STORE, params)


def refresh_store_usage(conn: psycopg.Connection, tenant_id: str, store_id: str) -> None:
    """Recompute the store's ``usage_bytes`` (bytes) from its files' after their status changed."""
    conn.execute(_REFRESH_USAGE, {"tenant": tenant_id, "store": store_id})


def set_attributes(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                   attributes: dict[str, Any]) -> None:
    """Copy a file's new attributes onto its chunks (filters read chunk attributes)."""
    conn.execute(_SET_ATTRIBUTES, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                   "attributes": Jsonb(attributes)})
