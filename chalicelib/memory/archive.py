"""Archiving and restoring memories (seed 000, "Memory Decay" and "Data Retention"): archived memories leave recall
but stay stored, with their history, and come back with :func:`restore`.

- **Stale**: a memory not accessed for its tenant's ``auto_archive_days`` (default 180) is archived — unless it is
  pinned or important (importance ≥ :data:`PROTECTED_IMPORTANCE`). Search's decay factor is bounded below (see
  :mod:`chalicelib.memory.recall`), so until then an old but correct memory is still found.
- **Quota**: a tenant over its ``max_entries`` active memories (default 10,000) gets exactly the excess archived,
  lowest value first — value being importance times the bounded decay of its last access (the same factor search
  uses), ties broken by age — and never a pinned memory. Nothing is deleted.

Each archive writes the memory's history (``ARCHIVE``) and the lifecycle audit (``archive`` or
``quota_archive``); a restore writes ``RESTORE`` and ``restore`` (and ``unconsolidation`` when it undoes a merge).
Every step finds its work by a predicate, so a repeated or resumed run changes nothing more.
"""

from __future__ import annotations

import psycopg

from chalicelib.errors import InvalidRequestError
from chalicelib.memory import audit, store
from chalicelib.memory.active import active
from chalicelib.memory.model import Memory

__all__ = ["PROTECTED_IMPORTANCE", "archive_stale", "enforce_quota", "restore"]

# Memories at least this important are never archived for staleness (seed 000: "importance protects").
PROTECTED_IMPORTANCE = 0.8
_DAY_S = 86_400

# Candidates: active (open, not merged, archived or expired), not pinned, not protected, not accessed for the
# tenant's auto_archive_days (tenants.limits, else the default).
_STALE = f"""
WITH stale AS (
    SELECT m.id FROM memories m JOIN tenants t ON t.id = m.tenant_id
    WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND {active('m')} AND NOT m.pinned
      AND m.importance < %(protected)s
      AND coalesce(m.last_accessed_at, m.created_at)
          < now() - make_interval(days => coalesce((t.limits->>'auto_archive_days')::int, %(default_days)s))
    ORDER BY m.tenant_id, m.id LIMIT %(limit)s FOR UPDATE OF m SKIP LOCKED)
UPDATE memories m SET archived_at = now(), updated_at = now() FROM stale WHERE m.id = stale.id
RETURNING m.id, m.tenant_id, m.user_id, m.agent_id, m.run_id"""
_OVER_QUOTA = f"""
SELECT m.tenant_id, count(*) - coalesce((t.limits->>'max_entries')::int, %(default_max)s) AS excess
FROM memories m JOIN tenants t ON t.id = m.tenant_id
WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND {active('m')}
GROUP BY m.tenant_id, t.limits
HAVING count(*) > coalesce((t.limits->>'max_entries')::int, %(default_max)s)
ORDER BY m.tenant_id"""
# The lowest-value active, unpinned memories of one tenant: importance × bounded decay of the last access.
_LOWEST = f"""
WITH lowest AS (
    SELECT id FROM memories
    WHERE tenant_id = %(tenant)s AND {active()} AND NOT pinned
    ORDER BY importance * greatest(%(floor)s, power(0.5, extract(epoch FROM now() - coalesce(last_accessed_at,
             created_at)) / 86400.0 / %(half_life)s)), created_at, id
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
UPDATE memories m SET archived_at = now(), updated_at = now() FROM lowest WHERE m.id = lowest.id
RETURNING m.id, m.tenant_id, m.user_id, m.agent_id, m.run_id"""
_RESTORE = """UPDATE memories SET archived_at = NULL, consolidated_into = NULL, last_accessed_at = now(),
    updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s"""


def archive_stale(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, actor: str,
                  default_days: int) -> int:
    """Archive up to ``limit`` stale memories (of one tenant, or all); returns how many. One transaction."""
    with conn.transaction():
        rows = conn.execute(_STALE, {"tenant": tenant_id, "limit": limit, "protected": PROTECTED_IMPORTANCE,
                                     "default_days": default_days}).fetchall()
        _record(conn, rows, "archive", actor)
    return len(rows)


def enforce_quota(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, actor: str, default_max: int,
                  half_life_days: float, decay_floor: float) -> int:
    """Archive, per tenant over its ``max_entries``, exactly its excess of lowest-value unpinned memories (at most
    ``limit`` per call); returns how many were archived."""
    done = 0
    over = conn.execute(_OVER_QUOTA, {"tenant": tenant_id, "default_max": default_max}).fetchall()
    for tenant, excess in over:
        take = min(int(excess), limit - done)
        if take <= 0:
            break
        with conn.transaction():
            rows = conn.execute(_LOWEST, {"tenant": tenant, "limit": take, "half_life": half_life_days,
                                          "floor": decay_floor}).fetchall()
            _record(conn, rows, "quota_archive", actor)
        done += len(rows)
    return done


def restore(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, actor: str) -> Memory:
    """Bring an archived or merged memory back into recall (its access time renewed, so it is not archived again
    at once).

    Raises:
        NotFoundError: no such memory for this tenant.
        InvalidRequestError: (code ``memory_not_archived``) the memory is neither archived nor merged.
    """
    with conn.transaction():
        current = store.get(conn, tenant_id, memory_id)
        if current.archived_at is None and current.consolidated_into is None:
            raise InvalidRequestError(f"Memory '{memory_id}' is not archived or merged; nothing to restore.",
                                      param="memory_id", code="memory_not_archived")
        store.lock_scope(conn, tenant_id, current.scope)
        conn.execute(_RESTORE, {"tenant": tenant_id, "id": memory_id})
        details = {"consolidated_into": current.consolidated_into} if current.consolidated_into else {}
        store.record(conn, tenant_id, current, current.scope, "RESTORE", old=None, new=None, actor=actor,
                     details=details)
        audit.record(conn, tenant_id, "restore", "memory", memory_id, current.scope, actor=actor, details=details)
        if current.consolidated_into:
            audit.record(conn, tenant_id, "unconsolidation", "memory", memory_id, current.scope, actor=actor,
                         details=details)
        return store.get(conn, tenant_id, memory_id)


def _record(conn: psycopg.Connection, rows: list, event: audit.Event, actor: str) -> None:
    from chalicelib.memory.model import MemoryScope

    for memory_id, tenant, user_id, agent_id, run_id in rows:
        scope = MemoryScope(user_id, agent_id, run_id)
        store.record(conn, tenant, memory_id, scope, "ARCHIVE", old=None, new=None, actor=actor,
                     details={"reason": "quota" if event == "quota_archive" else "stale"})
        audit.record(conn, tenant, event, "memory", memory_id, scope, actor=actor)
