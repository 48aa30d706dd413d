"""A tenant's own settings (the ``tenants`` row): its memory defaults for responses (migration 0015). Tenants are
created on first use (:func:`chalicelib.store.vector_stores.ensure_tenant`)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

__all__ = ["memory_defaults", "set_memory_defaults"]

_GET = "SELECT memory_defaults FROM tenants WHERE id = %s"
_SET = """INSERT INTO tenants (id, memory_defaults) VALUES (%(id)s, %(value)s)
ON CONFLICT (id) DO UPDATE SET memory_defaults = excluded.memory_defaults"""


def memory_defaults(conn: psycopg.Connection, tenant_id: str) -> dict[str, Any] | None:
    """The tenant's memory defaults (``{"recall", "remember", "top_k", ...}``), or None: memory is off unless a
    request or an agent turns it on."""
    row = conn.execute(_GET, (tenant_id,)).fetchone()
    return row[0] if row else None


def set_memory_defaults(conn: psycopg.Connection, tenant_id: str, value: dict[str, Any] | None) -> None:
    """Replace the tenant's memory defaults (None clears them); creates the tenant if new."""
    conn.execute(_SET, {"id": tenant_id, "value": Jsonb(value) if value is not None else None})
