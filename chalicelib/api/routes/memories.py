"""Memories API: ``/v1/memories`` — add (inline or as a job), search, list, get, update, delete, history, restore,
audit and purge of a scope, through the memory service (:mod:`chalicelib.memory`). Every read and write names a
scope (``user_id``, ``agent_id``, ``run_id``) inside the caller's tenant; row-level security stands behind both.

The helpers around the routes (:func:`add`, :func:`search`, :func:`update`, :func:`purge_scope`) turn a request
into the service's call and back; the mem0 adapter (:mod:`chalicelib.api.routes.mem0`) uses them too, so both
APIs validate and answer alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, get_args

import psycopg
from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids, memory
from chalicelib.access import fill_scope
from chalicelib.api import objects, request
from chalicelib.api.context import current_access, current_tenant, tenant_db
from chalicelib.api.memory_schemas import (
    AddMemories,
    ListParams,
    SearchMemories,
    UpdateMemory,
    scope_of,
    to_add_request,
    to_query,
    to_time,
)
from chalicelib.api.query import BOOLEAN, INTEGER, PAGE, accepts, choice
from chalicelib.api.routes.common import respond
from chalicelib.errors import InvalidRequestError, NotFoundError

bp = Blueprint(__name__)

ADD_ROUTE = "POST /v1/memories"
IDEMPOTENCY_HEADER = "idempotency-key"
SCOPE = ("user_id", "agent_id", "run_id")


@contextlib.contextmanager
def session(actor: str = "api") -> Iterator[tuple[psycopg.Connection, memory.Context]]:
    """The request's tenant connection and the memory service's context for it (held to the memory scope the
    request's API key is bound to, if any: :mod:`chalicelib.access`)."""
    with tenant_db() as conn:
        yield conn, memory.context(deps.current_settings(), current_tenant(), actor=actor,
                                   bound=dict(current_access().memory_scope))


def bound(named: dict[str, Any]) -> dict[str, Any]:
    """A request's body or query parameters with the scope ids of a key bound to a memory scope filled in where the
    request names none (a conflicting one is refused by the memory service)."""
    return fill_scope(current_access(), named)


def checked_id(value: str, param: str = "memory_id") -> str:
    """A ``mem_`` path parameter, checked.

    Raises:
        InvalidRequestError: wrong prefix or malformed (400, ``param``).
    """
    return ids.validate_id(value, ids.MEMORY, param=param)


def answer(added: memory.Added) -> tuple[int, dict[str, Any]]:
    """An add's wire answer: ``(200, memory.add_result)``, ``(202, memory.job)`` or the replayed one."""
    if added.replay is not None:
        return added.replay.status, added.replay.body
    if added.job is not None:
        return 202, objects.memory_job_object(added.job)
    assert added.result is not None
    return 200, objects.memory_add_result(added.result)


def add(body: dict[str, Any], *, idempotency_key: str | None, source_kind: str = "api",
        source_id: str | None = None) -> tuple[int, dict[str, Any]]:
    """The add behind ``POST /v1/memories`` (and the mem0 adapter): ``(200, memory.add_result)`` inline or
    ``(202, memory.job)`` asynchronous. Everything a client can get wrong is checked before anything is written.

    Raises:
        InvalidRequestError: a malformed body, or ``infer`` without a configured model (the message names the
            setting).
        UpstreamError: a model or embedding call failed (inline; nothing written).
    """
    parsed = request.validate(AddMemories, bound(body))
    add_request = to_add_request(parsed, source_kind=source_kind, source_id=source_id)
    key = None if idempotency_key is None else memory.Idempotency(idempotency_key, ADD_ROUTE, body, answer)
    with session() as (conn, ctx):
        return answer(memory.add(conn, ctx, add_request, run_async=parsed.run_async, key=key))


def search(body: dict[str, Any]) -> tuple[SearchMemories, list[memory.Hit]]:
    """The search behind ``POST /v1/memories/search`` (and the mem0 adapter): the validated body and its hits,
    best first.

    Raises:
        InvalidRequestError: a malformed body or filter.
        UpstreamError: embedding the query failed.
    """
    parsed = request.validate(SearchMemories, bound(body))
    with session() as (conn, ctx):
        return parsed, memory.search(conn, ctx, to_query(parsed))


def update(memory_id: str, body: dict[str, Any]) -> memory.Memory:
    """The update behind ``POST /v1/memories/{id}`` (and the mem0 adapter): new ``memory`` text makes a new
    version (re-embedded, the old one kept and visible with ``as_of``); other fields change in place; an empty
    body changes nothing. Changes are recorded in the history.

    Raises:
        InvalidRequestError: a malformed id or body, or the memory is no longer current.
        NotFoundError: no such memory for this tenant.
        UpstreamError: embedding the new text failed (nothing written).
    """
    target = checked_id(memory_id)
    parsed = request.validate(UpdateMemory, body)
    with session() as (conn, ctx):
        return memory.update(conn, ctx, target, text=parsed.memory, changes=edit_of(parsed),
                             valid_from=to_time(parsed.timestamp))


def edit_of(parsed: UpdateMemory) -> memory.Edit:
    """The attribute changes an update body asks for (``expires_at: null`` clears it)."""
    return memory.Edit(memory_type=parsed.memory_type, metadata=parsed.metadata, categories=parsed.categories,
                       importance=parsed.importance, pinned=parsed.pinned,
                       set_expires="expires_at" in parsed.model_fields_set, expires_at=to_time(parsed.expires_at),
                       verified=parsed.verified)


@bp.route("/memories", methods=["POST"])
def create_memories() -> Response:
    """Add memories from ``messages`` (see :func:`add`); ``Idempotency-Key`` makes retries safe."""
    headers = bp.current_request.headers
    key = headers.get(IDEMPOTENCY_HEADER) if headers else None
    status, out = add(request.json_body(bp.current_request), idempotency_key=key)
    return respond(out, status=status, in_progress=status == 202 and out.get("status") in ("queued", "in_progress"))


@bp.route("/memories/search", methods=["POST"])
def search_memories() -> dict:
    """The scope's memories that best answer ``query``, scored (``score``, ``score_details``)."""
    parsed, hits = search(request.json_body(bp.current_request))
    return objects.memory_search_page(parsed.query, hits)


@bp.route("/memories", methods=["GET"])
@accepts(*SCOPE, "memory_type", include_inactive=BOOLEAN, **PAGE)
def list_memories() -> dict:
    """A cursor page of the scope's memories (``user_id`` / ``agent_id`` / ``run_id``, optional ``memory_type``;
    ``include_inactive=true`` adds closed, archived and expired ones)."""
    params = request.query(bp.current_request)
    page = request.page(params, prefix=ids.MEMORY, default_limit=20, max_limit=100)
    named = bound(dict(params))
    parsed = request.validate(ListParams, {name: named[name] for name in (*SCOPE, "memory_type", "include_inactive")
                                           if name in named})
    with session() as (conn, ctx):
        rows, has_more = memory.list_page(conn, ctx, scope_of(parsed), page,
                                          memory_types=[parsed.memory_type] if parsed.memory_type else None,
                                          include_inactive=parsed.include_inactive)
    return objects.cursor_page([objects.memory_object(m) for m in rows], has_more)


@bp.route("/memories", methods=["DELETE"])
@accepts(*SCOPE, all=BOOLEAN)
def purge_memories() -> dict:
    """Purge exactly the scope named (``?user_id=`` / ``agent_id`` / ``run_id``): its memories, their history,
    add jobs, idempotency records and cached embeddings — or, with ``all=true`` and no scope, every user, agent and
    run of the tenant. The answer echoes the scope purged (``scope``; a null id means any). Anything else (no
    scope, a scope with ``all=true``, an empty, repeated or unknown parameter) is a 400 before anything is
    deleted."""
    params = request.query(bp.current_request)
    scope = purge_scope(params)
    with session() as (conn, ctx):
        counts = memory.purge(conn, ctx, scope)
    return purge_answer(scope, counts)


@bp.route("/memories/audit", methods=["GET"])
@accepts("after", "memory_id", "user_id", limit=INTEGER, order=PAGE["order"],
         event=choice(*get_args(memory.AuditEvent)))
def memory_audit() -> dict:
    """The tenant's memory lifecycle audit, newest first (``limit``, ``order``, ``after`` — the last ``id`` of the
    previous page —, and filters ``event``, ``memory_id``, ``user_id``). Never any memory text."""
    params = request.query(bp.current_request)
    page = request.page({k: v for k, v in params.items() if k != "after"}, prefix=None, default_limit=20, max_limit=100,
                        before=False)
    after = params.get("after")
    if after is not None and not after.isdigit():
        raise InvalidRequestError("Invalid 'after': expected the id (an integer) of an audit entry.", param="after",
                                  code="invalid_value")
    event = params.get("event")
    with session() as (conn, ctx):
        rows, has_more = memory.audit_page(conn, ctx, limit=page.limit, after=int(after) if after else None,
                                           order=page.order, event=event, entity_id=params.get("memory_id"),
                                           user_id=params.get("user_id"))
    data = [objects.memory_audit_entry(r) for r in rows]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


@bp.route("/memories/stats", methods=["GET"])
@accepts(*SCOPE)
def memory_stats() -> dict:
    """Counts of the tenant's memories (or one scope's: ``user_id`` / ``agent_id`` / ``run_id``) by status and, for
    active ones, by type, and of its stored exchanges (seed 004's ``/vstats``)."""
    params = request.query(bp.current_request)
    named = {name: value for name, value in bound(dict(params)).items() if name in SCOPE and value is not None}
    scope = scope_of(request.validate(ListParams, named)) if named else None
    with session() as (conn, ctx):
        counts = memory.stats(conn, ctx, scope)
    ids_ = scope.as_dict() if scope is not None else {"user_id": None, "agent_id": None, "run_id": None}
    return {"object": "memory.stats", **ids_, **counts}


@bp.route("/memories/entities", methods=["GET"])
@accepts(limit=INTEGER, offset=INTEGER)
def list_entities() -> dict:
    """The tenant's users, agents and runs holding memories, most recently changed first (a key bound to a memory
    scope: its own only), each with its memory counts → ``{"object": "list", "data": [memory.entity], "total",
    "has_more"}``; ``limit`` 1..100 (default 20) and ``offset`` page through them."""
    params = request.query(bp.current_request)
    limit, offset = params.get("limit", 20), params.get("offset", 0)
    if not 1 <= limit <= 100:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and 100, got {limit}.", param="limit",
                                  code="invalid_value")
    if offset < 0:
        raise InvalidRequestError("Invalid 'offset': must be 0 or more.", param="offset", code="invalid_value")
    with session() as (conn, ctx):
        rows, total = memory.entities(conn, ctx, limit=limit, offset=offset)
    return {"object": "list", "data": [objects.memory_entity(row) for row in rows], "total": total,
            "has_more": offset + len(rows) < total}


