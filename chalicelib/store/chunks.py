"""Chunk rows: a file's chunks written (one statement) and removed; the BM25 statistics (``keyword_stats``
document frequencies, store chunk count and total keyword length) and the impact-ordered postings follow them by
trigger in the same transaction (migrations/0009_keyword_postings.sql), so they are always exact. For a store
whose vectors live in Qdrant the same triggers queue the file for the Qdrant sync instead of writing postings
(migrations/0023_vector_backends.sql)."""

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

# FOR NO KEY UPDATE serialises the store's writers without blocking inserts that merely reference the store
# (an attachment, a chunk, a posting take FOR KEY SHARE on it through their foreign keys): an attach into a store
# no longer waits for another file's chunks to be written.
_LOCK_STORE = "SELECT 1 FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(store)s FOR NO KEY UPDATE"
_DELETE = """DELETE FROM chunks WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s
    AND file_id = ANY(%(files)s::text[])"""
# One statement per file: the rows arrive as parallel arrays (binary parameters), the policies check them, the
# tsvector is computed once per row and BM25's |d| from it, and the attributes come from the attachment row, which
# the transition holds locked (an update made while the file was processed reaches its chunks). The rows of a store
# on a backend that keeps its own copy hold no vector (migrations 0023, 0026: it and the embedding cache hold it).
_INSERT = """
INSERT INTO chunks (tenant_id, vector_store_id, file_id, chunk_index, text, token_count, char_start, char_end,
    page_start, page_end, attributes, embedding_dim, embedding, keywords, keyword_length)
SELECT %(tenant)s, %(store)s, %(file)s, r.i, r.t, r.n, r.cs, r.ce, r.ps, r.pe, sf.attributes, %(dim)s,
       CASE WHEN engram_backend_in_postgres(vs.backend) THEN r.e END, r.v, engram_tsvector_length(r.v)
FROM (SELECT u.*, to_tsvector('english', u.t) AS v
      FROM unnest(%(index)b::int4[], %(text)b::text[], %(tokens)b::int4[], %(start)b::int4[], %(end)b::int4[],
                  %(page_start)b::int4[], %(page_end)b::int4[], %(vector)b::vector[])
           AS u(i, t, n, cs, ce, ps, pe, e)) AS r,
     vector_store_files sf, vector_stores vs
WHERE sf.tenant_id = %(tenant)s AND sf.vector_store_id = %(store)s AND sf.file_id = %(file)s
  AND vs.tenant_id = %(tenant)s AND vs.id = %(store)s"""
