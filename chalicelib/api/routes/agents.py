"""Agent profiles API: ``/v1/agents`` (an Engram extension in OpenAI's conventions: Bearer keys, the error
envelope, cursor lists, Unix-second timestamps). A profile's ``tools`` are checked exactly as ``POST
/v1/responses`` checks them and its ``memory`` as the request's ``memory`` extension, so a profile that is stored
can always be used."""

from __future__ import annotations

from typing import Any

from chalice import Blueprint
from pydantic import BaseModel, Field

from chalicelib import ids
from chalicelib.api import objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import PAGE, accepts
from chalicelib.responses import agents, schemas
from chalicelib.validation import RequestBody
from chalicelib.wire import Metadata

bp = Blueprint(__name__)

MAX_INSTRUCTIONS_CHARS = 256_000


class AgentBody(RequestBody):
    """``POST /v1/agents`` and ``POST /v1/agents/{id}`` (for an update only the fields sent change; null clears)."""

    name: str | None = Field(default=None, max_length=256)
    model: str | None = Field(default=None, min_length=1, max_length=256)
    instructions: str | None = Field(default=None, max_length=MAX_INSTRUCTIONS_CHARS)
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=schemas.MAX_TOOLS)
    memory: schemas.MemoryOptions | None = None
    metadata: Metadata | None = None


def _values(body: AgentBody, fields: set[str], base: dict[str, Any] | None = None) -> dict[str, Any]:
    values = dict(base or {})
    for name in fields:
        value = getattr(body, name)
        values[name] = value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value
    return values


def _agent_id(value: str) -> str:
    return ids.validate_id(value, ids.AGENT, param="agent_id")


@bp.route("/agents", methods=["POST"])
def create_agent() -> dict:
    """Create a profile."""
    body = request.validate(AgentBody, request.json_body(bp.current_request))
    with tenant_db() as conn:
        agents.check_tools(conn, current_tenant(), body.tools)
        agent = agents.create(conn, current_tenant(), _values(body, set(body.model_fields_set)))
    return objects.agent_object(agent)


@bp.route("/agents", methods=["GET"])
@accepts(**PAGE)
def list_agents() -> dict:
    """A cursor page of the tenant's profiles (``limit``, ``order``, ``after``, ``before``)."""
    page = request.page(request.query(bp.current_request), prefix=ids.AGENT, default_limit=20, max_limit=100)
    with tenant_db() as conn:
        rows, has_more = agents.list_page(conn, current_tenant(), page)
    return objects.cursor_page([objects.agent_object(a) for a in rows], has_more)


@bp.route("/agents/{agent_id}", methods=["GET"])
def retrieve_agent(agent_id: str) -> dict:
    """One profile."""
    with tenant_db() as conn:
        return objects.agent_object(agents.get(conn, current_tenant(), _agent_id(agent_id)))


@bp.route("/agents/{agent_id}", methods=["POST"])
def update_agent(agent_id: str) -> dict:
    """Change the fields sent (null clears one)."""
    target = _agent_id(agent_id)
    body = request.validate(AgentBody, request.json_body(bp.current_request))
    tenant = current_tenant()
    with tenant_db() as conn, conn.transaction():
        current = agents.get(conn, tenant, target)
        agents.check_tools(conn, tenant, body.tools)
        agent = agents.update(conn, tenant, target, _values(body, set(body.model_fields_set), current.fields()))
    return objects.agent_object(agent)


@bp.route("/agents/{agent_id}", methods=["DELETE"])
def delete_agent(agent_id: str) -> dict:
    """Delete a profile (its memories stay in the ``agent_id`` scope; purge them with ``DELETE /v1/memories``)."""
    target = _agent_id(agent_id)
    with tenant_db() as conn:
        agents.delete(conn, current_tenant(), target)
    return objects.deleted(target, "agent.deleted")