@bp.route("/memories/exchanges", methods=["GET"])
@accepts(*SCOPE, "thread_id", "session_id", **PAGE)
def list_exchanges() -> dict:
    """A cursor page of the scope's stored exchanges (``user_id`` / ``agent_id`` / ``run_id`` required, as for
    memories; ``thread_id`` or ``session_id`` narrow it), newest first by default."""
    params = request.query(bp.current_request)
    page = request.page(params, prefix=ids.EXCHANGE, default_limit=20, max_limit=100)
    scope = scope_of(request.validate(ListParams, {name: value for name, value in bound(dict(params)).items()
                                                   if name in SCOPE and value is not None}))
    with session() as (conn, ctx):
        rows, has_more = memory.exchanges_page(conn, ctx, scope, page, thread_id=params.get("thread_id"),
                                               session_id=params.get("session_id"))
    return objects.cursor_page([objects.exchange_object(e) for e in rows], has_more)


@bp.route("/memories/exchanges/{exchange_id}", methods=["GET"])
def retrieve_exchange(exchange_id: str) -> dict:
    """One stored exchange."""
    target = ids.validate_id(exchange_id, ids.EXCHANGE, param="exchange_id")
    with session() as (conn, ctx):
        return objects.exchange_object(memory.exchange(conn, ctx, target))


