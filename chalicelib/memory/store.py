"""Memory's SQL (migrations/0010_memories.sql): memories, their history, asynchronous add jobs and idempotency
records. Every statement filters on the tenant and, for reads of memories, on the scope; row-level security stands
behind both. Times are timezone-aware UTC.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.errors import NotFoundError
from chalicelib.memory.active import ACTIVE
from chalicelib.memory.model import Memory, MemoryScope
from chalicelib.store.db import one
from chalicelib.store.paging import Page, keyset, trim

__all__ = [
    "ACCESS_GRANULARITY_S",
    "SPEAKER_SAMPLE",
    "Edit",
    "Entity",
    "HistoryRow",
    "NewMemory",
    "bump",
    "close",
    "count",
    "delete",
    "edit",
    "entities",
    "HistoryEvent",
    "fetch_by_seq",
    "Ranking",
    "candidates",
    "find_by_hash",
    "find_by_hashes",
    "get",
    "history",
    "insert",
    "insert_many",
    "list_page",
    "lock_scope",
    "purge",
    "record",
    "record_many",
    "revise",
    "scope_predicate",
    "similar",
    "speakers",
    "stats",
    "tail_speakers",
    "touch",
]

# A memory's access is recorded at most once per this many seconds (one UPDATE per search for the rows not
# touched within it, never one write per row per search): access_count counts access sessions.
ACCESS_GRANULARITY_S = 60
# :func:`speakers` reads the speakers of at most this many of the scope's memories (any of them, in index order):
# a bound on its cost for a scope of any size. Measured 2026-11-27 on the scale benchmark's tenant (100,000
# memories, load average 1.7): 1.7 ms at 1,000 rows, 7.9 ms at 5,000; a user of 100 memories ~0.2 ms. A
# conversation's speakers recur in nearly every turn, so a sample this large holds those of its conversations; a
# speaker it misses stays a word of the query (recall as without the rule).
SPEAKER_SAMPLE = 1000

_COLUMNS = """seq, id, tenant_id, user_id, agent_id, run_id, memory, hash, memory_type, categories, confidence,
    importance, metadata, source_kind, source_id, valid_from, valid_to, superseded_by, invalidated_by, pinned,
    access_count, last_accessed_at, expires_at, archived_at, consolidated_into, verified, source_type, created_at,
    updated_at, embedding_model, prompt_version"""
_INSERT = f"""
INSERT INTO memories (id, tenant_id, user_id, agent_id, run_id, memory, hash, memory_type, categories, confidence,
    importance, metadata, source_kind, source_id, valid_from, pinned, expires_at, verified, source_type,
    embedding_model, embedding_dim, embedding, keywords, keyword_length, episode_messages, prompt_version)
SELECT %(id)s, %(tenant)s, %(user_id)s, %(agent_id)s, %(run_id)s, %(memory)s, %(hash)s, %(memory_type)s,
    %(categories)s, %(confidence)s, %(importance)s, %(metadata)s, %(source_kind)s, %(source_id)s,
    coalesce(%(valid_from)s, now()), %(pinned)s, %(expires_at)s, %(verified)s, %(source_type)s, %(model)s, %(dim)s,
    %(embedding)s, v, engram_tsvector_length(v), %(episode_messages)s, %(prompt_version)s
FROM (SELECT to_tsvector('english', %(index_text)s) AS v) AS k
RETURNING {_COLUMNS}"""
# Many memories in one statement: one JSON array of rows, each with its position `ord`, and their vectors as one
# vector[] (sent binary: %(embeddings)b; the text form cost ~10 ms of Python formatting and server parsing per add of
# 50 384-d vectors on a loaded machine); the tsvector computed once per row.
_INSERT_MANY = """
INSERT INTO memories (id, tenant_id, user_id, agent_id, run_id, memory, hash, memory_type, categories, confidence,
    importance, metadata, source_kind, source_id, valid_from, pinned, expires_at, verified, source_type,
    embedding_model, embedding_dim, embedding, keywords, keyword_length, episode_messages, prompt_version)
SELECT r.id, %(tenant)s, r.user_id, r.agent_id, r.run_id, r.memory, r.hash, r.memory_type, r.categories,
    r.confidence, r.importance, r.metadata, r.source_kind, r.source_id, coalesce(r.valid_from, now()), r.pinned,
    r.expires_at, r.verified, r.source_type, r.model, r.dim, (%(embeddings)b::vector[])[r.ord + 1], k.v,
    engram_tsvector_length(k.v), r.episode_messages, r.prompt_version
FROM jsonb_to_recordset(%(rows)s) AS r(id text, user_id text, agent_id text, run_id text,
    memory text, hash text, memory_type text, categories text[], confidence real, importance real, metadata jsonb,
    source_kind text, source_id text, valid_from timestamptz, pinned boolean, expires_at timestamptz,
    verified boolean, source_type text, model text, dim integer, index_text text, episode_messages jsonb,
    prompt_version text, ord integer)
CROSS JOIN LATERAL (SELECT to_tsvector('english', r.index_text) AS v) AS k
ORDER BY r.ord"""
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))"
_GET = f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = %(tenant)s AND id = %(id)s"
_BY_SEQ = f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = %(tenant)s AND seq = ANY(%(seqs)s)"
# What recall ranks candidates by, in one statement: for each candidate row id and, with neighbours, each neighbour
# of one (the memories one add stored together: same valid_from and source, i.e. one conversation's messages or
# facts, in write order, among the scope's visible rows), its narrow ranking row, its own neighbours (a neighbour's
# too) and its cosine similarity to the query vector (NULL without one, or for another embedding dimension).
_NEIGHBOURS = """
ordered AS (
    SELECT seq, lag(seq) OVER w AS prev, lead(seq) OVER w AS next FROM memories
    WHERE tenant_id = %(tenant)s AND ({scope})
    WINDOW w AS (PARTITION BY valid_from, source_kind, source_id ORDER BY seq)),
