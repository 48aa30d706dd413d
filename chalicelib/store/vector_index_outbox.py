"""The vector backends' sync queue (``vector_index_outbox``, migrations 0023 and 0026): the files whose chunks
changed in stores on a backend that keeps its own copy of their candidates (queued by trigger in the changing
transaction, with that backend's name), and such stores deleted or moved away, with what the sync
(:mod:`chalicelib.search.backends.sync`) reads of them. One entry per file (``file_id`` ``''``: a whole store's
points to remove); a change to a queued file moves it back (a new ``seq``), so an entry removed after a sync never
hides a change made during it."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import psycopg

__all__ = ["ChunkRow", "Claim", "Entry", "StoreRow", "chunk_ids", "chunks", "claim", "done", "failed", "lock",
           "chunks_and_avgdl", "external_dimensions", "pending", "pending_count", "store", "store_locked", "written"]

_WHERE = """(%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
  AND (%(store)s::text IS NULL OR vector_store_id = %(store)s)"""
_PENDING = f"""
SELECT tenant_id, vector_store_id, file_id, seq, embedding_dim, backend FROM vector_index_outbox
WHERE {_WHERE} AND (%(file)s::text IS NULL OR file_id = %(file)s)
ORDER BY seq LIMIT %(limit)s"""
_COUNT = f"SELECT count(*) FROM vector_index_outbox WHERE {_WHERE}"
# Inside the entry's transaction: no other sync works on this file (a transaction-level advisory lock, so a
# trigger queueing the file again is never blocked), then the entry as it is now.
_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%(key)s)"
_LOCK = "SELECT pg_advisory_xact_lock(%(key)s) IS NOT NULL"
# A sync's transaction commits without waiting for the WAL flush: everything it records (an entry removed, a failure
# counted) is safe to lose in a crash — the entry is synced again, idempotently — and it saves a flush per file.
_NOT_DURABLE = ", set_config('synchronous_commit', 'off', true) IS NOT NULL"
# Inside the transaction about to swap a file's chunks in: the store's row and, when its backend keeps its own copy
# (the triggers' test, migration 0026), the file's sync lock — one statement (CASE evaluates the lock only then).
_STORE_LOCKED = """SELECT backend, embedding_model, embedding_dim, chunk_count, keyword_length,
       CASE WHEN engram_backend_in_postgres(backend) THEN false ELSE pg_advisory_xact_lock(%(key)s) IS NOT NULL END
FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(store)s"""
_SEQ = """SELECT seq, written_seq FROM vector_index_outbox
WHERE vector_store_id = %(store)s AND file_id = %(file)s"""
# The swap's transaction wrote the points of the entry as it is at seq (migration 0024).
_WRITTEN = """UPDATE vector_index_outbox SET written_seq = seq
WHERE vector_store_id = %(store)s AND file_id = %(file)s RETURNING seq"""
_DONE = "DELETE FROM vector_index_outbox WHERE vector_store_id = %(store)s AND file_id = %(file)s AND seq <= %(seq)s"
_FAILED = """UPDATE vector_index_outbox SET attempts = attempts + 1, last_error = left(%(error)s, 500)
WHERE vector_store_id = %(store)s AND file_id = %(file)s"""
_STORE = """SELECT backend, embedding_model, embedding_dim, chunk_count, keyword_length FROM vector_stores
WHERE tenant_id = %(tenant)s AND id = %(store)s"""
# A file's chunks with their lexemes and term frequencies (the tsvector's positions; a lexeme without positions
# counts once), for the points' sparse vectors, and each one's vector from the tenant's embedding cache (keyed by
# the SHA-256 of its UTF-8 text, as chalicelib.store.embedding_cache.text_hash) when a model is given.
_CHUNKS = """
SELECT c.id, c.text, c.keyword_length, c.attributes,
       coalesce((SELECT array_agg(t.lexeme ORDER BY t.lexeme) FROM unnest(c.keywords) AS t), '{}'),
       coalesce((SELECT array_agg(coalesce(array_length(t.positions, 1), 1) ORDER BY t.lexeme)
                 FROM unnest(c.keywords) AS t), '{}'),
       (SELECT e.embedding FROM embedding_cache e  -- one primary-key lookup per chunk (a join may scan the cache)
        WHERE e.tenant_id = c.tenant_id AND e.model = %(model)s AND e.sha256 = sha256(convert_to(c.text, 'UTF8'))),
       (SELECT greatest(s.keyword_length::float8 / greatest(s.chunk_count, 1), 1.0) FROM vector_stores s
        WHERE s.tenant_id = %(tenant)s AND s.id = %(store)s)
FROM chunks c
WHERE c.tenant_id = %(tenant)s AND c.vector_store_id = %(store)s AND c.file_id = %(file)s ORDER BY c.chunk_index"""
_CHUNK_IDS = """SELECT id FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s ORDER BY chunk_index"""

# Namespace of the advisory locks (the first argument of the two-key form would collide with nothing of ours
# either way; the one-key form is used with this constant mixed in).
_LOCK_SALT = b"engram-vector-index:"


@dataclass(frozen=True, slots=True)
class Entry:
    """A queued file (``file_id`` ``''``: a whole store's points, of ``embedding_dim`` floats) and the
    ``backend`` whose points it concerns."""

    tenant_id: str
    vector_store_id: str
    file_id: str
    seq: int
    embedding_dim: int | None
    backend: str


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed entry as it is now: its ``seq``, and whether the swap that queued it already wrote its points
    (``written``: only the older version's points are left to delete)."""

    seq: int
    written: bool


@dataclass(frozen=True, slots=True)
class StoreRow:
    """What the sync needs of a store: its backend, embedding model and dimension, chunk count and total length
    (lexemes)."""

    backend: str
    embedding_model: str
    embedding_dim: int
    chunk_count: int
    keyword_length: int

    @property
    def avgdl(self) -> float:
        """The average chunk length in lexemes (at least 1)."""
        return max(self.keyword_length / max(self.chunk_count, 1), 1.0)


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One chunk as the sync reads it: id, text, length (lexemes), attributes, ``(lexeme, tf)`` pairs and its
    ``vector`` from the embedding cache (None: not asked for, or not cached)."""

    id: int
    text: str
    length: int
    attributes: dict[str, Any]
    terms: list[tuple[str, int]]
    vector: Any = None


def pending(conn: psycopg.Connection, *, limit: int, tenant_id: str | None = None, store_id: str | None = None,
            file_id: str | None = None) -> list[Entry]:
    """Up to ``limit`` queued entries, oldest change first, optionally of one tenant, store or file."""
    rows = conn.execute(_PENDING, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                   "limit": limit}).fetchall()
    return [Entry(*row) for row in rows]


def pending_count(conn: psycopg.Connection, *, tenant_id: str | None = None, store_id: str | None = None) -> int:
    """How many entries are queued (one tenant's or store's when given)."""
    return int(conn.execute(_COUNT, {"tenant": tenant_id, "store": store_id}).fetchone()[0])  # type: ignore[index]


def _key(store_id: str, file_id: str) -> int:
    return zlib.crc32(_LOCK_SALT + f"{store_id}/{file_id}".encode()) - 2**31


def lock(conn: psycopg.Connection, store_id: str, file_id: str, *, wait: bool = True, durable: bool = True) -> bool:
    """Inside a transaction: take the file's sync lock until it ends (waiting for another sync of it when
    ``wait``); returns whether it was taken. A transaction-level advisory lock, so a trigger queueing the file
    again is never blocked. ``durable=False``: the transaction also commits without waiting for the WAL flush
    (a sync's, whose work is safe to redo)."""
    statement = (_LOCK if wait else _TRY_LOCK) + ("" if durable else _NOT_DURABLE)
    return bool(conn.execute(statement, {"key": _key(store_id, file_id)}).fetchone()[0])  # type: ignore[index]


def store_locked(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> tuple[StoreRow | None, bool]:
    """Inside a transaction about to change a file's chunks: the store's row (None when it is gone) and whether
    the file's sync lock was taken — it is, waiting for a sync of the file to end, exactly when the store's backend
    keeps its own copy (the test the triggers queue by). One statement."""
    row = conn.execute(_STORE_LOCKED, {"tenant": tenant_id, "store": store_id,
                                       "key": _key(store_id, file_id)}).fetchone()
    return (StoreRow(*row[:5]), bool(row[5])) if row else (None, False)


def claim(conn: psycopg.Connection, entry: Entry, *, wait: bool = False) -> Claim | None:
    """Inside a transaction: take the entry's file (:func:`lock`, the transaction made not to wait for the WAL
    flush: a sync's work is safe to redo) and return the entry as it is now — read after the lock, so a change the
    other sync missed is seen; None when another sync holds it (without ``wait``) or the entry is gone."""
    if not lock(conn, entry.vector_store_id, entry.file_id, wait=wait, durable=False):
        return None
    row = conn.execute(_SEQ, {"store": entry.vector_store_id, "file": entry.file_id}).fetchone()
    return Claim(int(row[0]), row[1] == row[0]) if row else None


def written(conn: psycopg.Connection, store_id: str, file_id: str) -> int | None:
    """Inside the transaction that queued the file and holds its :func:`lock`: record that its points as they are
    now are written; returns the entry's seq (None when the file is not queued: its store's backend is in
    Postgres)."""
    row = conn.execute(_WRITTEN, {"store": store_id, "file": file_id}).fetchone()
    return int(row[0]) if row else None


def done(conn: psycopg.Connection, entry: Entry, seq: int) -> None:
    """Remove the entry unless the file changed again after ``seq`` was read."""
    conn.execute(_DONE, {"store": entry.vector_store_id, "file": entry.file_id, "seq": seq})


def failed(conn: psycopg.Connection, entry: Entry, error: str) -> None:
    """Count a failed sync of the entry and keep its error (first 500 characters)."""
    conn.execute(_FAILED, {"store": entry.vector_store_id, "file": entry.file_id, "error": error})


def store(conn: psycopg.Connection, tenant_id: str, store_id: str) -> StoreRow | None:
    """The store's row as the sync needs it, or None when it is gone."""
    row = conn.execute(_STORE, {"tenant": tenant_id, "store": store_id}).fetchone()
    return StoreRow(*row) if row else None


def chunks(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *,
           model: str | None = None) -> list[ChunkRow]:
    """The file's chunks in the store, in order, with their lexemes and term frequencies, and (``model``: the
    store's embedding model) their vectors from the tenant's embedding cache, in the same statement."""
    return chunks_and_avgdl(conn, tenant_id, store_id, file_id, model=model)[0]


def chunks_and_avgdl(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *,
                     model: str | None = None) -> tuple[list[ChunkRow], float | None]:
    """:func:`chunks` and the store's average chunk length now (lexemes, at least 1; None when the file has no
    chunk), read in the same statement."""
    rows = conn.execute(_CHUNKS, {"tenant": tenant_id, "store": store_id, "file": file_id,
                                  "model": model}).fetchall()
    out = [ChunkRow(int(r[0]), r[1], int(r[2]), r[3], list(zip(r[4], (int(t) for t in r[5]), strict=True)), r[6])
           for r in rows]
    return out, (float(rows[0][7]) if rows and rows[0][7] is not None else None)



def chunk_ids(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str) -> list[int]:
    """The ids of the file's chunks in the store, in order."""
    return [int(r[0]) for r in conn.execute(_CHUNK_IDS, {"tenant": tenant_id, "store": store_id,
                                                          "file": file_id}).fetchall()]


_DIMENSIONS = """SELECT backend, array_agg(DISTINCT embedding_dim ORDER BY embedding_dim) FROM vector_stores
WHERE NOT engram_backend_in_postgres(backend) GROUP BY 1 ORDER BY 1"""


def external_dimensions(conn: psycopg.Connection) -> dict[str, list[int]]:
    """``{backend: embedding dimensions}`` of the stores the connection sees on backends that keep their own copy
    (one collection or index per dimension)."""
    return {row[0]: [int(d) for d in row[1]] for row in conn.execute(_DIMENSIONS).fetchall()}
