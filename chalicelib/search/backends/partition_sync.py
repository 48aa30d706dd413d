"""The writer of users' histories (migrations/0030_memory_partitions.sql, :mod:`chalicelib.search.partitions`):
move a partition's tail into its body on the partition's backend, and move bodies between backends.

- :func:`write_tail` — one batch, in one transaction under the partition's row lock: the pending rows (changed or
  deleted since indexed) and the oldest tail rows become body: their BM25 statistics are added (the same tables for
  every backend), the backend indexes them (``write_partition``; rows gone are ``delete_partition_rows``), the bound
  moves. A backend outside Postgres is written before the commit: a failure rolls the batch back (nothing in
  Postgres changes; its points are idempotent and written again). A history shorter than the backend's
  ``partition_min_rows`` stays all tail.
- :func:`after_add` — an add's hook: on a backend whose writes are cheap (``writes_after_add``), the add's
  partition is written right after it commits; a failure is logged, the rows stay searchable from the tail, the
  job writes them. (The job, not the hook, lets the backend build what was written: ``settle_partitions``; the
  embedded Qdrant searches a segment not yet built by a scan of it, exactly.)
- :func:`index_pending` — the ``index_memories`` job's step: every partition with new rows since the job last
  looked (a cursor over the corpus's ``seq``), pending rows or a move under way.
- :func:`start_move` / the job — ``engram memory reindex --backend``: each of the tenant's partitions is written
  whole on the new backend from Postgres' rows (vectors included: nothing is embedded again), batch by batch
  (resumable: ``moved_through``), then switched and its old body dropped; searches use the old body until then.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.search.backends import VectorBackend, for_backend
from chalicelib.search.corpus import EXCHANGES, MEMORIES, Corpus, Partition
from chalicelib.search.partitions import by_ids

__all__ = ["CORPORA", "WRITE_BATCH", "IndexCounts", "after_add", "forget", "index_pending", "move_step",
           "moves_left", "partition_backend", "start_move", "write_tail"]

logger = logging.getLogger("engram.search")

# The partitioned corpora, in the order the job visits them.
CORPORA: tuple[Corpus, ...] = (MEMORIES, EXCHANGES)
# Rows per writer transaction: ~0.5 s of pgvector HNSW inserts on 2 cores (the partition's row lock, which a
# concurrent delete of one of its body rows waits for, is held that long).
WRITE_BATCH = 500
# The average length a body's postings were weighted with follows its average while they differ by more than this
# factor (as chunks': migration 0009).
AVGDL_DRIFT = 1.25
# Speakers kept per partition.
MAX_SPEAKERS = 1000
# Partitions the job discovers per look at new rows.
DISCOVER_BATCH = 200

_ENSURE = """
INSERT INTO memory_partitions (tenant_id, corpus, user_id, backend)
VALUES (%(tenant)s, %(corpus)s, %(user)s,
        coalesce((SELECT memory_backend FROM tenants WHERE id = %(tenant)s), %(default)s))
ON CONFLICT (tenant_id, corpus, user_id) DO NOTHING"""
_LOCK = """SELECT partition_key, backend, indexed_through, body_rows, body_length, avgdl_ref, moving_to, moved_through,
    dimensions, speakers
