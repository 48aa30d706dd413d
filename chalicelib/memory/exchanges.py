"""Exchanges (seed 004, "Exchange Storage"): every completed turn of a conversation or response chain with memory
on — the user's prompt and the assistant's answer — kept in the memory scope of its request and searchable by
similarity across the user's threads ("Context Retrieval": cosine similarity ≥ :data:`SIMILARITY_THRESHOLD`,
:data:`CONTEXT_RESULTS` results by default).

An exchange is indexed as ``"User: {prompt}\\nAssistant: {answer}"`` (seed 004's "Storage Flow") in the
``EXCHANGES`` corpus: the same vector and BM25 legs as memories and chunks (:mod:`chalicelib.search.ranking`); a
user's exchanges are a partition of their own, indexed on the tenant's memory backend like their memories
(:mod:`chalicelib.search.partitions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from chalicelib import ids
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.errors import NotFoundError
from chalicelib.memory.model import MemoryScope
from chalicelib.memory.store import exchange_text, scope_predicate
from chalicelib.search.backends.pgvector import PARTITION_MIN_ROWS, PGVECTOR
from chalicelib.search.corpus import EXCHANGES, Scope
from chalicelib.search.partitions import PartitionLegs, lookup, user_partition
from chalicelib.search.ranking import Weights, rank
from chalicelib.store.paging import Page, keyset, trim

__all__ = ["CONTEXT_RESULTS", "SIMILARITY_THRESHOLD", "Exchange", "ExchangeHit", "NewExchange", "count", "delete",
           "get", "insert", "list_page", "search", "text_of", "thread", "thread_of"]

# Seed 004, "Similarity Search / Configuration".
SIMILARITY_THRESHOLD = 0.65
CONTEXT_RESULTS = 5
_CANDIDATES = 50
# The most exchanges of a scope the exact threshold check reads (a scope holding more is ranked without it): the
# size up to which pgvector reads a user's history exactly anyway (search.backends.pgvector.PARTITION_MIN_ROWS).
_EXACT_CHECK_ROWS = PARTITION_MIN_ROWS
# How many of the scope's exchanges (of the query's dimension; at most %(cap)s) were read, and how many of them lie
# within %(max_distance)s cosine distance of the query: by the user's (or agent's, run's) index, no ranking.
_WITHIN = """SELECT count(*), count(*) FILTER (WHERE s.distance <= %(max_distance)s) FROM (
    SELECT embedding <=> %(vector)s AS distance FROM exchanges
    WHERE tenant_id = %(tenant)s AND {scope} AND embedding_dim = %(dim)s LIMIT %(cap)s) AS s"""

_COLUMNS = """seq, id, tenant_id, user_id, agent_id, run_id, thread_id, session_id, response_id, user_prompt,
    assistant_response, prior_exchange_ids, continuation_seq, created_at"""
# continuation_seq: the thread's last one, plus one when this exchange opens a new session.
_INSERT = f"""
INSERT INTO exchanges (id, tenant_id, user_id, agent_id, run_id, thread_id, session_id, response_id, user_prompt,
    assistant_response, prior_exchange_ids, continuation_seq, embedding_model, embedding_dim, embedding, keywords,
    keyword_length)
SELECT %(id)s, %(tenant)s, %(user_id)s, %(agent_id)s, %(run_id)s, %(thread)s, %(session)s, %(response)s,
    %(prompt)s, %(answer)s, %(prior)s,
    coalesce((SELECT e.continuation_seq + (e.session_id <> %(session)s)::int FROM exchanges e
              WHERE e.tenant_id = %(tenant)s AND e.thread_id = %(thread)s ORDER BY e.seq DESC LIMIT 1), 0),
    %(model)s, %(dim)s, %(embedding)s, k.v, engram_tsvector_length(k.v)
