"""Agent profiles (seed 000, "Integration with Agent Profiles"; ``/v1/agents``, an Engram extension): a name, a
model, instructions, tools (``file_search`` with its default ``vector_store_ids``, function tools), memory settings
and metadata, stored per tenant (``agents``, migration 0015). A response request that names an agent
(``extra_body={"agent": "agent_…"}``) gets the profile merged under it, field by field (:func:`merge`): what the
request sets wins. Several agents may search the same vector stores; each keeps its own memories (the ``agent_id``
scope defaults to the agent's id).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.errors import NotFoundError
from chalicelib.store.paging import Page, keyset, trim

__all__ = ["Agent", "check_tools", "create", "delete", "get", "list_page", "merge", "update"]

_COLUMNS = "id, tenant_id, name, model, instructions, tools, memory, metadata, created_at, updated_at"
_INSERT = f"""INSERT INTO agents (id, tenant_id, name, model, instructions, tools, memory, metadata)
VALUES (%(id)s, %(tenant)s, %(name)s, %(model)s, %(instructions)s, %(tools)s, %(memory)s, %(metadata)s)
RETURNING {_COLUMNS}"""
_GET = f"SELECT {_COLUMNS} FROM agents WHERE tenant_id = %(tenant)s AND id = %(id)s"
_LIST = f"""SELECT {_COLUMNS} FROM agents WHERE tenant_id = %(tenant)s AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_UPDATE = f"""UPDATE agents SET name = %(name)s, model = %(model)s, instructions = %(instructions)s,
    tools = %(tools)s, memory = %(memory)s, metadata = %(metadata)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s RETURNING {_COLUMNS}"""
_DELETE = "DELETE FROM agents WHERE tenant_id = %(tenant)s AND id = %(id)s"
# Request fields an agent profile supplies when the request leaves them unset.
MERGED_FIELDS = ("model", "instructions", "tools")


@dataclass(frozen=True, slots=True)
class Agent:
    """A row of ``agents``: ``tools`` in the Responses API's request shape, ``memory`` the memory extension's
    fields (:class:`chalicelib.responses.schemas.MemoryOptions`) or None."""

    id: str
    tenant_id: str
    name: str | None
    model: str | None
    instructions: str | None
    tools: list[dict[str, Any]]
    memory: dict[str, Any] | None
    metadata: dict[str, str]
    created_at: datetime
    updated_at: datetime

    def fields(self) -> dict[str, Any]:
        """The editable fields: ``name, model, instructions, tools, memory, metadata``."""
        return {"name": self.name, "model": self.model, "instructions": self.instructions, "tools": self.tools,
                "memory": self.memory, "metadata": self.metadata}


def _params(tenant_id: str, agent_id: str, values: dict[str, Any]) -> dict[str, Any]:
    return {"tenant": tenant_id, "id": agent_id, "name": values.get("name"), "model": values.get("model"),
            "instructions": values.get("instructions"), "tools": Jsonb(values.get("tools") or []),
            "memory": Jsonb(values["memory"]) if values.get("memory") is not None else None,
            "metadata": Jsonb(values.get("metadata") or {})}


def check_tools(conn: psycopg.Connection, tenant_id: str, tools: list[dict[str, Any]] | None) -> None:
    """Check a profile's tools as ``POST /v1/responses`` would, and that every vector store its ``file_search``
    names exists for the tenant — its own, or one another tenant shared, which ``file_search`` may search as well
    (a stored profile can always be used).

    Raises:
        InvalidRequestError: a malformed tool (``param`` ``tools.<i>...``) or vector store id.
        NotFoundError: (``param`` ``tools.<i>.vector_store_ids.<j>``) no such vector store.
    """
    from chalicelib.responses import schemas
    from chalicelib.store import vector_stores

    for i, tool in enumerate(schemas.parse_tools(tools)):
        if isinstance(tool, schemas.FileSearchTool):
            for j, store_id in enumerate(tool.vector_store_ids):
                param = f"tools.{i}.vector_store_ids.{j}"
                ids.validate_id(store_id, ids.VECTOR_STORE, param=param)
                try:
                    vector_stores.get(conn, tenant_id, store_id, shared=True)
                except NotFoundError as exc:
                    raise NotFoundError(exc.message, param=param) from None


def create(conn: psycopg.Connection, tenant_id: str, values: dict[str, Any]) -> Agent:
    """Store a new profile from validated ``values`` (the fields of :meth:`Agent.fields`)."""
    with conn.cursor(row_factory=class_row(Agent)) as cur:
        row = cur.execute(_INSERT, _params(tenant_id, ids.new_id(ids.AGENT), values)).fetchone()
    assert row is not None
    return row


def get(conn: psycopg.Connection, tenant_id: str, agent_id: str, *, param: str = "agent_id") -> Agent:
    """The tenant's profile ``agent_id``.

    Raises:
        NotFoundError: (404, ``param``) no such agent for this tenant.
    """
    with conn.cursor(row_factory=class_row(Agent)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": agent_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No agent found with id '{agent_id}'.", param=param)
    return row


def list_page(conn: psycopg.Connection, tenant_id: str, page: Page) -> tuple[list[Agent], bool]:
    """One cursor page of the tenant's profiles: ``(rows, has_more)``."""
    from psycopg import sql

    where, order, params = keyset(page, "id")
    with conn.cursor(row_factory=class_row(Agent)) as cur:
        rows = cur.execute(sql.SQL(_LIST).format(keyset=where, order=order),
                           {**params, "tenant": tenant_id}).fetchall()
    return trim(page, rows)


def update(conn: psycopg.Connection, tenant_id: str, agent_id: str, values: dict[str, Any]) -> Agent:
    """Replace the profile's fields with ``values`` (the caller merges changes into :meth:`Agent.fields`).

    Raises:
        NotFoundError: no such agent for this tenant.
    """
    with conn.cursor(row_factory=class_row(Agent)) as cur:
        row = cur.execute(_UPDATE, _params(tenant_id, agent_id, values)).fetchone()
    if row is None:
        raise NotFoundError(f"No agent found with id '{agent_id}'.", param="agent_id")
    return row


def delete(conn: psycopg.Connection, tenant_id: str, agent_id: str) -> None:
    """Delete a profile (its memories stay: they belong to the ``agent_id`` scope, purged separately).

    Raises:
        NotFoundError: no such agent for this tenant.
    """
    if conn.execute(_DELETE, {"tenant": tenant_id, "id": agent_id}).rowcount == 0:
        raise NotFoundError(f"No agent found with id '{agent_id}'.", param="agent_id")


def merge(body: dict[str, Any], agent: Agent) -> dict[str, Any]:
    """``body`` (a ``POST /v1/responses`` JSON object) with the profile's ``model``, ``instructions`` and
    ``tools`` filled in where the request leaves them unset (absent or null). The request wins field by field; a
    request that sends its own ``tools`` replaces the profile's list. Memory settings merge separately, field by
    field (:mod:`chalicelib.responses.memory`)."""
    merged = dict(body)
    for name in MERGED_FIELDS:
        value = getattr(agent, name)
        if merged.get(name) is None and value not in (None, []):
            merged[name] = value
    return merged