FROM memory_partitions WHERE tenant_id = %(tenant)s AND corpus = %(corpus)s AND user_id = %(user)s FOR UPDATE"""
# The same, for the writer, whose transaction commits without waiting for the WAL flush (write_tail's docstring).
_LOCK_WRITER = _LOCK.replace("SELECT partition_key,",
                             "SELECT set_config('synchronous_commit', 'off', true), partition_key,")
_BACKEND = """SELECT coalesce(p.backend, t.memory_backend, %(default)s) FROM tenants t
LEFT JOIN memory_partitions p ON p.tenant_id = t.id AND p.corpus = %(corpus)s AND p.user_id = %(user)s
WHERE t.id = %(tenant)s"""
# The batch: the pending rows, then the oldest tail rows (in the user's index order: ordered by seq alone, a
# prepared generic plan may walk memories_seq_key through every user's rows; it is never prepared either).
_WORK = """
SELECT (SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq FROM memory_index_pending WHERE partition_key = %(part)s
                                                 ORDER BY seq LIMIT %(limit)s) AS p),
       (SELECT array_agg({id} ORDER BY {id}) FROM (
            SELECT {id} FROM {table} WHERE tenant_id = %(tenant)s AND {user} = %(user)s
              AND ({user}, {id}) > (%(user)s, %(through)s)
            ORDER BY tenant_id, {user}, {id} LIMIT %(limit)s) AS t)"""
_EXISTING = "SELECT {id} FROM {rows} AS x WHERE tenant_id = %(tenant)s AND {user} = %(user)s"
_COUNT = """SELECT count(*) FROM (SELECT 1 FROM {table} WHERE tenant_id = %(tenant)s AND {user} = %(user)s
LIMIT %(limit)s) AS bounded"""
_ADD_STATS = """
WITH r AS (SELECT keywords, keyword_length, embedding_dim, {speaker} AS speaker FROM {rows} AS x
           WHERE tenant_id = %(tenant)s),
     df AS (INSERT INTO memory_keyword_stats (partition_key, lexeme, df, tenant_id)
            SELECT %(part)s, t.lexeme, count(*), %(tenant)s FROM r, unnest(r.keywords) AS t GROUP BY t.lexeme
            ORDER BY t.lexeme
            ON CONFLICT (partition_key, lexeme) DO UPDATE SET df = memory_keyword_stats.df + EXCLUDED.df)
SELECT count(*), coalesce(sum(keyword_length), 0), array_agg(DISTINCT embedding_dim),
       array_agg(DISTINCT speaker) FILTER (WHERE speaker IS NOT NULL AND btrim(speaker) <> '')
FROM r"""
_SPEAKERS = """
UPDATE memory_partitions SET speakers = coalesce((
    SELECT array_agg(s ORDER BY s) FROM (
        SELECT s FROM (SELECT unnest(speakers) AS s UNION SELECT unnest(%(heard)s::text[])) AS u
        ORDER BY s LIMIT %(max)s) AS kept), '{}')
WHERE partition_key = %(part)s"""
_ADVANCE = """
WITH done AS (DELETE FROM memory_index_pending WHERE partition_key = %(part)s AND seq = ANY(%(pending)s))
UPDATE memory_partitions SET indexed_through = %(through)s, body_rows = body_rows + %(rows)s,
    body_length = body_length + %(length)s, avgdl_ref = %(ref)s, updated_at = now(),
    dimensions = ARRAY(SELECT DISTINCT d FROM unnest(dimensions || %(dims)s::integer[]) AS d ORDER BY d)
WHERE partition_key = %(part)s"""
_DISCOVER = """
SELECT tenant_id, {user}, min({id}), max({id}) FROM {table}
WHERE {id} > %(cursor)s AND {id} <= %(upto)s AND {user} IS NOT NULL
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)
GROUP BY 1, 2"""
# The job looks at most this many new rows at a time (their partitions), up to the last of them.
_UPTO = """SELECT max({id}), count(*) FROM (SELECT {id} FROM {table} WHERE {id} > %(cursor)s ORDER BY {id}
LIMIT %(limit)s) AS n"""
DISCOVER_ROWS = 50_000
# A tenant's run looks at the tenant's users with rows after their body (no cursor: that is every tenant's).
_TENANT_TAILS = """
SELECT m.tenant_id, m.{user}, min(m.{id}), max(m.{id}) FROM {table} m
LEFT JOIN memory_partitions p ON p.tenant_id = m.tenant_id AND p.corpus = %(corpus)s AND p.user_id = m.{user}
WHERE m.tenant_id = %(tenant)s AND m.{user} IS NOT NULL AND m.{id} > coalesce(p.indexed_through, 0)
GROUP BY 1, 2"""
_SET_CURSOR = "UPDATE memory_index_cursor SET last_seq = %(seq)s WHERE corpus = %(corpus)s AND last_seq < %(seq)s"
_WITH_WORK = """
SELECT DISTINCT p.tenant_id, p.user_id FROM memory_partitions p
WHERE p.corpus = %(corpus)s AND (%(tenant)s::text IS NULL OR p.tenant_id = %(tenant)s)
  AND (p.moving_to IS NOT NULL OR EXISTS (SELECT 1 FROM memory_index_pending x WHERE x.partition_key = p.partition_key))