FROM (SELECT to_tsvector('english', %(text)s) AS v) AS k
ON CONFLICT (tenant_id, response_id) DO NOTHING
RETURNING {_COLUMNS}"""
_BY_SEQ = f"SELECT {_COLUMNS} FROM exchanges WHERE tenant_id = %(tenant)s AND seq = ANY(%(seqs)s)"
_THREAD_OF = "SELECT thread_id FROM exchanges WHERE tenant_id = %(tenant)s AND response_id = %(response)s"
_THREAD = f"SELECT {_COLUMNS} FROM exchanges WHERE tenant_id = %(tenant)s AND thread_id = %(thread)s ORDER BY seq"
_GET = f"SELECT {_COLUMNS} FROM exchanges WHERE tenant_id = %(tenant)s AND id = %(id)s"
_DELETE = "DELETE FROM exchanges WHERE tenant_id = %(tenant)s AND id = %(id)s"
# A page of a scope's exchanges (optionally one thread's or session's), by id (creation order).
_PAGE = f"""SELECT {_COLUMNS} FROM exchanges
WHERE tenant_id = %(tenant)s AND {{scope}} AND {{where}} AND {{page}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_COUNT = "SELECT count(*) FROM exchanges WHERE tenant_id = %(tenant)s AND {scope}"


@dataclass(frozen=True, slots=True)
class Exchange:
    """A row of ``exchanges`` (migration 0015)."""

    seq: int
    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    thread_id: str
    session_id: str
    response_id: str
    user_prompt: str
    assistant_response: str
    prior_exchange_ids: list[str]
    continuation_seq: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class NewExchange:
    """An exchange to store: its ``scope``, ``thread_id``, ``session_id`` (None: the thread), the ``response_id``
    that answered, the texts, and the memories/exchanges recalled for the answer (``prior_ids``)."""

    scope: MemoryScope
    thread_id: str
    session_id: str | None
    response_id: str
    user_prompt: str
    assistant_response: str
    prior_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (stored with the job that records it)."""
        return {"scope": self.scope.as_dict(), "thread_id": self.thread_id, "session_id": self.session_id,
                "response_id": self.response_id, "user_prompt": self.user_prompt,
                "assistant_response": self.assistant_response, "prior_ids": list(self.prior_ids)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NewExchange:
        """The exchange :meth:`to_json` wrote."""
        return cls(scope=MemoryScope(**data["scope"]), thread_id=data["thread_id"], session_id=data["session_id"],
                   response_id=data["response_id"], user_prompt=data["user_prompt"],
                   assistant_response=data["assistant_response"], prior_ids=tuple(data.get("prior_ids") or ()))


@dataclass(frozen=True, slots=True)
class ExchangeHit:
    """An exchange found for a query with its cosine ``similarity`` in [0, 1] and fused ``score``."""

    exchange: Exchange
    similarity: float
    score: float


def text_of(new: NewExchange) -> str:
    """What the exchange is embedded and indexed as."""
    return exchange_text(new.user_prompt, new.assistant_response)


def insert(conn: psycopg.Connection, tenant_id: str, new: NewExchange, *, model: str,
           vector: Sequence[float]) -> Exchange | None:
    """Store an exchange with its embedding ``vector`` (of :func:`text_of`, by ``model``); None when the response
    already has one (a redelivery stores nothing twice)."""
    from pgvector import Vector

    text = text_of(new)
    params = {"id": ids.new_id(ids.EXCHANGE), "tenant": tenant_id, **new.scope.as_dict(), "thread": new.thread_id,
              "session": new.session_id or new.thread_id, "response": new.response_id, "prompt": new.user_prompt,
              "answer": new.assistant_response, "prior": list(new.prior_ids), "model": model,
              "dim": len(vector), "embedding": Vector(list(vector)), "text": text}
    with conn.cursor(row_factory=class_row(Exchange)) as cur:
        return cur.execute(_INSERT, params).fetchone()


def search(conn: psycopg.Connection, settings: Settings, tenant_id: str, scope: MemoryScope, query: str, *,
           embedder: Embedder, limit: int = CONTEXT_RESULTS, threshold: float = SIMILARITY_THRESHOLD,
           vector: Sequence[float] | None = None) -> list[ExchangeHit]:
    """The scope's exchanges (across its threads) most similar to ``query``: hybrid-ranked, kept when their cosine
    similarity is at least ``threshold``, at most ``limit``, best first. ``vector``: the query's embedding when the
    caller has it already (else it is embedded here).

    Raises:
        UpstreamError: embedding the query failed.
    """
    predicate, params = scope_predicate(scope)
    if vector is not None and threshold > 0 and _none_within(conn, tenant_id, predicate, params, vector, threshold):
        return []
    user_id = user_partition(EXCHANGES, tenant_id, scope.named())
    user = lookup(conn, EXCHANGES, tenant_id, user_id, embedder.dimension) if user_id is not None else None
    ranked = rank(conn, EXCHANGES, Scope(tenant_ids=(tenant_id,), predicate=predicate, params=params, rows=1,
                                         collection=predicate, user=user), [query],
                  embedder=embedder, settings=settings, depth=_CANDIDATES, where=None, indexed_rows=0,
                  weights=Weights(1.0, 1.0), vectors=[vector] if vector is not None else None,
                  backend=PartitionLegs(settings, scope.named()) if user is not None else PGVECTOR)
    kept = [r for r in ranked if (r.similarity or 0.0) >= threshold][:limit]
    if not kept:
        return []
    with conn.cursor(row_factory=class_row(Exchange)) as cur:
        rows = {e.seq: e for e in cur.execute(_BY_SEQ, {"tenant": tenant_id, "seqs": [r.id for r in kept]})}
    return [ExchangeHit(rows[r.id], r.similarity or 0.0, r.score) for r in kept if r.id in rows]


def _none_within(conn: psycopg.Connection, tenant_id: str, predicate: sql.Composable, params: dict[str, Any],
                 vector: Sequence[float], threshold: float) -> bool:
    """True when the scope (``predicate`` with its ``params``, :func:`~chalicelib.memory.store.scope_predicate`)
    holds at most :data:`_EXACT_CHECK_ROWS` exchanges of ``vector``'s dimension and none of them reaches cosine
    similarity ``threshold`` (in (0, 1]) to ``vector``: then no ranking could keep one, so :func:`search` answers
    at once. The ranking's similarity is 1 − cosine distance, clamped to [0, 1] (``search.ranking``), so a row
    reaches the threshold exactly when its distance is at most 1 − ``threshold``. Seed 004's threshold (0.65) is
    rarely reached: this spares most responses the ranking's statements (~8 ms a response at LoCoMo's ~280
    exchanges a user; ``benchmarks/responses_memory.py``). False when the scope holds more rows (they are ranked)."""
    from pgvector import Vector

    statement = sql.SQL(_WITHIN).format(scope=predicate)
    row = conn.execute(statement, {**params, "tenant": tenant_id, "vector": Vector(list(vector)), "dim": len(vector),
                                   "max_distance": 1.0 - threshold, "cap": _EXACT_CHECK_ROWS + 1}).fetchone()
    assert row is not None
    read, within = int(row[0]), int(row[1])
    return read <= _EXACT_CHECK_ROWS and within == 0


def thread_of(conn: psycopg.Connection, tenant_id: str, response_id: str) -> str | None:
    """The thread of the exchange ``response_id`` answered, or None (no exchange stored for it, yet)."""
    row = conn.execute(_THREAD_OF, {"tenant": tenant_id, "response": response_id}).fetchone()
    return row[0] if row else None


def thread(conn: psycopg.Connection, tenant_id: str, thread_id: str) -> list[Exchange]:
    """A thread's exchanges, oldest first."""
    with conn.cursor(row_factory=class_row(Exchange)) as cur:
        return cur.execute(_THREAD, {"tenant": tenant_id, "thread": thread_id}).fetchall()


