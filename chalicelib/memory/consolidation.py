"""Consolidation (seed 000, "Memory Consolidation"): per scope, related memories are merged so duplicates stop
piling up and crowding recall.

Per scope (one user's, agent's or run's memories), the active memories of the mergeable types are compared
pairwise (exact cosine, in SQL) and grouped (union-find):

- **duplicates** — the same normalised text, or cosine ≥ ``settings.memory_near_duplicate`` (0.95, the add path's
  own threshold) — are merged without a model: the best of them (highest confidence, then importance, then the
  oldest) survives, its confidence raised, and the others point to it;
- **related** memories — cosine ≥ :data:`RELATED_SIMILARITY` (0.85) — are merged by the memory model into one new
  memory (:data:`chalicelib.chat.prompts.MEMORY_MERGE`, recorded as its ``prompt_version``) when a model is
  configured; without one, or when the model answers malformed JSON twice, they are left alone.

The merged originals get ``consolidated_into`` (they leave recall, stay in history and can be restored with
``POST /v1/memories/{id}/restore``); each merge writes ``CONSOLIDATE`` history rows and a ``consolidation`` audit
row. Each group is merged in its own transaction that first re-checks every member is still active, so a run
killed half-way and resumed merges every group exactly once. Pinned memories are never merged away (a pinned
duplicate survives its group). At most :data:`MAX_SCOPE_MEMORIES` of a scope's most recent memories are compared
per pass (the comparison is quadratic in the scope's size).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from chalicelib import ids
from chalicelib.chat import prompts, structured
from chalicelib.chat.base import ChatBackend
from chalicelib.embed.base import Embedder
from chalicelib.memory import audit, store
from chalicelib.memory.active import active
from chalicelib.memory.model import MemoryScope, text_hash

__all__ = ["MERGEABLE_TYPES", "RELATED_SIMILARITY", "ScopeKey", "consolidate_scope", "scopes_after"]

logger = logging.getLogger("engram.memory")

RELATED_SIMILARITY = 0.85
MAX_GROUP = 10  # memories merged into one by the model at most
MAX_SCOPE_MEMORIES = 2000
MERGEABLE_TYPES = ("fact", "preference", "procedural", "knowledge", "entity", "process", "skill")
CONFIDENCE_STEP = 0.05

_ACTIVE = f"{active('m')} AND m.memory_type = ANY(%(types)s)"
_SCOPES = f"""
SELECT DISTINCT m.tenant_id, coalesce(m.user_id, ''), coalesce(m.agent_id, ''), coalesce(m.run_id, '')
FROM memories m
WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND {_ACTIVE}
  AND (m.tenant_id, coalesce(m.user_id, ''), coalesce(m.agent_id, ''), coalesce(m.run_id, ''))
      > (%(t)s, %(u)s, %(a)s, %(r)s)
ORDER BY 1, 2, 3, 4 LIMIT %(limit)s"""
_SCOPE_ROWS = f"""
SELECT m.id, m.memory, m.hash, m.confidence, m.importance, m.pinned, m.created_at, m.categories, m.valid_from
FROM memories m
WHERE m.tenant_id = %(tenant)s AND coalesce(m.user_id, '') = %(u)s AND coalesce(m.agent_id, '') = %(a)s
  AND coalesce(m.run_id, '') = %(r)s AND {_ACTIVE}
ORDER BY m.created_at DESC LIMIT %(cap)s"""
_PAIRS = """
SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding) FROM memories a JOIN memories b
  ON a.embedding_dim = b.embedding_dim AND a.id < b.id