@bp.route("/memories/exchanges/{exchange_id}", methods=["DELETE"])
def delete_exchange(exchange_id: str) -> dict:
    """Delete one stored exchange: recall no longer finds it (the conversation or response it came from stays)."""
    target = ids.validate_id(exchange_id, ids.EXCHANGE, param="exchange_id")
    with session() as (conn, ctx):
        if not memory.delete_exchange(conn, ctx, target):
            raise NotFoundError(f"No exchange found with id '{target}'.", param="exchange_id")
    return objects.deleted(target, "memory.exchange.deleted")


@bp.route("/memories/{memory_id}/restore", methods=["POST"])
def restore_memory(memory_id: str) -> dict:
    """Bring an archived or merged memory back into recall."""
    target = checked_id(memory_id)
    with session() as (conn, ctx):
        return objects.memory_object(memory.restore(conn, ctx, target))


@bp.route("/memories/jobs/{job_id}", methods=["GET"])
def retrieve_memory_job(job_id: str) -> Response:
    """An asynchronous add's job: ``status``, and ``results`` and ``usage`` once completed."""
    job_id = ids.validate_id(job_id, ids.MEMORY_JOB, param="job_id")
    with session() as (conn, ctx):
        job = memory.job(conn, ctx, job_id)
    return respond(objects.memory_job_object(job), in_progress=job.status in ("queued", "in_progress"))