asked AS (SELECT o.seq, o.prev, o.next FROM ordered o JOIN unnest(%(seqs)s::bigint[]) AS c(seq) USING (seq)),
ids AS (SELECT seq FROM asked UNION SELECT prev FROM asked WHERE prev IS NOT NULL
        UNION SELECT next FROM asked WHERE next IS NOT NULL),
wanted AS (SELECT o.seq, o.prev, o.next FROM ordered o JOIN ids USING (seq))"""
# The same for a scope inside one user's history, bounded by the candidates: each candidate's two nearest rows on
# either side among its add's rows in the scope (index probes of memories_session, migration 0030), and the window
# over just those rows — a neighbour's own nearest neighbours are among them (the second of each side). Each row's
# ranking columns are read where it is met, so no row is fetched twice.
_RANKING_COLUMNS = """{m}.seq, {m}.metadata->>'speaker' AS speaker, {m}.valid_from, {m}.source_kind, {m}.source_id,
    {m}.importance, {m}.pinned, {m}.created_at, {m}.last_accessed_at,
    CASE WHEN %(q)s::vector IS NOT NULL AND {m}.embedding_dim = %(dim)s
         THEN 1 - ({m}.embedding <=> %(q)s::vector) END AS similarity, strpos({m}.memory, '?') > 0 AS asks,
    coalesce({m}.source_id, '') AS source"""
_PROBE = """SELECT {columns} FROM memories x
             WHERE x.tenant_id = %(tenant)s AND x.user_id = %(neighbour_user)s AND x.valid_from = c.valid_from
               AND x.source_kind = c.source_kind AND coalesce(x.source_id, '') = c.source AND x.seq {side} c.seq
               AND ({scope})
             ORDER BY x.seq {order} LIMIT 2"""
_CANDIDATES_PROBED = """WITH
c AS MATERIALIZED (SELECT {c_columns} FROM memories m WHERE m.tenant_id = %(tenant)s AND m.seq = ANY(%(seqs)s)),
near AS (SELECT * FROM c
         UNION SELECT b.* FROM c CROSS JOIN LATERAL ({before}) AS b
         UNION SELECT a.* FROM c CROSS JOIN LATERAL ({after}) AS a),
wanted AS (SELECT seq, lag(seq) OVER w AS prev, lead(seq) OVER w AS next FROM near
           WINDOW w AS (PARTITION BY valid_from, source_kind, source ORDER BY seq)),
ids AS (SELECT seq FROM c UNION SELECT w.prev FROM wanted w JOIN c USING (seq) WHERE w.prev IS NOT NULL
        UNION SELECT w.next FROM wanted w JOIN c USING (seq) WHERE w.next IS NOT NULL)
SELECT n.seq, n.speaker, n.valid_from, n.source_kind, n.source_id, n.importance, n.pinned, n.created_at,
    n.last_accessed_at, w.prev AS previous, w.next AS following, n.similarity, n.asks
FROM near n JOIN ids USING (seq) LEFT JOIN wanted w USING (seq)"""
_ALONE = """
wanted AS (SELECT NULL::bigint AS seq, NULL::bigint AS prev, NULL::bigint AS next WHERE false),
ids AS (SELECT unnest(%(seqs)s::bigint[]) AS seq)"""
_CANDIDATES = """WITH {rows}
SELECT m.seq, m.metadata->>'speaker' AS speaker, m.valid_from, m.source_kind, m.source_id, m.importance, m.pinned,
    m.created_at, m.last_accessed_at, w.prev AS previous, w.next AS following,
    CASE WHEN %(q)s::vector IS NOT NULL AND m.embedding_dim = %(dim)s
         THEN 1 - (m.embedding <=> %(q)s::vector) END AS similarity, strpos(m.memory, '?') > 0 AS asks
FROM ids JOIN memories m ON m.tenant_id = %(tenant)s AND m.seq = ids.seq
LEFT JOIN wanted w ON w.seq = m.seq"""
_SPEAKERS = """SELECT DISTINCT speaker FROM (
    SELECT metadata->>'speaker' AS speaker FROM memories WHERE tenant_id = %(tenant)s AND ({scope}) LIMIT %(limit)s
) AS sample WHERE speaker IS NOT NULL AND btrim(speaker) <> '' ORDER BY speaker"""
# The same among a user's tail rows, in the order of the user's index (tenant, user, seq), which serves the bound:
# ordered by seq alone, a prepared (generic) plan may walk memories_seq_key from the tail's start through everyone's.
_TAIL_SPEAKERS = """SELECT DISTINCT speaker FROM (
    SELECT metadata->>'speaker' AS speaker FROM memories
    WHERE tenant_id = %(tenant)s AND ({scope}) AND {tail} ORDER BY tenant_id, user_id, seq LIMIT %(limit)s
) AS sample WHERE speaker IS NOT NULL AND btrim(speaker) <> '' ORDER BY speaker"""
_BY_HASH = f"""SELECT {_COLUMNS} FROM memories WHERE tenant_id = %(tenant)s AND hash = %(hash)s AND {{scope}}
AND {ACTIVE} ORDER BY created_at LIMIT 1"""
_BY_HASHES = f"""SELECT DISTINCT ON (hash) {_COLUMNS} FROM memories
WHERE tenant_id = %(tenant)s AND hash = ANY(%(hashes)s) AND {{scope}} AND {ACTIVE} ORDER BY hash, created_at"""
_SIMILAR = f"""
SELECT {_COLUMNS}, 1 - (embedding <=> %(q)s::vector) AS similarity FROM memories
WHERE tenant_id = %(tenant)s AND {{scope}} AND embedding_dim = %(dim)s AND {ACTIVE}
ORDER BY embedding <=> %(q)s::vector LIMIT %(limit)s"""
_LIST = f"""SELECT {_COLUMNS} FROM memories
WHERE tenant_id = %(tenant)s AND {{scope}} AND (%(types)s::text[] IS NULL OR memory_type = ANY(%(types)s))
  AND (%(all)s OR ({ACTIVE})) AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_COUNT = f"""SELECT count(*) FROM memories
WHERE tenant_id = %(tenant)s AND {{scope}} AND (%(types)s::text[] IS NULL OR memory_type = ANY(%(types)s))
  AND (%(all)s OR ({ACTIVE}))"""