WHERE a.tenant_id = %(tenant)s AND b.tenant_id = %(tenant)s AND a.id = ANY(%(ids)s) AND b.id = ANY(%(ids)s)
  AND (a.hash = b.hash OR (a.embedding <=> b.embedding) <= %(max_distance)s)"""
_STILL_ACTIVE = f"""SELECT count(*) FROM memories m WHERE m.tenant_id = %(tenant)s AND m.id = ANY(%(ids)s)
AND {active('m')}"""
_MERGE = """UPDATE memories SET consolidated_into = %(into)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)"""
_SURVIVE = """UPDATE memories SET confidence = least(1, confidence + %(delta)s), updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s"""


@dataclass(frozen=True, slots=True, order=True)
class ScopeKey:
    """A scope as the job's cursor orders it (ids with '' for none)."""

    tenant: str
    user: str
    agent: str
    run: str

    def scope(self) -> MemoryScope:
        """The memory scope."""
        return MemoryScope(self.user or None, self.agent or None, self.run or None)

    def as_cursor(self) -> dict[str, str]:
        """The JSON cursor for this scope."""
        return {"tenant": self.tenant, "user": self.user, "agent": self.agent, "run": self.run}


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    memory: str
    hash: str
    confidence: float
    importance: float
    pinned: bool
    created_at: datetime
    categories: list[str]
    valid_from: datetime


def scopes_after(conn: psycopg.Connection, *, tenant_id: str | None, after: ScopeKey | None,
                 limit: int) -> list[ScopeKey]:
    """The next ``limit`` scopes holding mergeable memories, in cursor order after ``after``."""
    start = after or ScopeKey("", "", "", "")
    rows = conn.execute(_SCOPES, {"tenant": tenant_id, "types": list(MERGEABLE_TYPES), "t": start.tenant,
                                  "u": start.user, "a": start.agent, "r": start.run, "limit": limit}).fetchall()
    return [ScopeKey(*row) for row in rows]


def consolidate_scope(conn: psycopg.Connection, key: ScopeKey, *, near_duplicate: float, embedder: Embedder,
                      backend: ChatBackend | None, model: str | None, actor: str) -> dict[str, int]:
    """Merge the scope's duplicate and (with a model) related memories; returns ``{"groups", "merged"}``
    (groups merged, memories merged away)."""
    params = {"tenant": key.tenant, "u": key.user, "a": key.agent, "r": key.run, "types": list(MERGEABLE_TYPES),
              "cap": MAX_SCOPE_MEMORIES}
    rows = {r[0]: _Row(*r) for r in conn.execute(_SCOPE_ROWS, params).fetchall()}
    counts = {"groups": 0, "merged": 0}
    if len(rows) < 2:
        return counts
    threshold = RELATED_SIMILARITY if backend is not None and model is not None else near_duplicate
    pairs = conn.execute(_PAIRS, {"tenant": key.tenant, "ids": list(rows),
                                  "max_distance": 1 - threshold}).fetchall()
    duplicates = _groups([(a, b) for a, b, sim in pairs if sim >= near_duplicate or rows[a].hash == rows[b].hash])
    survivors: set[str] = set()
    for group in duplicates:
        survivor = _merge_duplicates(conn, key, [rows[i] for i in group], actor)
        if survivor is not None:
            survivors.add(survivor)
            counts["groups"] += 1
            counts["merged"] += len(group) - 1
    if backend is None or model is None:
        return counts
    # A duplicate group's survivor stays in the pass: it can still be merged with related memories (else a second
    # run would find that work, and a pass would not be complete).
    taken = {i for g in duplicates for i in g} - survivors
    related = _groups([(a, b) for a, b, sim in pairs if a not in taken and b not in taken])
    for group in related:
        members = sorted((rows[i] for i in group), key=lambda r: r.created_at)[:MAX_GROUP]
        if len(members) >= 2 and _merge_related(conn, key, members, embedder, backend, model, actor):
            counts["groups"] += 1
            counts["merged"] += len(members)
    return counts