@bp.route("/memories/{memory_id}", methods=["GET"])
def retrieve_memory(memory_id: str) -> dict:
    """One memory (any status)."""
    target = checked_id(memory_id)
    with session() as (conn, ctx):
        return objects.memory_object(memory.get(conn, ctx, target))


@bp.route("/memories/{memory_id}", methods=["POST"])
def update_memory(memory_id: str) -> dict:
    """Update a memory: new ``memory`` text makes a new version (re-embedded, the old one kept and visible with
    ``as_of``); other fields change in place; ``{}`` changes nothing. Changes are recorded in the history."""
    return objects.memory_object(update(memory_id, request.json_body(bp.current_request)))


@bp.route("/memories/{memory_id}", methods=["DELETE"])
def delete_memory(memory_id: str) -> dict:
    """Delete a memory and its earlier versions; its history keeps the events, not the text."""
    target = checked_id(memory_id)
    with session() as (conn, ctx):
        if not memory.delete(conn, ctx, target):
            raise NotFoundError(f"No memory found with id '{target}'.", param="memory_id")
    return objects.deleted(target, "memory.deleted")


@bp.route("/memories/{memory_id}/history", methods=["GET"])
def memory_history(memory_id: str) -> dict:
    """Every event of a memory, oldest first (also of a deleted one, without its text)."""
    target = checked_id(memory_id)
    with session() as (conn, ctx):
        rows, _ = memory.history(conn, ctx, target)
    return {"object": "list", "data": [objects.memory_history_entry(r) for r in rows], "has_more": False}


def purge_scope(named: Mapping[str, Any]) -> memory.MemoryScope | None:
    """The scope a purge names: its ``user_id`` / ``agent_id`` / ``run_id`` (validated as a list's are; a bound
    key's filled in: :func:`bound`), or None (every scope of the tenant) when it says ``all: true`` and names none.

    Raises:
        InvalidRequestError: (400) no scope and no ``all=true`` (``missing_required_parameter``), or both
            (``invalid_value``, param ``all``).
    """
    if named.get("all") is not True:
        named = bound(dict(named))
    ids = {name: named[name] for name in SCOPE if named.get(name) is not None}
    if named.get("all") is True:
        if ids:
            raise InvalidRequestError(f"Invalid 'all': 'all=true' purges every scope of the tenant; it cannot be "
                                      f"combined with {', '.join(repr(n) for n in ids)}.", param="all",
                                      code="invalid_value")
        return None
    if not ids:
        raise InvalidRequestError("Missing required parameter: name the scope to purge with 'user_id', 'agent_id' "
                                  "or 'run_id', or purge every scope of the tenant with 'all=true'.",
                                  param="user_id", code="missing_required_parameter")
    return scope_of(request.validate(ListParams, ids))


def purge_answer(scope: memory.MemoryScope | None, counts: dict[str, int]) -> dict[str, Any]:
    """The native purge's answer: ``{"object": "memory.purge", "deleted", "scope": {"user_id", "agent_id",
    "run_id", "all"}, "counts"}`` (the ids also at the top level, as before; a null id matches any)."""
    ids = scope.as_dict() if scope is not None else {"user_id": None, "agent_id": None, "run_id": None}
    return {"object": "memory.purge", "deleted": True, **ids, "scope": {**ids, "all": scope is None},
            "counts": counts}