_CLOSE = """
UPDATE memories SET valid_to = coalesce(%(valid_to)s, now()), superseded_by = %(superseded_by)s,
    invalidated_by = %(invalidated_by)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_BUMP = """
UPDATE memories SET confidence = least(1, confidence + %(delta)s), access_count = access_count + 1,
    last_accessed_at = now(), updated_at = now()
WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)"""
_TOUCH = f"""
UPDATE memories SET access_count = access_count + 1, last_accessed_at = now() {{asynchronous}}
WHERE tenant_id = %(tenant)s AND seq = ANY(%(seqs)s)
  AND (last_accessed_at IS NULL OR last_accessed_at < now() - make_interval(secs => {ACCESS_GRANULARITY_S}))"""
# The touch's own transaction commits without waiting for the WAL flush (see touch()).
_ASYNCHRONOUS = "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit"
# A revision keeps the memory's id: the old version is copied to a closed row (a new id, valid_to, superseded_by
# the memory) and the memory takes the new text, embedding and valid_from.
_SNAPSHOT = """
INSERT INTO memories (id, tenant_id, user_id, agent_id, run_id, memory, hash, memory_type, categories, confidence,
    importance, metadata, source_kind, source_id, valid_from, valid_to, superseded_by, pinned, access_count,
    last_accessed_at, expires_at, verified, source_type, created_at, updated_at, embedding_model, embedding_dim,
    embedding, keywords, keyword_length, prompt_version)
SELECT %(snapshot)s, tenant_id, user_id, agent_id, run_id, memory, hash, memory_type, categories, confidence,
    importance, metadata, source_kind, source_id, valid_from, greatest(valid_from, %(valid_to)s), id, pinned,
    access_count, last_accessed_at, expires_at, verified, source_type, created_at, now(), embedding_model,
    embedding_dim, embedding, keywords, keyword_length, prompt_version
FROM memories WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_REVISE = f"""
UPDATE memories SET memory = %(memory)s, hash = %(hash)s, embedding_model = %(model)s, embedding_dim = %(dim)s,
    embedding = %(embedding)s, keywords = k.v, keyword_length = engram_tsvector_length(k.v),
    valid_from = greatest(valid_from, %(valid_to)s), memory_type = coalesce(%(memory_type)s, memory_type),
    metadata = coalesce(%(metadata)s, metadata), categories = coalesce(%(categories)s, categories),
    importance = coalesce(%(importance)s, importance), pinned = coalesce(%(pinned)s, pinned),
    verified = coalesce(%(verified)s, verified),
    expires_at = CASE WHEN %(set_expires)s THEN %(expires_at)s ELSE expires_at END,
    prompt_version = %(prompt_version)s, updated_at = now()
FROM (SELECT to_tsvector('english', %(index_text)s) AS v) AS k
WHERE tenant_id = %(tenant)s AND id = %(id)s
RETURNING {", ".join("memories." + c.strip() for c in _COLUMNS.split(","))}"""
_EDIT = f"""
UPDATE memories SET memory_type = coalesce(%(memory_type)s, memory_type), metadata = coalesce(%(metadata)s, metadata),
    categories = coalesce(%(categories)s, categories), importance = coalesce(%(importance)s, importance),
    pinned = coalesce(%(pinned)s, pinned), verified = coalesce(%(verified)s, verified),
    expires_at = CASE WHEN %(set_expires)s THEN %(expires_at)s ELSE expires_at END, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s
RETURNING {_COLUMNS}"""
# A memory's versions: the rows its revisions closed (superseded_by it), deleted with it.
_DELETE = """DELETE FROM memories WHERE tenant_id = %(tenant)s AND (id = %(id)s OR superseded_by = %(id)s)
RETURNING id, memory"""
_SCRUB = """UPDATE memory_history SET old_memory = NULL, new_memory = NULL
WHERE tenant_id = %(tenant)s AND memory_id = ANY(%(ids)s)"""
_RECORD = """
INSERT INTO memory_history (tenant_id, memory_id, user_id, agent_id, run_id, event, old_memory, new_memory, actor,
    details)
VALUES (%(tenant)s, %(memory_id)s, %(user_id)s, %(agent_id)s, %(run_id)s, %(event)s, %(old)s, %(new)s, %(actor)s,
    %(details)s)"""
