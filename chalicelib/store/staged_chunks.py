"""Staged chunks: a version's chunk texts held in Postgres between the ingestion handler (which parses and chunks)
and the embedding handlers (which add vectors batch by batch), until the last batch moves them into ``chunks``.

Batch ``b`` of a version holds chunks ``b·n … b·n + n − 1`` for ``n = Settings.embed_batch_chunks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from chalicelib.store.chunks import Chunk
from chalicelib.store.ingest_jobs import Job

_KEY = "tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND version = %(version)s"
_INSERT = """
INSERT INTO staged_chunks (tenant_id, vector_store_id, file_id, version, chunk_index, batch_no, text, token_count,
    char_start, char_end, page_start, page_end)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
_BATCH = f"SELECT chunk_index, text FROM staged_chunks WHERE {_KEY} AND batch_no = %(batch)s ORDER BY chunk_index"
_SET_VECTOR = f"UPDATE staged_chunks SET embedding = %(vector)s WHERE {_KEY} AND chunk_index = %(index)s"
_LOAD = f"""
SELECT chunk_index, text, token_count, char_start, char_end, page_start, page_end, embedding FROM staged_chunks
WHERE {_KEY} ORDER BY chunk_index"""
_DISCARD = f"DELETE FROM staged_chunks WHERE {_KEY}"


def _key(job: Job) -> dict[str, Any]:
    return {"tenant": job.tenant_id, "store": job.vector_store_id, "file": job.file_id, "version": job.version}


def batch_count(chunk_count: int, batch_chunks: int) -> int:
    """Batches needed for ``chunk_count`` chunks at ``batch_chunks`` per batch (ceiling division)."""
    return -(-chunk_count // batch_chunks)


def stage(conn: psycopg.Connection, job: Job, chunks: Sequence[Chunk], *, batch_chunks: int) -> None:
    """Write the version's chunks without vectors, ``batch_chunks`` per batch (re-staging the same chunks is a
    no-op). Call inside the transaction that marks the job staged."""
    rows = [(job.tenant_id, job.vector_store_id, job.file_id, job.version, c.index, c.index // batch_chunks, c.text,
             c.token_count, c.char_start, c.char_end, c.page_start, c.page_end) for c in chunks]
    with conn.cursor() as cur:
        cur.executemany(_INSERT, rows)


def batch_texts(conn: psycopg.Connection, job: Job, batch_no: int) -> list[tuple[int, str]]:
    """``(chunk_index, text)`` of one batch, in chunk order (empty when the version was discarded)."""
    return [(int(i), t) for i, t in conn.execute(_BATCH, {**_key(job), "batch": batch_no}).fetchall()]


def set_vectors(conn: psycopg.Connection, job: Job, vectors: Sequence[tuple[int, Any]]) -> None:
    """Store ``(chunk_index, vector)`` pairs on the staged chunks."""
    key = _key(job)
    with conn.cursor() as cur:
        cur.executemany(_SET_VECTOR, [{**key, "index": index, "vector": _dumpable(vector)}
                                      for index, vector in vectors])


def _dumpable(vector: Any) -> Any:
    """pgvector's adapter dumps numpy arrays and its ``Vector``; a plain list or tuple (HTTP embedders) becomes a
    ``Vector`` (no numpy: the Lambda packages leave it out)."""
    if isinstance(vector, (list, tuple)):
        from pgvector import Vector

        return Vector([float(x) for x in vector])
    return vector


def load(conn: psycopg.Connection, job: Job) -> tuple[list[Chunk], list[Any]]:
    """Every staged chunk of the version with its vector, in order: ``(chunks, vectors)``.

    Raises:
        ValueError: a chunk has no vector yet (a programming error: call once every batch has landed).
    """
    chunks, vectors = [], []
    for index, text, tokens, start, end, page_start, page_end, vector in conn.execute(_LOAD, _key(job)).fetchall():
        if vector is None:
            raise ValueError(f"staged chunk {index} of {job.file_id} v{job.version} has no vector")
        chunks.append(Chunk(index=index, text=text, token_count=tokens, char_start=start, char_end=end,
                            page_start=page_start, page_end=page_end))
        vectors.append(vector)
    return chunks, vectors


def discard(conn: psycopg.Connection, job: Job) -> None:
    """Delete the version's staged chunks."""
    conn.execute(_DISCARD, _key(job))