def _groups(pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Connected components (union-find) of the pairs, each sorted, in a stable order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for x in parent:
        groups.setdefault(find(x), []).append(x)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def _still_active(conn: psycopg.Connection, tenant: str, ids_: list[str]) -> bool:
    (count,) = conn.execute(_STILL_ACTIVE, {"tenant": tenant, "ids": ids_}).fetchone() or (0,)
    return int(count) == len(ids_)


def _merge_duplicates(conn: psycopg.Connection, key: ScopeKey, members: list[_Row], actor: str) -> str | None:
    """Merge one duplicate group into its best member; returns that survivor's id, or None when a member is no
    longer active (merged by another run)."""
    survivor = max(members, key=lambda r: (r.pinned, r.confidence, r.importance, -r.created_at.timestamp(), r.id))
    merged = [r for r in members if r.id != survivor.id]
    scope = key.scope()
    with conn.transaction():
        store.lock_scope(conn, key.tenant, scope)
        if not _still_active(conn, key.tenant, [r.id for r in members]):
            return None
        conn.execute(_MERGE, {"tenant": key.tenant, "into": survivor.id, "ids": [r.id for r in merged]})
        conn.execute(_SURVIVE, {"tenant": key.tenant, "id": survivor.id, "delta": CONFIDENCE_STEP * len(merged)})
        for r in merged:
            store.record(conn, key.tenant, r.id, scope, "CONSOLIDATE", old=r.memory, new=survivor.memory,
                         actor=actor, details={"consolidated_into": survivor.id, "kind": "duplicate"})
        audit.record(conn, key.tenant, "consolidation", "memory", survivor.id, scope, actor=actor,
                     details={"kind": "duplicate", "merged": [r.id for r in merged]})
    return survivor.id


def _merge_related(conn: psycopg.Connection, key: ScopeKey, members: list[_Row], embedder: Embedder,
                   backend: ChatBackend, model: str, actor: str) -> bool:
    if any(r.pinned for r in members):
        members = [r for r in members if not r.pinned]
        if len(members) < 2:
            return False
    text = _merged_text(backend, model, [r.memory for r in members])
    if text is None:
        return False
    vector = embedder.embed([text])[0]
    scope = key.scope()
    with conn.transaction():
        store.lock_scope(conn, key.tenant, scope)
        if not _still_active(conn, key.tenant, [r.id for r in members]):
            return False
        new = store.insert(conn, key.tenant, ids.new_id(ids.MEMORY), store.NewMemory(
            scope=scope, memory=text, hash=text_hash(text), memory_type="fact",
            categories=list(dict.fromkeys(c for r in members for c in r.categories))[:16],
            confidence=max(r.confidence for r in members), importance=max(r.importance for r in members),
            metadata={"consolidated_from": [r.id for r in members]}, source_kind="job", source_id="consolidation",
            valid_from=min(r.valid_from for r in members), pinned=False, expires_at=None, model=embedder.model,
            embedding=vector, index_text=text, source_type="inferred", prompt_version=prompts.MEMORY_MERGE.tag))
        conn.execute(_MERGE, {"tenant": key.tenant, "into": new.id, "ids": [r.id for r in members]})
        store.record(conn, key.tenant, new, scope, "ADD", old=None, new=text, actor=actor,
                     details={"consolidated_from": [r.id for r in members]})
        for r in members:
            store.record(conn, key.tenant, r.id, scope, "CONSOLIDATE", old=r.memory, new=text, actor=actor,
                         details={"consolidated_into": new.id, "kind": "related"})
        audit.record(conn, key.tenant, "consolidation", "memory", new.id, scope, actor=actor,
                     details={"kind": "related", "merged": [r.id for r in members]})
    return True


def _merged_text(backend: ChatBackend, model: str, texts: list[str]) -> str | None:
    listing = "\n".join(f"- {t}" for t in texts)
    try:
        answer: structured.Answer[Any] = structured.ask(backend, model, prompts.MEMORY_MERGE, listing)
    except structured.MalformedAnswer as exc:
        logger.warning("consolidation answer from %s was malformed (%s); group left as it is", model, exc.problem)
        return None
    merged: prompts.MergedMemory = answer.value
    return merged.memory