_RECORD_MANY = """
INSERT INTO memory_history (tenant_id, memory_id, user_id, agent_id, run_id, event, old_memory, new_memory, actor,
    details)
SELECT %(tenant)s, r.memory_id, r.user_id, r.agent_id, r.run_id, r.event, r.old, r.new, r.actor,
    coalesce(r.details, '{}')
FROM jsonb_to_recordset(%(rows)s) AS r(memory_id text, user_id text, agent_id text, run_id text,
    event text, old text, new text, actor text, details jsonb, ord bigint)
ORDER BY r.ord"""
_HISTORY = """
SELECT id, memory_id, event, old_memory, new_memory, actor, details, created_at FROM memory_history
WHERE tenant_id = %(tenant)s AND memory_id = %(id)s ORDER BY id"""
# A purge removes every row holding the scope's text; the cached embeddings are found by their texts' hashes.
_PURGE_TEXTS = "SELECT memory FROM memories WHERE tenant_id = %(tenant)s AND {scope}"
_PURGE_HISTORY_TEXTS = """SELECT old_memory, new_memory FROM memory_history
WHERE tenant_id = %(tenant)s AND {scope}"""
_PURGE_EXCHANGE_TEXTS = """SELECT user_prompt, assistant_response FROM exchanges
WHERE tenant_id = %(tenant)s AND {scope}"""
_PURGE = {
    "memories": "DELETE FROM memories WHERE tenant_id = %(tenant)s AND {scope}",
    "history": "DELETE FROM memory_history WHERE tenant_id = %(tenant)s AND {scope}",
    "jobs": "DELETE FROM memory_jobs WHERE tenant_id = %(tenant)s AND {scope}",
    "exchanges": "DELETE FROM exchanges WHERE tenant_id = %(tenant)s AND {scope}",
    "idempotency_records": "DELETE FROM idempotency_keys WHERE tenant_id = %(tenant)s AND {scope}",
}
_STATS = f"""SELECT count(*) FILTER (WHERE {ACTIVE}), count(*) FILTER (WHERE superseded_by IS NOT NULL),
    count(*) FILTER (WHERE invalidated_by IS NOT NULL), count(*) FILTER (WHERE consolidated_into IS NOT NULL),
    count(*) FILTER (WHERE archived_at IS NOT NULL), count(*) FILTER (WHERE expires_at <= now()), count(*),
    count(DISTINCT user_id), count(DISTINCT agent_id), count(DISTINCT run_id)
FROM memories WHERE tenant_id = %(tenant)s AND {{scope}}"""
_STATS_BY_TYPE = f"""SELECT memory_type, count(*) FROM memories WHERE tenant_id = %(tenant)s AND {{scope}} AND {ACTIVE}
GROUP BY 1 ORDER BY 2 DESC, 1"""
# The users, agents and runs holding memories (each id its own entity), with their active and total memories and
# when they first and last changed; most recently changed first.
_ENTITIES = f"""
SELECT kind, name, count(*) FILTER (WHERE active), count(*), min(created_at), max(updated_at) FROM (
    SELECT 'user' AS kind, user_id AS name, ({ACTIVE}) AS active, created_at, updated_at FROM memories
    WHERE tenant_id = %(tenant)s AND user_id IS NOT NULL
    UNION ALL
    SELECT 'agent', agent_id, ({ACTIVE}), created_at, updated_at FROM memories
    WHERE tenant_id = %(tenant)s AND agent_id IS NOT NULL
    UNION ALL
    SELECT 'run', run_id, ({ACTIVE}), created_at, updated_at FROM memories
    WHERE tenant_id = %(tenant)s AND run_id IS NOT NULL) AS e
GROUP BY kind, name ORDER BY max(updated_at) DESC, kind, name LIMIT %(limit)s OFFSET %(offset)s"""
_ENTITY_COUNT = """SELECT (SELECT count(DISTINCT user_id) FROM memories WHERE tenant_id = %(tenant)s)
    + (SELECT count(DISTINCT agent_id) FROM memories WHERE tenant_id = %(tenant)s)
    + (SELECT count(DISTINCT run_id) FROM memories WHERE tenant_id = %(tenant)s)"""
