"""Searching memories: hybrid relevance from the shared vector and BM25 legs (:mod:`chalicelib.search.ranking`,
over the ``MEMORIES`` corpus, the scope restricted in SQL), weighted with recency and importance by a strategy, and
multiplied by a bounded decay.

Per result (every term in [0, 1]):

    relevance  = (w_v · similarity + w_t · keyword) / (w_v + w_t)
    recency    = 0.5 ^ (days since last access, else since valid_from / half-life)
    base       = (w_v · similarity + w_t · keyword + w_r · recency + w_i · importance) / (w_v + w_t + w_r + w_i)
    decay      = 1 if pinned else max(floor, 0.5 ^ (days since last access / half-life))
    score      = base · decay

``similarity`` is the cosine similarity (clamped at 0), ``keyword`` BM25 over the scope divided by the best
score in the scope for the query. The half-life (90 days) and the floor (0.5) follow seed 000 ("Memory Decay") and
are settings; the floor is what keeps old but correct memories findable (unbounded decay zeroes them). The
strategies' weights are seed 002's ("Weighting Strategies").

Invalidated, superseded, merged, archived and expired memories are hidden unless asked for; ``as_of`` shows the
memories that were valid at that instant (valid_from ≤ t < valid_to: time travel over the validity intervals,
where valid_from is when the conversation that taught it happened).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.memory import store
from chalicelib.memory.model import Memory, MemoryScope
from chalicelib.search.corpus import MEMORIES, Scope
from chalicelib.search.filters import compile_filter
from chalicelib.search.ranking import Weights, rank

__all__ = ["STRATEGIES", "Hit", "Query", "Strategy", "search"]


@dataclass(frozen=True, slots=True)
class Strategy:
    """Weights (≥ 0) of vector similarity, keyword relevance, recency and importance."""

    vector: float
    text: float
    recency: float
    importance: float


# Seed 002, "Weighting Strategies" (vector / text / freshness / importance).
STRATEGIES: dict[str, Strategy] = {
    "semantic": Strategy(0.70, 0.20, 0.05, 0.05),
    "keyword": Strategy(0.30, 0.60, 0.05, 0.05),
    "balanced": Strategy(0.50, 0.30, 0.10, 0.10),
    "recency": Strategy(0.40, 0.25, 0.25, 0.10),
    "priority": Strategy(0.35, 0.25, 0.10, 0.30),
}
DEFAULT_STRATEGY = "balanced"
# Candidates each leg returns before the strategy re-scores them.
MIN_CANDIDATES = 100
_DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Query:
    """A validated search: ``query`` within ``scope``; at most ``top_k`` results scoring ≥ ``score_threshold``;
    ``filters`` over ``metadata`` (vector-store filter grammar); optional ``memory_types`` and ``created_after`` /
    ``created_before``; ``include_invalidated`` shows closed memories too; ``as_of`` time-travels."""

    query: str
    scope: MemoryScope
    top_k: int = 10
    score_threshold: float = 0.0
    filters: Any = None
    memory_types: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    strategy: Strategy = field(default_factory=lambda: STRATEGIES[DEFAULT_STRATEGY])
    include_invalidated: bool = False
    as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One result: the ``memory``, its ``score`` and how it was made (``details``)."""

    memory: Memory
    score: float
    details: dict[str, float | None]


