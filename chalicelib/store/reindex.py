"""A vector store moving between backends (``vector_store_reindex``, migration 0023): its resumable state and the
statements that move its rows' vectors and keyword index in Postgres. The moving itself is
:mod:`chalicelib.search.backends.reindex`."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

__all__ = ["Progress", "State", "advance", "changed_files", "drop_postgres_index", "failed", "fill_vectors",
           "files_after", "finish", "missing_vectors", "progress", "queue_store_removal", "rebuild_postings",
           "set_backend", "set_total", "set_vector", "start"]

_START = """
INSERT INTO vector_store_reindex (vector_store_id, tenant_id, target, started_max_chunk_id)
VALUES (%(store)s, %(tenant)s, %(target)s, (SELECT coalesce(max(id), 0) FROM chunks))
ON CONFLICT (vector_store_id) DO UPDATE
    SET target = EXCLUDED.target,
        started_max_chunk_id = CASE WHEN vector_store_reindex.target = EXCLUDED.target
                                    THEN vector_store_reindex.started_max_chunk_id
                                    ELSE EXCLUDED.started_max_chunk_id END,
        cursor_file_id = CASE WHEN vector_store_reindex.target = EXCLUDED.target
                              THEN vector_store_reindex.cursor_file_id END,
        files_done = CASE WHEN vector_store_reindex.target = EXCLUDED.target
                          THEN vector_store_reindex.files_done ELSE 0 END,
        last_error = NULL,
        updated_at = now()
RETURNING target, started_max_chunk_id, cursor_file_id, files_done"""
_FILES_AFTER = """
SELECT file_id FROM vector_store_files
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND (%(cursor)s::text IS NULL OR file_id > %(cursor)s)
ORDER BY file_id"""
_ADVANCE = """UPDATE vector_store_reindex SET cursor_file_id = %(file)s, files_done = files_done + 1, updated_at = now()
WHERE vector_store_id = %(store)s"""
_FINISH = "DELETE FROM vector_store_reindex WHERE vector_store_id = %(store)s"
_TOTAL = """UPDATE vector_store_reindex SET total_files = %(total)s, updated_at = now()
WHERE vector_store_id = %(store)s"""
_FAILED = """UPDATE vector_store_reindex SET last_error = left(%(error)s, 1000), updated_at = now()
WHERE vector_store_id = %(store)s"""
_PROGRESS = """SELECT target, files_done, total_files, last_error, extract(epoch FROM now() - updated_at)
FROM vector_store_reindex WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s"""
# Files whose chunks were written after the move began (a new version's chunks get new, higher ids).
_CHANGED = """SELECT DISTINCT file_id FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND id > %(since)s ORDER BY 1"""
# A row's vector from the tenant's embedding cache (keyed by the SHA-256 of its UTF-8 text).
_FILL = """
UPDATE chunks c SET embedding = e.embedding
FROM embedding_cache e
WHERE c.tenant_id = %(tenant)s AND c.vector_store_id = %(store)s AND (%(file)s::text IS NULL OR c.file_id = %(file)s)
  AND c.embedding IS NULL
  AND e.tenant_id = c.tenant_id AND e.model = %(model)s AND e.sha256 = sha256(convert_to(c.text, 'UTF8'))"""
_MISSING = """SELECT id, text FROM chunks
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND (%(file)s::text IS NULL OR file_id = %(file)s)
  AND embedding IS NULL ORDER BY id"""
_SET_VECTOR = "UPDATE chunks SET embedding = %(vector)s WHERE tenant_id = %(tenant)s AND id = %(id)s"
_DROP_VECTORS = """UPDATE chunks SET embedding = NULL
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND embedding IS NOT NULL"""
_DROP_POSTINGS = """DELETE FROM chunk_postings p USING vector_stores s
WHERE s.tenant_id = %(tenant)s AND s.id = %(store)s AND p.partition_key = s.partition_key"""
_REBUILD_POSTINGS = "SELECT engram_rebuild_postings(%(store)s)"
_SET_BACKEND = "UPDATE vector_stores SET backend = %(backend)s WHERE tenant_id = %(tenant)s AND id = %(store)s"
_QUEUE_REMOVAL = """
INSERT INTO vector_index_outbox (tenant_id, vector_store_id, file_id, embedding_dim, backend)
SELECT tenant_id, id, '', embedding_dim, %(backend)s FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(store)s
ON CONFLICT (vector_store_id, file_id) DO UPDATE SET seq = nextval('vector_index_outbox_seq'), queued_at = now(),
    backend = EXCLUDED.backend"""
_UNQUEUE_FILES = "DELETE FROM vector_index_outbox WHERE vector_store_id = %(store)s AND file_id <> ''"


@dataclass(frozen=True, slots=True)
class State:
    """Where a move stands: its ``target`` backend, the highest chunk id when it began, the last file moved
    (``cursor_file_id``; None before the first) and how many files are done."""

    target: str
    started_max_chunk_id: int
    cursor_file_id: str | None
    files_done: int


@dataclass(frozen=True, slots=True)
class Progress:
    """A move as a watcher sees it: its ``target``, ``files_done`` of ``total_files`` (None until the mover has
    counted them), ``last_error`` (why it stopped, None while it goes on) and ``idle_s``, seconds since it last
    moved on."""

    target: str
    files_done: int
    total_files: int | None
    last_error: str | None
    idle_s: float


def start(conn: psycopg.Connection, tenant_id: str, store_id: str, target: str) -> State:
    """Begin moving the store to ``target``, or resume the unfinished move to it (a move to the other backend
    starts over)."""
    row = conn.execute(_START, {"store": store_id, "tenant": tenant_id, "target": target}).fetchone()
    assert row is not None
    return State(row[0], int(row[1]), row[2], int(row[3]))


def set_total(conn: psycopg.Connection, store_id: str, total: int) -> None:
    """Record how many files the move has in all (for watchers)."""
    conn.execute(_TOTAL, {"store": store_id, "total": total})


def failed(conn: psycopg.Connection, store_id: str, error: str) -> None:
    """Record why the move stopped (cleared when it starts again)."""
    conn.execute(_FAILED, {"store": store_id, "error": error})


def progress(conn: psycopg.Connection, tenant_id: str, store_id: str) -> Progress | None:
    """The store's unfinished move, or None (none, or finished)."""
    row = conn.execute(_PROGRESS, {"tenant": tenant_id, "store": store_id}).fetchone()
    return None if row is None else Progress(row[0], int(row[1]), row[2], row[3], float(row[4]))