# Every row of a memory scope (a tenant-wide purge): idempotency records of other APIs name no scope.
_ANY_SCOPE = "(user_id IS NOT NULL OR agent_id IS NOT NULL OR run_id IS NOT NULL)"
_PURGE_CACHE = """DELETE FROM embedding_cache WHERE tenant_id = %(tenant)s AND sha256 = ANY(%(hashes)s)"""


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to insert. ``index_text`` is what BM25 indexes (the text, with its speaker when known);
    ``embedding`` is ``dim`` floats from ``model``; ``valid_from`` None means now."""

    scope: MemoryScope
    memory: str
    hash: str
    memory_type: str
    categories: list[str]
    confidence: float
    importance: float
    metadata: dict[str, Any]
    source_kind: str
    source_id: str | None
    valid_from: datetime | None
    pinned: bool
    expires_at: datetime | None
    model: str
    embedding: Any
    index_text: str
    verified: bool = False
    source_type: str | None = None
    episode_messages: list[dict[str, Any]] | None = None
    prompt_version: str | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """What recall ranks a candidate memory by besides its text: its row id ``seq``, ``speaker`` (``metadata.speaker``,
    as text), ``valid_from``, ``source_kind`` and ``source_id`` (with ``valid_from``, they name the add that stored
    it: :attr:`session`), ``importance``, ``pinned``, ``created_at``, ``last_accessed_at``, its neighbours
    ``previous`` / ``following`` among the memories of its add (None at the ends, or when neighbours were not asked
    for), its cosine ``similarity`` to the query in [−1, 1] (None without a query vector) and whether it ``asks``
    something (its text holds a question mark) — a narrow row, so ranking a hundred candidates returns no text or
    JSON."""

    seq: int
    speaker: str | None
    valid_from: datetime
    source_kind: str
    source_id: str | None
    importance: float
    pinned: bool
    created_at: datetime
    last_accessed_at: datetime | None
    previous: int | None
    following: int | None
    similarity: float | None
    asks: bool

    @property
    def session(self) -> tuple[datetime, str, str | None]:
        """The add (one conversation's session, or the facts extracted from it) the memory came from: the key its
        neighbours share."""
        return self.valid_from, self.source_kind, self.source_id


@dataclass(frozen=True, slots=True)
class Entity:
    """A user, agent or run holding memories: ``kind`` (``user``, ``agent``, ``run``), its id ``name``, its
    ``active`` and ``total`` memories (every version and status), when its first memory was created and its
    latest changed."""

    kind: str
    name: str
    active: int
    total: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One event of a memory's history (texts None once scrubbed by a delete)."""

    id: int
    memory_id: str
    event: str
    old_memory: str | None
    new_memory: str | None
    actor: str
    details: dict[str, Any]
    created_at: datetime


def scope_predicate(scope: MemoryScope) -> tuple[sql.Composable, dict[str, Any]]:
    """``user_id = … AND agent_id = …`` for the ids ``scope`` names, with its parameters (``scope_user`` …)."""
    parts, params = [], {}
    for column, value in scope.named().items():
        name = "scope_" + column.removesuffix("_id")
        parts.append(sql.SQL("{} = {}").format(sql.Identifier(column), sql.Placeholder(name)))
        params[name] = value
    return sql.SQL(" AND ").join(parts), params


def lock_scope(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope) -> None:
    """Serialise writers of overlapping scopes until the transaction ends: one transaction-level advisory lock per
    id the scope names, always taken in the order user, agent, run (so never a deadlock). Two adds of one fact
    store it once, an update never interleaves with an add's decisions, and a purge of a user waits for adds to
    any of that user's scopes."""
    for column, value in scope.named().items():
        conn.execute(_LOCK, (f"{tenant_id}/{column}/{value}",))


def insert(conn: psycopg.Connection, tenant_id: str, memory_id: str, new: NewMemory) -> Memory:
    """Insert a memory (the tsvector computed once, here)."""
    from pgvector import Vector

    params = {"id": memory_id, "tenant": tenant_id, **new.scope.as_dict(), "memory": new.memory, "hash": new.hash,
              "memory_type": new.memory_type, "categories": list(new.categories), "confidence": new.confidence,
              "importance": new.importance, "metadata": Jsonb(new.metadata), "source_kind": new.source_kind,
              "source_id": new.source_id, "valid_from": new.valid_from, "pinned": new.pinned,
              "expires_at": new.expires_at, "verified": new.verified, "source_type": new.source_type,
              "model": new.model, "dim": len(new.embedding),
              "embedding": new.embedding if isinstance(new.embedding, Vector) else Vector(list(new.embedding)),
              "index_text": new.index_text, "prompt_version": new.prompt_version,
              "episode_messages": Jsonb(new.episode_messages) if new.episode_messages is not None else None}
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        row = cur.execute(_INSERT, params).fetchone()
    assert row is not None
    return row


def insert_many(conn: psycopg.Connection, tenant_id: str, rows: Sequence[tuple[str, NewMemory]]) -> None:
    """Insert ``(memory id, memory)`` pairs in one statement (the tsvectors computed once, there), their ``seq``
    ascending in input order (the add's write order). Nothing is read back: the caller has the ids and texts."""
    from pgvector import Vector

    if not rows:
        return
    vectors = [new.embedding if isinstance(new.embedding, Vector) else Vector(list(new.embedding))
               for _, new in rows]
    payload = [{"id": memory_id, **new.scope.as_dict(), "memory": new.memory, "hash": new.hash,
                "memory_type": new.memory_type, "categories": list(new.categories), "confidence": new.confidence,
                "importance": new.importance, "metadata": new.metadata, "source_kind": new.source_kind,
                "source_id": new.source_id, "valid_from": _iso(new.valid_from), "pinned": new.pinned,
                "expires_at": _iso(new.expires_at), "verified": new.verified, "source_type": new.source_type,
                "model": new.model, "dim": vector.dimensions(), "index_text": new.index_text,
                "episode_messages": new.episode_messages, "prompt_version": new.prompt_version, "ord": i}
               for i, ((memory_id, new), vector) in enumerate(zip(rows, vectors))]
    conn.execute(_INSERT_MANY, {"tenant": tenant_id, "rows": Jsonb(payload), "embeddings": vectors})


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def get(conn: psycopg.Connection, tenant_id: str, memory_id: str) -> Memory:
    """The tenant's memory ``memory_id`` (any status).

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": memory_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param="memory_id")
    return row


def fetch_by_seq(conn: psycopg.Connection, tenant_id: str, seqs: Sequence[int], *,
                 touch: bool = False) -> dict[int, Memory]:
    """``{seq: memory}`` for the tenant's memories with these row ids. With ``touch``, also counts an access of
    each (:func:`touch`) in the same round trip; the rows returned are as they were before it."""
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        if not touch or not seqs:
            return {m.seq: m for m in cur.execute(_BY_SEQ, {"tenant": tenant_id, "seqs": list(seqs)}).fetchall()}
        with conn.pipeline():
            cur.execute(_BY_SEQ, {"tenant": tenant_id, "seqs": list(seqs)})
            _touch(conn, tenant_id, seqs)
        return {m.seq: m for m in cur.fetchall()}


def candidates(conn: psycopg.Connection, tenant_id: str, seqs: Sequence[int], *, vector: Sequence[float] | None,
               neighbours: sql.Composable | None = None, params: dict[str, Any] | None = None,
               user_id: str | None = None) -> list[Ranking]:
    """The :class:`Ranking` rows of the tenant's memories ``seqs`` (any order), with their similarity to
    ``vector``. With ``neighbours`` (an SQL boolean over ``memories``, alias-free, with its ``params``: the scope and
    filters whose rows may be returned), also each one's neighbours among those rows (``previous`` /
    ``following``), and the rows of those neighbours with their own neighbours (which need not be returned). With
    ``user_id`` (the scope lies in that user's history), the neighbours are found by index probes around each
    candidate (bounded by the candidates); else by numbering the scope's rows."""
    from pgvector import Vector

    if not seqs:
        return []
    query = None if vector is None else vector if isinstance(vector, Vector) else Vector(list(vector))
    statement: sql.Composable
    if neighbours is not None and user_id is not None:
        columns = sql.SQL(_RANKING_COLUMNS).format(m=sql.Identifier("x"))
        statement = sql.SQL(_CANDIDATES_PROBED).format(
            c_columns=sql.SQL(_RANKING_COLUMNS).format(m=sql.Identifier("m")),
            before=sql.SQL(_PROBE).format(columns=columns, side=sql.SQL("<"), order=sql.SQL("DESC"), scope=neighbours),
            after=sql.SQL(_PROBE).format(columns=columns, side=sql.SQL(">"), order=sql.SQL(""), scope=neighbours))
    else:
        rows = sql.SQL(_NEIGHBOURS).format(scope=neighbours) if neighbours is not None else sql.SQL(_ALONE)
        statement = sql.SQL(_CANDIDATES).format(rows=rows)
    values = {**(params or {}), "tenant": tenant_id, "seqs": list(seqs), "q": query,
              "dim": query.dimensions() if query is not None else 0, "neighbour_user": user_id}
    with conn.cursor(row_factory=class_row(Ranking)) as cur:
        return cur.execute(statement, values).fetchall()


def speakers(conn: psycopg.Connection, tenant_id: str, scope: sql.Composable, params: dict[str, Any], *,
             limit: int = SPEAKER_SAMPLE) -> list[str]:
    """The distinct non-blank ``metadata.speaker`` values (sorted) among at most ``limit`` memories of the
    tenant matching ``scope`` (an SQL boolean over ``memories``, alias-free, with its ``params``): one statement,
    bounded by ``limit`` (:data:`SPEAKER_SAMPLE`) whatever the scope's size. Database errors propagate."""
    statement = sql.SQL(_SPEAKERS).format(scope=scope)
    rows = conn.execute(statement, {**params, "tenant": tenant_id, "limit": limit}).fetchall()
    return [row[0] for row in rows]


def tail_speakers(conn: psycopg.Connection, tenant_id: str, scope: sql.Composable, params: dict[str, Any],
                  tail: sql.Composable, tail_params: dict[str, Any], *, limit: int = SPEAKER_SAMPLE) -> list[str]:
    """:func:`speakers` among the scope's rows of a user's tail (``tail``: an SQL boolean over ``memories``,
    :func:`chalicelib.search.partitions.tail_predicate`): the body's are kept with its partition."""
    statement = sql.SQL(_TAIL_SPEAKERS).format(scope=scope, tail=tail)
    rows = conn.execute(statement, {**params, **tail_params, "tenant": tenant_id, "limit": limit},
                        prepare=False).fetchall()
    return [row[0] for row in rows]


def find_by_hash(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope, digest: str) -> Memory | None:
    """The scope's oldest active memory with normalised-text hash ``digest``, or None."""
    predicate, params = scope_predicate(scope)
    statement = sql.SQL(_BY_HASH).format(scope=predicate)
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        return cur.execute(statement, {**params, "tenant": tenant_id, "hash": digest}).fetchone()


def find_by_hashes(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope,
                   digests: Sequence[str]) -> dict[str, Memory]:
    """``{hash: the scope's oldest active memory with that normalised-text hash}`` for the ``digests`` found (one
    statement for a whole add)."""
    if not digests:
        return {}
    predicate, params = scope_predicate(scope)
    statement = sql.SQL(_BY_HASHES).format(scope=predicate)
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        rows = cur.execute(statement, {**params, "tenant": tenant_id, "hashes": list(set(digests))}).fetchall()
    return {m.hash: m for m in rows}


def similar(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope, vector: Sequence[float],
            limit: int) -> list[tuple[Memory, float]]:
    """The scope's ``limit`` active memories nearest to ``vector`` (exact cosine), with their similarity in [−1, 1],
    nearest first."""
    from pgvector import Vector

    predicate, params = scope_predicate(scope)
    statement = sql.SQL(_SIMILAR).format(scope=predicate)
    rows = conn.execute(statement, {**params, "tenant": tenant_id, "q": Vector(list(vector)), "dim": len(vector),
                                    "limit": limit}).fetchall()
    names = [f.name for f in dataclasses.fields(Memory)]
    return [(Memory(**dict(zip(names, row[:-1]))), float(row[-1])) for row in rows]


def list_page(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope, page: Page, *,
              memory_types: Sequence[str] | None = None, include_inactive: bool = False) -> tuple[list[Memory], bool]:
    """One page of the scope's memories (active ones unless ``include_inactive``), optionally of some types:
    ``(rows, has_more)``."""
    predicate, params = scope_predicate(scope)
    where, order, page_params = keyset(page, "id")
    statement = sql.SQL(_LIST).format(scope=predicate, keyset=where, order=order)
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        rows = cur.execute(statement, {**params, **page_params, "tenant": tenant_id,
                                       "types": list(memory_types) if memory_types else None,
                                       "all": include_inactive}).fetchall()
    return trim(page, rows)


def count(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope, *, memory_types: Sequence[str] | None = None,
          include_inactive: bool = False) -> int:
    """How many memories :func:`list_page` pages through for the same arguments."""
    predicate, params = scope_predicate(scope)
    statement = sql.SQL(_COUNT).format(scope=predicate)
    return int(one(conn.execute(statement, {**params, "tenant": tenant_id,
                                            "types": list(memory_types) if memory_types else None,
                                            "all": include_inactive}))[0])


def close(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, valid_to: datetime | None,
          superseded_by: str | None = None, invalidated_by: str | None = None) -> None:
    """Close a memory: it stopped holding at ``valid_to`` (None: now), replaced by ``superseded_by`` or contradicted
    by ``invalidated_by``."""
    conn.execute(_CLOSE, {"tenant": tenant_id, "id": memory_id, "valid_to": valid_to,
                          "superseded_by": superseded_by, "invalidated_by": invalidated_by})


def bump(conn: psycopg.Connection, tenant_id: str, memory_ids: Sequence[str], *, confidence_delta: float) -> None:
    """Heard again: raise confidence by ``confidence_delta`` (capped at 1) and count an access."""
    if memory_ids:
        conn.execute(_BUMP, {"tenant": tenant_id, "ids": list(memory_ids), "delta": confidence_delta})


def touch(conn: psycopg.Connection, tenant_id: str, seqs: Sequence[int]) -> None:
    """Count an access of each memory (row ids ``seqs``: recall returned them), at most once per
    :data:`ACCESS_GRANULARITY_S`.

    Outside a transaction the update is its own transaction and commits with ``synchronous_commit = off`` (set for
    that transaction only, in the statement): access counts are statistics, and waiting for the WAL flush
    (milliseconds per search) protects nothing but the last few accesses from a crash — never consistency
    (PostgreSQL manual, "Asynchronous Commit"). Inside a caller's transaction it follows that transaction."""
    if seqs:
        _touch(conn, tenant_id, seqs)


def _touch(conn: psycopg.Connection, tenant_id: str, seqs: Sequence[int]) -> None:
    alone = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    statement = sql.SQL(_TOUCH).format(asynchronous=sql.SQL(_ASYNCHRONOUS if alone else ""))
    conn.execute(statement, {"tenant": tenant_id, "seqs": list(seqs)})


@dataclass(frozen=True, slots=True)
class Edit:
    """Fields a revision or an edit sets (None: unchanged; ``expires_at`` is set, also to None, when
    ``set_expires``)."""

    memory_type: str | None = None
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    importance: float | None = None
    pinned: bool | None = None
    set_expires: bool = False
    expires_at: datetime | None = None
    verified: bool | None = None

    def params(self) -> dict[str, Any]:
        """The statement parameters of these fields."""
        return {"memory_type": self.memory_type,
                "metadata": Jsonb(self.metadata) if self.metadata is not None else None,
                "categories": self.categories, "importance": self.importance, "pinned": self.pinned,
                "set_expires": self.set_expires, "expires_at": self.expires_at, "verified": self.verified}


def revise(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, text: str, hash: str, index_text: str,
           model: str, embedding: Sequence[float], valid_from: datetime | None, edit: Edit = Edit(),
           prompt_version: str | None = None) -> tuple[Memory, str]:
    """Give memory ``memory_id`` a new version (its id stays): the old version is kept as a closed row (new id,
    ``valid_to`` = the new version's ``valid_from``, ``superseded_by`` the memory); returns ``(memory, id of the
    old version's row)``. ``prompt_version``: the prompts whose answers wrote the new text (None: written by
    hand). Call inside a transaction.

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    from pgvector import Vector

    from chalicelib import ids

    snapshot = ids.new_id(ids.MEMORY)
    valid = {"valid_to": valid_from or datetime.now(UTC)}
    if conn.execute(_SNAPSHOT, {"tenant": tenant_id, "id": memory_id, "snapshot": snapshot, **valid}).rowcount == 0:
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param="memory_id")
    params = {"tenant": tenant_id, "id": memory_id, "memory": text, "hash": hash, "model": model,
              "dim": len(embedding), "embedding": embedding if isinstance(embedding, Vector) else Vector(
                  list(embedding)), "index_text": index_text, "prompt_version": prompt_version, **valid,
              **edit.params()}
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        row = cur.execute(_REVISE, params).fetchone()
    assert row is not None
    return row, snapshot


def edit(conn: psycopg.Connection, tenant_id: str, memory_id: str, changes: Edit) -> Memory:
    """Change a memory's attributes (not its text: see :func:`revise`).

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    with conn.cursor(row_factory=class_row(Memory)) as cur:
        row = cur.execute(_EDIT, {"tenant": tenant_id, "id": memory_id, **changes.params()}).fetchone()
    if row is None:
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param="memory_id")
    return row