LIMIT %(limit)s"""
_DIMENSIONS = """SELECT DISTINCT embedding_dim FROM {rows} AS x WHERE tenant_id = %(tenant)s"""
# Every backend and dimension holding partitions of a corpus (what the job lets the backends build).
_HELD = """SELECT DISTINCT backend, unnest(dimensions) FROM memory_partitions
WHERE corpus = %(corpus)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)"""
# engram memory reindex --backend: the tenant's new partitions take the backend; the others start moving.
_FORGET = """SELECT partition_key, corpus, user_id, backend, dimensions FROM memory_partitions
WHERE tenant_id = %(tenant)s AND (%(user)s::text IS NULL OR user_id = %(user)s)"""
_START_MOVE = """
WITH t AS (UPDATE tenants SET memory_backend = %(backend)s WHERE id = %(tenant)s RETURNING id)
UPDATE memory_partitions SET moving_to = CASE WHEN backend = %(backend)s THEN NULL ELSE %(backend)s END,
    moved_through = CASE WHEN moving_to IS NOT DISTINCT FROM %(backend)s THEN moved_through ELSE 0 END,
    updated_at = now()
WHERE tenant_id = (SELECT id FROM t) AND (backend <> %(backend)s OR moving_to IS NOT NULL)
RETURNING partition_key"""
_MOVE_ROWS = """
SELECT {id} FROM {table} x WHERE tenant_id = %(tenant)s AND {user} = %(user)s
  AND ({user}, {id}) > (%(user)s, %(moved)s) AND ({user}, {id}) <= (%(user)s, %(through)s)
  AND NOT EXISTS (SELECT 1 FROM memory_index_pending p WHERE p.partition_key = %(part)s AND p.seq = x.{id})