def files_after(conn: psycopg.Connection, tenant_id: str, store_id: str, cursor: str | None) -> list[str]:
    """The store's attached files after ``cursor`` (all when None), in id order."""
    rows = conn.execute(_FILES_AFTER, {"tenant": tenant_id, "store": store_id, "cursor": cursor}).fetchall()
    return [r[0] for r in rows]


def advance(conn: psycopg.Connection, store_id: str, file_id: str) -> None:
    """Record ``file_id`` as moved."""
    conn.execute(_ADVANCE, {"store": store_id, "file": file_id})


def finish(conn: psycopg.Connection, store_id: str) -> None:
    """Forget the move (done)."""
    conn.execute(_FINISH, {"store": store_id})


def changed_files(conn: psycopg.Connection, tenant_id: str, store_id: str, since_chunk_id: int) -> list[str]:
    """Files of the store with chunks written after chunk id ``since_chunk_id``."""
    rows = conn.execute(_CHANGED, {"tenant": tenant_id, "store": store_id, "since": since_chunk_id}).fetchall()
    return [r[0] for r in rows]


def fill_vectors(conn: psycopg.Connection, tenant_id: str, store_id: str, model: str,
                 file_id: str | None = None) -> int:
    """Give the rows without a vector (one file's, or the whole store's) theirs from the embedding cache; returns
    how many were filled."""
    return conn.execute(_FILL, {"tenant": tenant_id, "store": store_id, "model": model, "file": file_id}).rowcount


def missing_vectors(conn: psycopg.Connection, tenant_id: str, store_id: str,
                    file_id: str | None = None) -> list[tuple[int, str]]:
    """``(chunk id, text)`` of the rows still without a vector."""
    rows = conn.execute(_MISSING, {"tenant": tenant_id, "store": store_id, "file": file_id}).fetchall()
    return [(int(r[0]), r[1]) for r in rows]


def set_vector(conn: psycopg.Connection, tenant_id: str, chunk_id: int, vector: object) -> None:
    """Set one row's vector."""
    conn.execute(_SET_VECTOR, {"tenant": tenant_id, "id": chunk_id, "vector": vector})


def drop_postgres_index(conn: psycopg.Connection, tenant_id: str, store_id: str) -> None:
    """Remove the store's rows' vectors and its postings (what a backend in Postgres searched)."""
    conn.execute(_DROP_VECTORS, {"tenant": tenant_id, "store": store_id})
    conn.execute(_DROP_POSTINGS, {"tenant": tenant_id, "store": store_id})


def rebuild_postings(conn: psycopg.Connection, store_id: str) -> None:
    """Write the store's BM25 postings from its chunks (``engram_rebuild_postings``, migration 0009)."""
    conn.execute(_REBUILD_POSTINGS, {"store": store_id})


def set_backend(conn: psycopg.Connection, tenant_id: str, store_id: str, backend: str) -> None:
    """Switch the store's searches (and its next writes) to ``backend``."""
    conn.execute(_SET_BACKEND, {"tenant": tenant_id, "store": store_id, "backend": backend})


def queue_store_removal(conn: psycopg.Connection, tenant_id: str, store_id: str, backend: str) -> None:
    """Queue the removal of all the store's points from ``backend`` (the one it moves away from; and drop its files'
    queued syncs)."""
    conn.execute(_UNQUEUE_FILES, {"store": store_id})
    conn.execute(_QUEUE_REMOVAL, {"tenant": tenant_id, "store": store_id, "backend": backend})