def delete(conn: psycopg.Connection, tenant_id: str, memory_id: str) -> list[str]:
    """Delete a memory with its earlier versions and scrub their text from their history (the events stay);
    returns the deleted texts (``[]`` when there was no such memory). Call inside a transaction."""
    rows = conn.execute(_DELETE, {"tenant": tenant_id, "id": memory_id}).fetchall()
    conn.execute(_SCRUB, {"tenant": tenant_id, "ids": [memory_id, *(r[0] for r in rows)]})
    return [r[1] for r in rows]


def record(conn: psycopg.Connection, tenant_id: str, memory: Memory | str, scope: MemoryScope, event: str, *,
           old: str | None, new: str | None, actor: str, details: dict[str, Any] | None = None) -> None:
    """Append an event to a memory's history (``memory``: the row, or its id)."""
    memory_id = memory if isinstance(memory, str) else memory.id
    conn.execute(_RECORD, {"tenant": tenant_id, "memory_id": memory_id, **scope.as_dict(), "event": event,
                           "old": old, "new": new, "actor": actor, "details": Jsonb(details or {})})


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One history entry to append (:func:`record_many`): the memory (row or id), the scope copied into the
    history, the event, the texts before and after, who did it and details."""

    memory: Memory | str
    scope: MemoryScope
    event: str
    old: str | None
    new: str | None
    actor: str
    details: dict[str, Any] | None = None


def record_many(conn: psycopg.Connection, tenant_id: str, events: Sequence[HistoryEvent]) -> None:
    """Append many history entries in one statement, in order."""
    if not events:
        return
    payload = [{"memory_id": e.memory if isinstance(e.memory, str) else e.memory.id, **e.scope.as_dict(),
                "event": e.event, "old": e.old, "new": e.new, "actor": e.actor, "details": e.details or {}, "ord": i}
               for i, e in enumerate(events)]
    conn.execute(_RECORD_MANY, {"tenant": tenant_id, "rows": Jsonb(payload)})


def history(conn: psycopg.Connection, tenant_id: str, memory_id: str) -> list[HistoryRow]:
    """Every event of a memory, oldest first (also of a deleted one, texts scrubbed)."""
    with conn.cursor(row_factory=class_row(HistoryRow)) as cur:
        return cur.execute(_HISTORY, {"tenant": tenant_id, "id": memory_id}).fetchall()


def stats(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope | None) -> dict[str, Any]:
    """Counts of the tenant's (or one scope's) memories: ``{"total", "active", "superseded", "invalidated",
    "consolidated", "archived", "expired", "users", "agents", "runs", "active_by_type": {type: n}}``."""
    predicate, params = scope_predicate(scope) if scope is not None else (sql.SQL("true"), {})
    params = {**params, "tenant": tenant_id}
    row = conn.execute(sql.SQL(_STATS).format(scope=predicate), params).fetchone()
    assert row is not None
    names = ("active", "superseded", "invalidated", "consolidated", "archived", "expired", "total", "users", "agents",
             "runs")
    out: dict[str, Any] = dict(zip(names, (int(v) for v in row)))
    out["active_by_type"] = {t: int(n) for t, n in conn.execute(sql.SQL(_STATS_BY_TYPE).format(scope=predicate),
                                                                 params).fetchall()}
    return out


def entities(conn: psycopg.Connection, tenant_id: str, *, limit: int, offset: int = 0) -> tuple[list[Entity], int]:
    """One page of the tenant's entities (each user, agent and run id holding memories), most recently changed
    first: ``(entities, how many there are in all)``."""
    rows = conn.execute(_ENTITIES, {"tenant": tenant_id, "limit": limit, "offset": offset}).fetchall()
    total = int(one(conn.execute(_ENTITY_COUNT, {"tenant": tenant_id}))[0])
    return [Entity(kind, name, int(active), int(total_), created, updated)
            for kind, name, active, total_, created, updated in rows], total


def exchange_text(prompt: str, answer: str) -> str:
    """What an exchange is indexed and embedded as (seed 004, "Storage Flow")."""
    return f"User: {prompt}\nAssistant: {answer}"


def purge(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope | None) -> dict[str, int]:
    """Remove everything that holds the scope's text: its memories, their history, add jobs, idempotency records,
    exchanges and the embeddings cached for those texts (``scope`` None: every scope of the tenant, i.e. every row
    that names a user, agent or run). Returns rows removed per kind. Call inside a transaction."""
    from chalicelib.store.embedding_cache import text_hash as cache_hash

    predicate, params = scope_predicate(scope) if scope is not None else (sql.SQL(_ANY_SCOPE), {})
    params = {**params, "tenant": tenant_id}
    texts = {row[0] for row in conn.execute(sql.SQL(_PURGE_TEXTS).format(scope=predicate), params)}
    for prompt, answer in conn.execute(sql.SQL(_PURGE_EXCHANGE_TEXTS).format(scope=predicate), params):
        texts.update((prompt, answer, exchange_text(prompt, answer)))
    for old, new in conn.execute(sql.SQL(_PURGE_HISTORY_TEXTS).format(scope=predicate), params):
        texts.update(t for t in (old, new) if t)
    counts = {kind: conn.execute(sql.SQL(statement).format(scope=predicate), params).rowcount
              for kind, statement in _PURGE.items()}
    hashes = [cache_hash(text) for text in texts]
    counts["cached_embeddings"] = conn.execute(_PURGE_CACHE, {"tenant": tenant_id, "hashes": hashes}).rowcount
    return counts
