"""Staged chunks: a version's chunk texts held in Postgres between the ingestion handler (which parses and chunks)
and the embedding handlers (which add vectors batch by batch), until the last batch moves them into ``chunks``.

Batch ``b`` of a version holds chunks ``b·n … b·n + n − 1`` for ``n = Settings.embed_batch_chunks``. Every write is
one statement whatever the number of chunks (rows travel as parallel arrays), and vectors are read in binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from chalicelib.store.chunks import Chunk, dumpable
from chalicelib.store.ingest_jobs import Job

_KEY = "tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND version = %(version)s"
_INSERT = """
INSERT INTO staged_chunks (tenant_id, vector_store_id, file_id, version, chunk_index, batch_no, text, token_count,
    char_start, char_end, page_start, page_end)
SELECT %(tenant)s, %(store)s, %(file)s, %(version)s, u.i, u.i / %(batch_chunks)s, u.t, u.n, u.cs, u.ce, u.ps, u.pe
FROM unnest(%(index)b::int4[], %(text)b::text[], %(tokens)b::int4[], %(start)b::int4[], %(end)b::int4[],
            %(page_start)b::int4[], %(page_end)b::int4[]) AS u(i, t, n, cs, ce, ps, pe)
ON CONFLICT DO NOTHING"""
_COLUMNS = "s.chunk_index, s.text, s.token_count, s.char_start, s.char_end, s.page_start, s.page_end"
# A batch's chunks with the vector the tenant's embedding cache holds for each text (SHA-256 of its UTF-8 bytes,
# chalicelib.store.embedding_cache.text_hash), or NULL: one index probe per chunk whatever the statistics say. The
# digests are computed first: under row-level security a condition calling sha256() on the cache's side could not
# use its index (not leakproof), and a plain join may scan the tenant's whole cache for each chunk.
_BATCH = f"""
WITH b AS MATERIALIZED (
    SELECT {_COLUMNS}, sha256(convert_to(s.text, 'UTF8')) AS digest FROM staged_chunks s
    WHERE s.tenant_id = %(tenant)s AND s.vector_store_id = %(store)s AND s.file_id = %(file)s
      AND s.version = %(version)s AND s.batch_no = %(batch)s)
SELECT b.chunk_index, b.text, b.token_count, b.char_start, b.char_end, b.page_start, b.page_end,
       (SELECT c.embedding FROM embedding_cache c
        WHERE c.tenant_id = %(tenant)s AND c.model = %(model)s AND c.sha256 = b.digest)
FROM b ORDER BY b.chunk_index"""
_SET_VECTORS = """
UPDATE staged_chunks s SET embedding = u.e
FROM unnest(%(index)b::int4[], %(vector)b::vector[]) AS u(i, e)
WHERE s.tenant_id = %(tenant)s AND s.vector_store_id = %(store)s AND s.file_id = %(file)s
  AND s.version = %(version)s AND s.chunk_index = u.i"""
_LOAD = f"""
SELECT {_COLUMNS}, s.embedding FROM staged_chunks s
WHERE s.tenant_id = %(tenant)s AND s.vector_store_id = %(store)s AND s.file_id = %(file)s
  AND s.version = %(version)s AND s.batch_no IS DISTINCT FROM %(except)s::int
ORDER BY s.chunk_index"""
_DISCARD = f"DELETE FROM staged_chunks WHERE {_KEY}"


def _key(job: Job) -> dict[str, Any]:
    return {"tenant": job.tenant_id, "store": job.vector_store_id, "file": job.file_id, "version": job.version}


def batch_count(chunk_count: int, batch_chunks: int) -> int:
    """Batches needed for ``chunk_count`` chunks at ``batch_chunks`` per batch (ceiling division)."""
    return -(-chunk_count // batch_chunks)


def stage(conn: psycopg.Connection, job: Job, chunks: Sequence[Chunk], *, batch_chunks: int) -> None:
    """Write the version's chunks without vectors, ``batch_chunks`` per batch (re-staging the same chunks is a
    no-op). Call inside the transaction that marks the job staged."""
    if not chunks:
        return
    conn.execute(_INSERT, {**_key(job), "batch_chunks": batch_chunks, "index": [c.index for c in chunks],
                           "text": [c.text for c in chunks], "tokens": [c.token_count for c in chunks],
                           "start": [c.char_start for c in chunks], "end": [c.char_end for c in chunks],
                           "page_start": [c.page_start for c in chunks], "page_end": [c.page_end for c in chunks]})


def batch(conn: psycopg.Connection, job: Job, batch_no: int, *, model: str) -> list[tuple[Chunk, Any]]:
    """The chunks of one batch in order, each with the vector the tenant's embedding cache holds for its text and
    ``model`` (None when not cached); empty when the version was discarded."""
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(_BATCH, {**_key(job), "batch": batch_no, "model": model}).fetchall()
    return [(_chunk(row), row[7]) for row in rows]


def set_vectors(conn: psycopg.Connection, job: Job, vectors: Sequence[tuple[int, Any]]) -> None:
    """Store ``(chunk_index, vector)`` pairs on the staged chunks (one statement)."""
    if vectors:
        conn.execute(_SET_VECTORS, {**_key(job), "index": [i for i, _ in vectors],
                                    "vector": [dumpable(v) for _, v in vectors]})


def load(conn: psycopg.Connection, job: Job, *, except_batch: int | None = None) -> tuple[list[Chunk], list[Any]]:
    """The version's staged chunks with their vectors, in order, leaving out batch ``except_batch`` (whose vectors
    the caller holds): ``(chunks, vectors)``.

    Raises:
        ValueError: a chunk has no vector yet (a programming error: call once every other batch has landed).
    """
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(_LOAD, {**_key(job), "except": except_batch}).fetchall()
    chunks, vectors = [], []
    for row in rows:
        if row[7] is None:
            raise ValueError(f"staged chunk {row[0]} of {job.file_id} v{job.version} has no vector")
        chunks.append(_chunk(row))
        vectors.append(row[7])
    return chunks, vectors


def discard(conn: psycopg.Connection, job: Job) -> None:
    """Delete the version's staged chunks."""
    conn.execute(_DISCARD, _key(job))


def _chunk(row: Sequence[Any]) -> Chunk:
    index, text, tokens, start, end, page_start, page_end = row[:7]
    return Chunk(index=index, text=text, token_count=tokens, char_start=start, char_end=end, page_start=page_start,
                 page_end=page_end)
