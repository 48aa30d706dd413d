"""Expired memories (``expires_at`` in the past) are hidden from every read at once (the ``ACTIVE`` predicate of
:mod:`chalicelib.memory.store`); this module deletes them later:

- **working memory** (seed 002 §1: short-term state of one run, 24 h TTL unless its write says otherwise) as soon
  as it has expired — a TTL sweep;
- any other memory with an ``expires_at`` once its tenant's ``expired_retention_days`` (default 30) have passed
  since — an expiry.

A deleted memory's history keeps an ``EXPIRE`` event without text, and each deletion writes an audit row
(``ttl_sweep`` or ``expiry``, ids only). Deleting by predicate makes a repeated or resumed sweep a no-op.
"""

from __future__ import annotations

import psycopg

from chalicelib.memory import audit, store
from chalicelib.memory.model import MemoryScope

__all__ = ["sweep"]

_EXPIRED = """
WITH gone AS (
    SELECT m.id FROM memories m JOIN tenants t ON t.id = m.tenant_id
    WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND m.expires_at IS NOT NULL
      AND m.expires_at <= now() - CASE WHEN m.memory_type = 'working' THEN interval '0'
          ELSE make_interval(days => coalesce((t.limits->>'expired_retention_days')::int, %(default_days)s)) END
    ORDER BY m.expires_at, m.id LIMIT %(limit)s FOR UPDATE OF m SKIP LOCKED)
DELETE FROM memories m USING gone WHERE m.id = gone.id
RETURNING m.id, m.tenant_id, m.user_id, m.agent_id, m.run_id, m.memory_type"""
_VERSIONS = """DELETE FROM memories WHERE tenant_id = %(tenant)s AND superseded_by = ANY(%(ids)s) RETURNING id"""
_SCRUB = """UPDATE memory_history SET old_memory = NULL, new_memory = NULL
WHERE tenant_id = %(tenant)s AND memory_id = ANY(%(ids)s)"""


def sweep(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, actor: str,
          default_retention_days: int) -> dict[str, int]:
    """Delete up to ``limit`` memories due for deletion (one transaction); returns ``{"ttl_swept", "expired"}``."""
    counts = {"ttl_swept": 0, "expired": 0}
    with conn.transaction():
        rows = conn.execute(_EXPIRED, {"tenant": tenant_id, "limit": limit,
                                       "default_days": default_retention_days}).fetchall()
        by_tenant: dict[str, list[str]] = {}
        for memory_id, tenant, user_id, agent_id, run_id, kind in rows:
            by_tenant.setdefault(tenant, []).append(memory_id)
            scope = MemoryScope(user_id, agent_id, run_id)
            event: audit.Event = "ttl_sweep" if kind == "working" else "expiry"
            store.record(conn, tenant, memory_id, scope, "EXPIRE", old=None, new=None, actor=actor,
                         details={"reason": event})
            audit.record(conn, tenant, event, "memory", memory_id, scope, actor=actor)
            counts["ttl_swept" if kind == "working" else "expired"] += 1
        for tenant, ids in by_tenant.items():  # their earlier versions go too, and every text of their history
            versions = [r[0] for r in conn.execute(_VERSIONS, {"tenant": tenant, "ids": ids}).fetchall()]
            conn.execute(_SCRUB, {"tenant": tenant, "ids": ids + versions})
    return counts