def get(conn: psycopg.Connection, tenant_id: str, exchange_id: str) -> Exchange:
    """One exchange of the tenant.

    Raises:
        NotFoundError: no such exchange (param ``exchange_id``).
    """
    with conn.cursor(row_factory=class_row(Exchange)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": exchange_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No exchange found with id '{exchange_id}'.", param="exchange_id")
    return row


def delete(conn: psycopg.Connection, tenant_id: str, exchange_id: str) -> bool:
    """Delete one exchange (its text and embedding; the conversation or response it came from is untouched);
    False when there was none."""
    return conn.execute(_DELETE, {"tenant": tenant_id, "id": exchange_id}).rowcount > 0


def list_page(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope, page: Page, *,
              thread_id: str | None = None, session_id: str | None = None) -> tuple[list[Exchange], bool]:
    """One cursor page of the scope's exchanges (those whose ids equal every id the scope names, as a memory
    read), optionally of one ``thread_id`` or ``session_id``: ``(exchanges, has_more)``."""
    predicate, params = scope_predicate(scope)
    where, order, page_params = keyset(page, "id")
    filters: list[sql.Composable] = [sql.SQL("TRUE")]
    for column, value in (("thread_id", thread_id), ("session_id", session_id)):
        if value is not None:
            filters.append(sql.SQL("{} = {}").format(sql.Identifier(column), sql.Placeholder(column)))
            params[column] = value
    query = sql.SQL(_PAGE).format(scope=predicate, where=sql.SQL(" AND ").join(filters), page=where, order=order)
    with conn.cursor(row_factory=class_row(Exchange)) as cur:
        rows = cur.execute(query, {**params, **page_params, "tenant": tenant_id}).fetchall()
    return trim(page, rows)


def count(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope | None) -> int:
    """How many exchanges the tenant (or one scope) holds."""
    predicate, params = scope_predicate(scope) if scope is not None else (sql.SQL("TRUE"), {})
    row = conn.execute(sql.SQL(_COUNT).format(scope=predicate), {**params, "tenant": tenant_id}).fetchone()
    return int(row[0]) if row else 0