# The store's usage follows its files' by difference (exact: every change of a file's usage_bytes happens in a
# transition holding the store lock); ``touch`` also records activity.
_ADD_USAGE = """
UPDATE vector_stores SET usage_bytes = usage_bytes + %(delta)s,
    last_active_at = CASE WHEN %(touch)s THEN now() ELSE last_active_at END
WHERE tenant_id = %(tenant)s AND id = %(store)s"""
_SET_ATTRIBUTES = """
UPDATE chunks SET attributes = %(attributes)s
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""


def usage_bytes(chunks: Sequence[Chunk], dim: int) -> int:
    """Bytes the chunks occupy: UTF-8 text plus ``dim`` × 4 bytes of vector each."""
    return sum(len(c.text.encode("utf-8")) + dim * BYTES_PER_DIMENSION for c in chunks)


def lock_store(conn: psycopg.Connection, tenant_id: str, store_id: str) -> None:
    """Serialise writers of one store for the rest of the transaction (keeps BM25 statistics and usage race-free).
    Inserts that only reference the store (attachments, chunks) are not blocked."""
    conn.execute(_LOCK_STORE, {"tenant": tenant_id, "store": store_id})


def delete_file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_ids: Sequence[str]) -> None:
    """Remove the chunks of ``file_ids`` from a store (one statement). Their BM25 statistics and postings go with
    them (the ``chunks_deleted`` trigger, same transaction). Call inside a transaction that has taken
    :func:`lock_store`."""
    # Planned with its values each time (prepare=False), never as a cached generic plan: while the table's
    # statistics lag behind a growing store (a new deployment, a bulk load), the generic plan for these parameters
    # ANDs the tenant and store bitmaps and reads every heap page of the store's chunks to filter them by file
    # (1,167 pages per file at 2,343 chunks), where the chunks_scope index finds the file's rows directly. Planning
    # costs ~0.15 ms.
    conn.execute(_DELETE, {"tenant": tenant_id, "store": store_id, "files": list(file_ids)}, prepare=False)


def insert_file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                       chunks: Sequence[Chunk], vectors: Sequence[Any], *, dim: int) -> None:
    """Write ``chunks`` with their ``vectors`` (n × ``dim``: numpy arrays, pgvector ``Vector`` or float lists) in
    one statement, with the attachment's attributes; their BM25 statistics and postings follow (the
    ``chunks_inserted`` trigger, same transaction). Call inside a transaction that has taken :func:`lock_store`,
    holds the attachment row and deleted the file's previous chunks.

    Raises:
        ValueError: ``len(chunks) != len(vectors)`` (a programming error, not a client one).
    """
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if not chunks:
        return
    conn.execute(_INSERT, {
        "tenant": tenant_id, "store": store_id, "file": file_id, "dim": dim,
        "index": [c.index for c in chunks], "text": [c.text for c in chunks],
        "tokens": [c.token_count for c in chunks], "start": [c.char_start for c in chunks],
        "end": [c.char_end for c in chunks], "page_start": [c.page_start for c in chunks],
        "page_end": [c.page_end for c in chunks], "vector": [dumpable(v) for v in vectors]})


def add_usage(conn: psycopg.Connection, tenant_id: str, store_id: str, delta: int, *, touch: bool) -> None:
    """Add ``delta`` bytes to the store's ``usage_bytes`` (its files' usage changed by that much); ``touch``: also
    record activity (chunks were written)."""
    conn.execute(_ADD_USAGE, {"tenant": tenant_id, "store": store_id, "delta": delta, "touch": touch})


def set_attributes(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str,
                   attributes: dict[str, Any]) -> None:
    """Copy a file's new attributes onto its chunks (filters read chunk attributes)."""
    conn.execute(_SET_ATTRIBUTES, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                   "attributes": Jsonb(attributes)})


_FILE_SPANS = """SELECT char_start, char_end, text FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s ORDER BY chunk_index"""


def file_text(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> str:
    """The parsed text of a file, put back together from its chunks (no parsing: the API function has no
    parsers when deployed, and re-reading a large PDF in a request would be slow): each chunk is
    ``text[char_start:char_end]`` of the parsed text, so overlapping chunks are laid over each other. What no chunk
    holds — the separator between chunks that do not overlap, whitespace or a sentence's closing quote — becomes
    one space (a one-character gap) or a blank line; leading and trailing whitespace is not kept. ``""`` for a file
    without chunks (failed, empty, or not attached)."""
    rows = conn.execute(_FILE_SPANS, {"tenant": tenant_id, "store": store_id, "file": file_id}).fetchall()
    parts: list[str] = []
    position: int | None = None
    for start, end, text in rows:
        if position is None:
            position = start
        elif start > position:
            parts.append(" " if start - position == 1 else "\n\n")
            position = start
        if end > position:
            parts.append(text[position - start:])
            position = end
    return "".join(parts)


def dumpable(vector: Any) -> Any:
    """A vector pgvector's adapter can send: numpy arrays and ``Vector`` as they are, a plain list or tuple (HTTP
    embedders) as a ``Vector`` (no numpy: the Lambda packages leave it out)."""
    if isinstance(vector, (list, tuple)):
        from pgvector import Vector

        return Vector([float(x) for x in vector])
    return vector


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as stored (no vector): its ``index`` in the file, ``text``, ``token_count`` (embedder tokens),
    character offsets into the parsed text, pages 1-based or None."""

    index: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None


# A file's chunks in order after a chunk index (chunks_scope: vector_store_id, file_id, chunk_index).
_FILE_CHUNKS = """SELECT chunk_index, text, token_count, char_start, char_end, page_start, page_end FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND chunk_index > %(after)s
ORDER BY chunk_index LIMIT %(limit)s"""


def file_chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, after: int = -1,
                limit: int = 20) -> tuple[list[StoredChunk], bool]:
    """One page of a file's chunks in file order, those after chunk index ``after``: ``(chunks, has_more)``
    (``[]`` for a file without chunks: failed, empty, or not attached)."""
    rows = conn.execute(_FILE_CHUNKS, {"tenant": tenant_id, "store": store_id, "file": file_id, "after": after,
                                       "limit": limit + 1}).fetchall()
    return [StoredChunk(*row) for row in rows[:limit]], len(rows) > limit