def search(conn: psycopg.Connection, settings: Settings, tenant_id: str, query: Query, *, embedder: Embedder,
           now: datetime | None = None, touch: bool = True) -> list[Hit]:
    """The best memories of the scope for ``query.query``, best first (see the module docstring). Counts an access
    of each returned memory when ``touch``.

    Raises:
        InvalidRequestError: malformed ``filters``.
        UpstreamError: embedding the query failed.
    """
    now = now or datetime.now(UTC)
    where = compile_filter(query.filters, column="metadata")
    scope = _scope(tenant_id, query)
    depth = max(MIN_CANDIDATES, 4 * query.top_k)
    ranked = rank(conn, MEMORIES, scope, [query.query], embedder=embedder, settings=settings, depth=depth,
                  where=where, indexed_rows=0,
                  weights=Weights(embedding=query.strategy.vector or 1e-9, text=query.strategy.text or 1e-9))
    if not ranked:
        return []
    best_keyword = max((r.keyword or 0.0) for r in ranked) or 1.0
    rows = store.fetch_by_seq(conn, tenant_id, [r.id for r in ranked])
    hits = []
    for r in ranked:
        memory = rows.get(r.id)
        if memory is None:
            continue
        hits.append(_score(memory, r.similarity or 0.0, (r.keyword or 0.0) / best_keyword, query.strategy,
                           settings, now))
    hits.sort(key=lambda h: (-h.score, h.memory.seq))
    hits = [h for h in hits if h.score >= query.score_threshold][:query.top_k]
    if touch and hits:
        store.touch(conn, tenant_id, [h.memory.id for h in hits])
    return hits


def decay(memory: Memory, settings: Settings, now: datetime) -> float:
    """The bounded decay factor in [floor, 1] (1 for pinned memories) from the days since the last access (else
    since the memory became valid)."""
    if memory.pinned:
        return 1.0
    return max(settings.memory_decay_floor, _half_life(memory, settings, now))


def _half_life(memory: Memory, settings: Settings, now: datetime) -> float:
    since = memory.last_accessed_at or memory.valid_from or memory.created_at
    days = max(0.0, (now - since).total_seconds() / _DAY_S)
    return math.pow(0.5, days / max(settings.memory_half_life_days, 1e-9))


def _score(memory: Memory, similarity: float, keyword: float, strategy: Strategy, settings: Settings,
           now: datetime) -> Hit:
    recency = _half_life(memory, settings, now)
    total = strategy.vector + strategy.text + strategy.recency + strategy.importance
    textual = strategy.vector + strategy.text
    relevance = (strategy.vector * similarity + strategy.text * keyword) / textual if textual else 0.0
    base = (strategy.vector * similarity + strategy.text * keyword + strategy.recency * recency
            + strategy.importance * memory.importance) / total if total else 0.0
    factor = decay(memory, settings, now)
    return Hit(memory, round(base * factor, 6), {"relevance": round(relevance, 6), "vector": round(similarity, 6),
                                                 "keyword": round(keyword, 6), "recency": round(recency, 6),
                                                 "importance": round(memory.importance, 6),
                                                 "decay": round(factor, 6)})


def _scope(tenant_id: str, query: Query) -> Scope:
    predicate, params = store.scope_predicate(query.scope)
    parts: list[sql.Composable] = [predicate]
    if query.as_of is not None:
        parts.append(sql.SQL("valid_from <= %(as_of)s "
                             "AND (valid_to IS NULL OR valid_to > %(as_of)s) AND archived_at IS NULL "
                             "AND consolidated_into IS NULL AND (expires_at IS NULL OR expires_at > %(as_of)s)"))
        params["as_of"] = query.as_of
    elif query.include_invalidated:
        parts.append(sql.SQL("archived_at IS NULL AND consolidated_into IS NULL "
                             "AND (expires_at IS NULL OR expires_at > now())"))
    else:
        parts.append(sql.SQL(store.ACTIVE))
    if query.memory_types:
        parts.append(sql.SQL("memory_type = ANY(%(types)s)"))
        params["types"] = list(query.memory_types)
    if query.created_after is not None:
        parts.append(sql.SQL("created_at >= %(created_after)s"))
        params["created_after"] = query.created_after
    if query.created_before is not None:
        parts.append(sql.SQL("created_at <= %(created_before)s"))
        params["created_before"] = query.created_before
    return Scope(tenant_id=tenant_id, predicate=sql.SQL(" AND ").join(parts), params=params, rows=1)


def scopes_of(hits: Sequence[Hit]) -> list[dict[str, str | None]]:
    """The scopes of ``hits`` (for logs and audits)."""
    return [h.memory.scope.as_dict() for h in hits]
