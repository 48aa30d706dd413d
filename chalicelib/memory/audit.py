"""The memory lifecycle audit (seed 002 §13, "Lifecycle Audit"): one row per archive, restore, quota archive,
episode creation, instance migration, compression, consolidation, purge, expiry and TTL sweep — event, entity,
scope ids, actor, time and counts or ids in ``details`` — never the text of a memory (a purge's row keeps the
counts of what was removed, not what it said). Read with ``GET /v1/memories/audit`` and ``engram memory audit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.memory.model import MemoryScope

__all__ = ["AuditRow", "Entity", "Event", "list_page", "record"]

Event = Literal["archive", "restore", "quota_archive", "episode_created", "instance_migration", "compression",
                "consolidation", "unconsolidation", "purge", "expiry", "ttl_sweep", "persona_update"]
Entity = Literal["memory", "episode", "instance", "scope", "persona"]

_INSERT = """INSERT INTO memory_audit (tenant_id, event, entity_type, entity_id, user_id, agent_id, run_id, actor,
    details)
VALUES (%(tenant)s, %(event)s, %(entity)s, %(entity_id)s, %(user_id)s, %(agent_id)s, %(run_id)s, %(actor)s,
    %(details)s)"""
_LIST = """SELECT id, tenant_id, event, entity_type, entity_id, user_id, agent_id, run_id, actor, details, created_at
FROM memory_audit WHERE tenant_id = %(tenant)s AND {filters}
ORDER BY id {direction} LIMIT %(limit)s"""


@dataclass(frozen=True, slots=True)
class AuditRow:
    """A row of ``memory_audit``."""

    id: int
    tenant_id: str
    event: str
    entity_type: str
    entity_id: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    actor: str
    details: dict[str, Any]
    created_at: datetime


def record(conn: psycopg.Connection, tenant_id: str, event: Event, entity: Entity, entity_id: str | None,
           scope: MemoryScope | None, *, actor: str, details: dict[str, Any] | None = None) -> None:
    """Append an audit row (``details``: counts and ids only, never memory text)."""
    ids = scope.as_dict() if scope is not None else {"user_id": None, "agent_id": None, "run_id": None}
    conn.execute(_INSERT, {"tenant": tenant_id, "event": event, "entity": entity, "entity_id": entity_id, **ids,
                           "actor": actor, "details": Jsonb(details or {})})


def list_page(conn: psycopg.Connection, tenant_id: str, *, limit: int, after: int | None = None,
              order: str = "desc", event: str | None = None, entity_id: str | None = None,
              user_id: str | None = None) -> tuple[list[AuditRow], bool]:
    """One page of the tenant's audit, newest first by default (``after``: the last ``id`` of the previous page):
    ``(rows, has_more)``."""
    filters: list[sql.Composable] = [sql.SQL("true")]
    params: dict[str, Any] = {"tenant": tenant_id, "limit": limit + 1}
    if after is not None:
        filters.append(sql.SQL("id < %(after)s" if order == "desc" else "id > %(after)s"))
        params["after"] = after
    for name, value in (("event", event), ("entity_id", entity_id), ("user_id", user_id)):
        if value is not None:
            filters.append(sql.SQL("{} = {}").format(sql.Identifier(name), sql.Placeholder(name)))
            params[name] = value
    statement = sql.SQL(_LIST).format(filters=sql.SQL(" AND ").join(filters),
                                      direction=sql.SQL("DESC" if order == "desc" else "ASC"))
    with conn.cursor(row_factory=class_row(AuditRow)) as cur:
        rows = cur.execute(statement, params).fetchall()
    return rows[:limit], len(rows) > limit
