"""Chunk rows: atomic replacement of a file's chunks with binary COPY, keeping the BM25 statistics
(``keyword_stats`` document frequencies, store chunk count and total keyword length) exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chalicelib.store.db import one


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
_OLD_TOTALS = """
SELECT count(*), coalesce(sum(keyword_length), 0) FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
_DELETE_WITH_STATS = """
WITH old AS (
    DELETE FROM chunks WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s
    RETURNING keywords
), terms AS (
    SELECT t.lexeme, count(*) AS n FROM old, unnest(old.keywords) AS t GROUP BY t.lexeme
)
UPDATE keyword_stats k SET df = k.df - terms.n FROM terms
WHERE k.vector_store_id = %(store)s AND k.lexeme = terms.lexeme"""
# Postgres refuses COPY FROM into a table with row-level security for a role it applies to, so rows are copied
# (binary) into a transaction-local staging table and moved with one INSERT ... SELECT, which the policies check.
_CHUNK_COLUMNS = """tenant_id, vector_store_id, file_id, chunk_index, text, token_count, char_start, char_end,
    page_start, page_end, attributes, embedding_dim, embedding"""
_STAGE = f"""CREATE TEMPORARY TABLE IF NOT EXISTS chunks_staging ON COMMIT DELETE ROWS AS
    SELECT {_CHUNK_COLUMNS} FROM chunks WITH NO DATA"""
_COPY = f"COPY chunks_staging ({_CHUNK_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)"
_MOVE = f"""INSERT INTO chunks ({_CHUNK_COLUMNS}) SELECT {_CHUNK_COLUMNS} FROM chunks_staging;
TRUNCATE chunks_staging"""
_COPY_TYPES = ["text", "text", "text", "int4", "text", "int4", "int4", "int4", "int4", "int4", "jsonb", "int4",
               "vector"]
_ADD_STATS = """
INSERT INTO keyword_stats (vector_store_id, lexeme, df)
SELECT %(store)s, t.lexeme, count(*) FROM chunks c, unnest(c.keywords) AS t
WHERE c.tenant_id = %(tenant)s AND c.vector_store_id = %(store)s AND c.file_id = %(file)s
GROUP BY t.lexeme ORDER BY t.lexeme
ON CONFLICT (vector_store_id, lexeme) DO UPDATE SET df = keyword_stats.df + EXCLUDED.df"""
_NEW_KEYWORD_LENGTH = """
SELECT coalesce(sum(keyword_length), 0) FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
_UPDATE_STORE = """
UPDATE vector_stores SET chunk_count = chunk_count + %(d_chunks)s, keyword_length = keyword_length + %(d_length)s,
    last_active_at = now()
WHERE tenant_id = %(tenant)s AND id = %(store)s"""
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
    """Remove a file's chunks from a store and their statistics; returns chunks removed. Call inside a
    transaction that has taken :func:`lock_store`."""
    params = {"tenant": tenant_id, "store": store_id, "file": file_id}
    count, length = one(conn.execute(_OLD_TOTALS, params))
    if count:
        conn.execute(_DELETE_WITH_STATS, params)
        conn.execute(_UPDATE_STORE, {**params, "d_chunks": -count, "d_length": -length})
    return int(count)


def insert_file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                       chunks: Sequence[Chunk], vectors: Sequence[Any], *, dim: int,
                       attributes: dict[str, Any]) -> None:
    """Write ``chunks`` with their ``vectors`` (n × ``dim``) by binary COPY and add their statistics. Call inside
    a transaction that has taken :func:`lock_store` and deleted the file's previous chunks.

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
        conn.execute(_ADD_STATS, params)
        (length,) = one(conn.execute(_NEW_KEYWORD_LENGTH, params))
        conn.execute(_UPDATE_STORE, {**params, "d_chunks": len(chunks), "d_length": length})


def refresh_store_usage(conn: psycopg.Connection, tenant_id: str, store_id: str) -> None:
    """Recompute the store's ``usage_bytes`` (bytes) from its files' after their status changed."""
    conn.execute(_REFRESH_USAGE, {"tenant": tenant_id, "store": store_id})


def set_attributes(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                   attributes: dict[str, Any]) -> None:
    """Copy a file's new attributes onto its chunks (filters read chunk attributes)."""
    conn.execute(_SET_ATTRIBUTES, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                   "attributes": Jsonb(attributes)})