ORDER BY tenant_id, {user}, {id} LIMIT %(limit)s"""
_MOVED = "UPDATE memory_partitions SET moved_through = %(moved)s, updated_at = now() WHERE partition_key = %(part)s"
_SWITCH = """UPDATE memory_partitions SET backend = moving_to, moving_to = NULL, moved_through = 0, updated_at = now()
WHERE partition_key = %(part)s"""
_MOVE_LEFT = """SELECT count(*), count(*) FILTER (WHERE moving_to IS NOT NULL)
FROM memory_partitions WHERE tenant_id = %(tenant)s"""


@dataclass(slots=True)
class IndexCounts:
    """What a run wrote: ``rows`` indexed, ``removed`` from a backend, ``moved`` to another, ``partitions``
    touched, ``failed`` partitions (their rows stay tail; the error logged)."""

    rows: int = 0
    removed: int = 0
    moved: int = 0
    partitions: int = 0
    failed: int = 0
    dimensions: dict[tuple[str, str], set[int]] = field(default_factory=dict)  # (backend, corpus) → dimensions

    def as_dict(self) -> dict[str, int]:
        """The counts (for the job's result and its metrics)."""
        return {"indexed_rows": self.rows, "removed_rows": self.removed, "moved_rows": self.moved,
                "partitions": self.partitions, "failed_partitions": self.failed}


def partition_backend(conn: psycopg.Connection, settings: Settings, corpus: Corpus, tenant_id: str,
                      user_id: str) -> str:
    """The backend of the user's partition: its own, else the tenant's memory backend, else the setting's."""
    row = conn.execute(_BACKEND, {"tenant": tenant_id, "corpus": corpus.name, "user": user_id,
                                  "default": settings.memory_backend}).fetchone()
    return row[0] if row else settings.memory_backend


def write_tail(conn: psycopg.Connection, settings: Settings, corpus: Corpus, tenant_id: str, user_id: str, *,
               limit: int = WRITE_BATCH, counts: IndexCounts | None = None, min_rows: int | None = None) -> int:
    """Index one batch of the partition's pending and tail rows (module docstring); the rows handled (0: nothing
    to do, the partition is too short for its backend — ``min_rows``, default the backend's
    ``partition_min_rows`` —, or it is moving). The transaction commits without waiting for its WAL to reach the
    disk: what it writes is derived (a crash may lose the last batches, whose rows are then tail again and written
    again; never an inconsistency: PostgreSQL manual, "Asynchronous Commit").

    Raises:
        UpstreamError: the backend failed (the batch rolled back).
    """
    counts = counts if counts is not None else IndexCounts()
    params: dict[str, Any] = {"tenant": tenant_id, "corpus": corpus.name, "user": user_id,
                              "default": settings.memory_backend}
    names = _names(corpus)
    with conn.transaction():
        row = conn.execute(_LOCK_WRITER, params).fetchone()
        if row is None:
            conn.execute(_ENSURE, params)
            row = conn.execute(_LOCK_WRITER, params).fetchone()
        assert row is not None
        _, key, backend_name, through, body_rows, body_length, ref, moving_to, _, stored_dims, speakers = row
        if moving_to is not None:
            return 0
        backend = for_backend(backend_name, settings, 0)
        params.update(part=key, through=through)
        found = conn.execute(sql.SQL(_WORK).format(**names), {**params, "limit": limit}, prepare=False).fetchone()
        assert found is not None
        pending = list(found[0] or ())
        new = list(found[1] or ())[:max(0, limit - len(pending))]
        if not pending and not new:
            return 0
        present = {r[0] for r in conn.execute(sql.SQL(_EXISTING).format(**names), {**params, "seqs": pending})} \
            if pending else set()
        least = backend.partition_min_rows if min_rows is None else min_rows
        if body_rows == 0 and not pending and least > 0:
            held = conn.execute(sql.SQL(_COUNT).format(**names), {**params, "limit": least}).fetchone()
            if held is None or held[0] < least:
                return 0
        todo = sorted(present | set(new))
        gone = [s for s in pending if s not in present]
        rows = length = 0
        dims: list[int] = []
        if todo:
            speaker = sql.SQL(corpus.speaker) if corpus.speaker else sql.SQL("NULL::text")
            added = conn.execute(sql.SQL(_ADD_STATS).format(speaker=speaker, **names),
                                 {**params, "seqs": todo}).fetchone()
            assert added is not None
            rows, length, dims = int(added[0]), int(added[1]), sorted(added[2] or ())
            heard = set(added[3] or ()) - set(speakers or ())
            if heard and len(speakers or ()) < MAX_SPEAKERS:
                conn.execute(_SPEAKERS, {**params, "heard": sorted(heard), "max": MAX_SPEAKERS})
        total_rows, total_length = body_rows + rows, body_length + length
        average = max(total_length / total_rows, 1.0) if total_rows else 1.0
        rebuild = ref is not None and body_rows > 0 and not (1 / AVGDL_DRIFT <= average / ref <= AVGDL_DRIFT)
        if ref is None or rebuild:
            ref = average
        new_through = max([through, *new])
        conn.execute(_ADVANCE, {**params, "through": new_through, "rows": rows, "length": length, "ref": ref,
                                "dims": dims, "pending": pending})
        partition = Partition(corpus.name, tenant_id, user_id, key=key, backend=backend_name,
                              indexed_through=new_through, body_rows=total_rows, body_length=total_length,
                              avgdl_ref=ref, dimensions=tuple(sorted({*stored_dims, *dims})))
        if gone:
            backend.delete_partition_rows(conn, partition, corpus, gone)
        if todo or rebuild:
            backend.write_partition(conn, partition, corpus, todo, rebuild=rebuild)
            counts.dimensions.setdefault((backend_name, corpus.name), set()).update(dims)
    counts.rows += len(todo)
    counts.removed += len(gone)
    return len(todo) + len(gone)


def after_add(conn: psycopg.Connection, settings: Settings, corpus: Corpus, tenant_id: str,
              user_id: str | None) -> None:
    """After an add committed rows to the user's partition: write them now on a backend whose writes are cheap
    (``writes_after_add``); elsewhere the job does. Never raises: a failure is logged and the rows stay
    searchable from the tail."""
    if user_id is None:
        return
    try:
        backend = for_backend(partition_backend(conn, settings, corpus, tenant_id, user_id), settings, 0)
        if not backend.writes_after_add:
            return
        while write_tail(conn, settings, corpus, tenant_id, user_id) >= WRITE_BATCH:
            pass
    except Exception:  # the add committed; the job writes what this could not
        logger.warning("writing %s of user %r after an add failed; the index_memories job retries", corpus.name,
                       user_id, exc_info=True)


def forget(conn: psycopg.Connection, settings: Settings, tenant_id: str, user_id: str | None) -> int:
    """After a purge of a user's memories (``user_id`` None: of every user of the tenant): their partitions, in
    every corpus, dropped from their backends and from Postgres (statistics, speakers, postings, vectors). Returns
    the partitions forgotten.

    Raises:
        UpstreamError: a backend failed (the partitions left are emptied by the index_memories job: their deleted
            rows wait in memory_index_pending; Postgres holds none of their text already).
    """
    rows = conn.execute(_FORGET, {"tenant": tenant_id, "user": user_id}).fetchall()
    corpora = {c.name: c for c in CORPORA}
    for key, corpus_name, user, backend_name, dims in rows:
        corpus = corpora[corpus_name]
        partition = Partition(corpus_name, tenant_id, user, key=key, backend=backend_name, dimensions=tuple(dims))
        with conn.transaction():
            for_backend(backend_name, settings, 0).drop_partition(conn, partition, corpus)
            conn.execute("DELETE FROM memory_partitions WHERE partition_key = %s", (key,))
    return len(rows)


def start_move(conn: psycopg.Connection, tenant_id: str, backend: str) -> int:
    """Make ``backend`` the tenant's memory backend and start moving each of its partitions there (the job, or
    :func:`index_pending` with the tenant, does the moving); a move already under way to it goes on where it was.
    Returns the partitions to move."""
    with conn.transaction():
        return len(conn.execute(_START_MOVE, {"tenant": tenant_id, "backend": backend}).fetchall())


def moves_left(conn: psycopg.Connection, tenant_id: str) -> tuple[int, int]:
    """``(partitions, partitions still moving)`` of the tenant."""
    row = conn.execute(_MOVE_LEFT, {"tenant": tenant_id}).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def move_step(conn: psycopg.Connection, settings: Settings, corpus: Corpus, tenant_id: str, user_id: str, *,
              limit: int = WRITE_BATCH, counts: IndexCounts | None = None) -> int:
    """One batch of a partition's move to its ``moving_to`` backend: the next body rows written there (no
    statistics change: they are the same rows); when none is left, the partition switches and its old body is
    dropped. Returns the rows written (0 when the move finished or none is under way).

    Raises:
        UpstreamError: a backend failed (the batch rolled back; the move resumes where it was).
    """
    counts = counts if counts is not None else IndexCounts()
    params: dict[str, Any] = {"tenant": tenant_id, "corpus": corpus.name, "user": user_id}
    names = _names(corpus)
    with conn.transaction():
        row = conn.execute(_LOCK, params).fetchone()
        if row is None or row[6] is None:
            return 0
        key, backend_name, through, body_rows, body_length, ref, moving_to, moved, stored_dims, _ = row
        params.update(part=key, through=through, moved=moved)
        target = for_backend(moving_to, settings, 0)
        partition = Partition(corpus.name, tenant_id, user_id, key=key, backend=moving_to, indexed_through=through,
                              body_rows=body_rows, body_length=body_length, avgdl_ref=ref,
                              dimensions=tuple(stored_dims))
        seqs = [r[0] for r in conn.execute(sql.SQL(_MOVE_ROWS).format(**names), {**params, "limit": limit},
                                           prepare=False)]
        if seqs:
            target.write_partition(conn, partition, corpus, seqs)
            conn.execute(_MOVED, {**params, "moved": seqs[-1]})
            dims = {int(r[0]) for r in conn.execute(sql.SQL(_DIMENSIONS).format(**names), {**params, "seqs": seqs})}
            counts.dimensions.setdefault((moving_to, corpus.name), set()).update(dims)
            counts.moved += len(seqs)
            return len(seqs)
        conn.execute(_SWITCH, params)
        old = for_backend(backend_name, settings, 0)
        old.drop_partition(conn, replace(partition, backend=backend_name), corpus)
    counts.partitions += 1
    return 0


def index_pending(conn: psycopg.Connection, settings: Settings, *, tenant_id: str | None = None,
                  deadline: float | None = None, counts: IndexCounts | None = None) -> tuple[IndexCounts, bool]:
    """The job's work (owner connection): for each partitioned corpus, every partition with new rows since the
    job's cursor, pending rows or a move under way, written batch by batch until done or ``deadline``
    (``time.monotonic()``); the cursor advances past what was handled (a failed partition's rows are looked at
    again next time). Returns the counts and whether work was left."""
    counts = counts if counts is not None else IndexCounts()
    more = False
    for corpus in CORPORA:
        names = _names(corpus)
        if tenant_id is None:
            cursor = _cursor(conn, corpus)
            upto = conn.execute(sql.SQL(_UPTO).format(**names),
                                {"cursor": cursor, "limit": DISCOVER_ROWS}).fetchone()
            upto_seq = int(upto[0]) if upto and upto[0] is not None else cursor
            more = more or bool(upto and upto[1] >= DISCOVER_ROWS)
            found = conn.execute(sql.SQL(_DISCOVER).format(**names),
                                 {"cursor": cursor, "upto": upto_seq, "tenant": None}).fetchall()
        else:
            cursor = upto_seq = 0
            found = conn.execute(sql.SQL(_TENANT_TAILS).format(**names),
                                 {"corpus": corpus.name, "tenant": tenant_id}).fetchall()
        partitions: dict[tuple[str, str], int | None] = {(t, u): int(lo) for t, u, lo, _ in found}
        for t, u in conn.execute(_WITH_WORK, {"corpus": corpus.name, "tenant": tenant_id,
                                              "limit": DISCOVER_BATCH}).fetchall():
            partitions.setdefault((t, u), None)
        safe = upto_seq  # the cursor may pass every row up to here, less what is still to be written
        for (t, u), lowest in sorted(partitions.items(), key=lambda kv: kv[1] or 0):
            if deadline is not None and time.monotonic() > deadline:
                more = True
                if lowest is not None:
                    safe = min(safe, lowest - 1)
                continue
            try:
                if not _drain(conn, settings, corpus, t, u, deadline, counts):
                    more = True
                    if lowest is not None:
                        safe = min(safe, lowest - 1)
                counts.partitions += 1
            except Exception:
                logger.warning("indexing %s of user %r (tenant %r) failed; retried next run", corpus.name, u, t,
                               exc_info=True)
                counts.failed += 1
                if lowest is not None:
                    safe = min(safe, lowest - 1)
        if safe > cursor and tenant_id is None:  # (the cursor is every tenant's)
            conn.execute(_SET_CURSOR, {"corpus": corpus.name, "seq": safe})
        # What the adds wrote since the last run is built too (the embedded Qdrant's indexes).
        for backend_name, dimension in conn.execute(_HELD, {"corpus": corpus.name, "tenant": tenant_id}):
            counts.dimensions.setdefault((backend_name, corpus.name), set()).add(int(dimension))
    _settle(settings, counts)
    return counts, more


def _drain(conn: psycopg.Connection, settings: Settings, corpus: Corpus, tenant_id: str, user_id: str,
           deadline: float | None, counts: IndexCounts) -> bool:
    """Move, then write, the partition until nothing is left (True) or the deadline passed (False)."""
    while move_step(conn, settings, corpus, tenant_id, user_id, counts=counts) > 0:
        if deadline is not None and time.monotonic() > deadline:
            return False
    while write_tail(conn, settings, corpus, tenant_id, user_id, counts=counts) >= WRITE_BATCH:
        if deadline is not None and time.monotonic() > deadline:
            return False
    return True


def _settle(settings: Settings, counts: IndexCounts) -> None:
    """Let each backend build what was written (the embedded Qdrant's indexes)."""
    corpora = {c.name: c for c in CORPORA}
    for (backend_name, corpus), dims in counts.dimensions.items():
        backend: VectorBackend = for_backend(backend_name, settings, 0)
        backend.settle_partitions(corpora[corpus], sorted(dims))
    counts.dimensions.clear()


def _cursor(conn: psycopg.Connection, corpus: Corpus) -> int:
    with conn.transaction():
        conn.execute("INSERT INTO memory_index_cursor (corpus) VALUES (%s) ON CONFLICT DO NOTHING", (corpus.name,))
        row = conn.execute("SELECT last_seq FROM memory_index_cursor WHERE corpus = %s", (corpus.name,)).fetchone()
    return int(row[0]) if row else 0


def _names(corpus: Corpus) -> dict[str, sql.Composable]:
    return {"id": corpus.row_id(), "table": corpus.identifier(), "user": sql.Identifier(corpus.partitioned_by or ""),
            "rows": by_ids(corpus)}

