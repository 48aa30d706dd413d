"""mem0 compatibility: the paths and shapes the official ``mem0ai`` client (2.2) uses, served at ``/mem0`` over
the same memory service as ``/v1/memories`` (nothing here stores or ranks memories itself). A team on mem0's
platform changes ``host`` and keeps its code::

    MemoryClient(api_key="sk-engram-...", host="https://<engram>/mem0")

Why a prefix: mem0's paths end in a slash and some equal Engram's own once it is dropped
(``GET /v1/memories/{id}/`` vs ``GET /v1/memories/{id}``), and the slash is dropped before any route is chosen —
API Gateway (REST) strips it, Chalice's local server does the same to match it, and Chalice refuses routes that end
in one. Under ``/mem0`` the two APIs never meet, and ``/mem0/v1/memories/{id}/`` reaches the route below.

| mem0 client | path (under /mem0) | served by |
|---|---|---|
| construction | ``GET /v1/ping/`` | the tenant as ``org_id`` and ``project_id`` |
| ``add`` | ``POST /v3/memories/add/`` | the native add (inline: ``results``; a queued add: ``event_id``) |
| ``get_all`` | ``POST /v3/memories/`` (``page``, ``page_size``) | the native list, paged, with ``count`` |
| ``search`` | ``POST /v3/memories/search/`` | the native search |
| ``get`` / ``update`` / ``delete`` | ``GET`` / ``PUT`` / ``DELETE /v1/memories/{id}/`` | get, update, delete |
| ``history`` | ``GET /v1/memories/{id}/history/`` | the memory's history |
| ``delete_all`` | ``DELETE /v1/memories/`` (``user_id`` ...) | the native purge of the scope |
| (a queued add) | ``GET /v1/event/{event_id}/`` | the add job |

Keys are Engram's (``Authorization: Token <key>``, as mem0 sends it, or ``Bearer``); errors keep Engram's
envelope, which the client raises as its own exceptions by status (400 ``ValidationError``, 401
``AuthenticationError``, 404 ``MemoryNotFoundError``).
"""

from __future__ import annotations

from typing import Any

from chalice import Blueprint

from chalicelib import ids
from chalicelib.api import mem0_objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.mem0_schemas import (
    MAX_PAGE_SIZE,
    Mem0Add,
    Mem0List,
    Mem0Search,
    Mem0Update,
    clamp_top_k,
    expires_at,
    metadata_conditions,
    select,
    unix_seconds,
)
from chalicelib.api.memory_schemas import ListParams, scope_of
from chalicelib.api.routes import memories as native
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.memory import add_jobs, manage
from chalicelib.memory import store as memories
from chalicelib.memory.model import Memory
from chalicelib.store.paging import Page
from chalicelib.validation import check_storable

bp = Blueprint(__name__)

URL_PREFIX = "/mem0"
DEFAULT_PAGE_SIZE = 100  # mem0's get_all default
MAX_PAGE = 100_000
_SKIP_CHUNK = 1000  # rows read per step while skipping to a get_all page


@bp.route("/v1/ping", methods=["GET"])
def ping() -> dict:
    """The key is valid: the client reads ``org_id`` and ``project_id`` (both required) and ``user_email``."""
    tenant = current_tenant()
    return {"status": "ok", "org_id": tenant, "project_id": tenant, "user_email": None}


@bp.route("/v3/memories/add", methods=["POST"])
def add() -> dict:
    """mem0's add: the messages through the native add. Inline: ``{"results": [...]}`` (mem0 add results); queued
    (``infer`` with a memory queue): ``{"event_id", "status": "PENDING", "message"}``, polled at
    ``/v1/event/{event_id}/``. ``async_mode: false`` asks for an inline add."""
    body = request.validate(Mem0Add, request.json_body(bp.current_request))
    selection = select(body)
    native_body: dict[str, Any] = {"messages": body.messages, **selection.ids, "infer": body.infer}
    if body.metadata is not None:
        native_body["metadata"] = body.metadata
    if body.timestamp is not None:
        native_body["timestamp"] = unix_seconds(body.timestamp, "timestamp")
    if body.expiration_date is not None:
        native_body["expires_at"] = expires_at(body.expiration_date)
    if body.async_mode is False:
        native_body["async"] = False
    status, out = native.add_memories(native_body, idempotency_key=None)
    if status == 202:
        return {"message": "Memory processing has been queued for background execution.", "status": "PENDING",
                "event_id": out["id"]}
    return {"results": mem0_objects.add_results(out["results"])}


@bp.route("/v3/memories", methods=["POST"])
def get_all() -> dict:
    """mem0's get_all: the scope's memories, newest first, one page (``page`` from 1, ``page_size`` ≤ 200, query
    string first) as ``{"count", "next", "previous", "results"}``; ``next`` / ``previous`` are query-only URL
    references (``?page=2&page_size=100``), right under any host, stage or prefix."""
    params = request.query(bp.current_request)
    body = request.validate(Mem0List, request.json_body(bp.current_request))
    for name in ("start_date", "end_date"):
        if getattr(body, name):
            raise _unsupported(name, "get_all does not filter on dates; search takes a created_at filter.")
    for name in ("categories", "keywords"):
        if getattr(body, name):
            raise _unsupported(name, f"Engram does not filter memories on {name}.")
    _refuse_show_expired(body.show_expired)
    selection = select(body)
    page = _int_param(params, "page", body.page or 1, 1, MAX_PAGE)
    size = _int_param(params, "page_size", body.page_size or DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    scope = scope_of(request.validate(ListParams, selection.ids))
    inactive = body.latest_only is False
    with tenant_db() as conn:
        tenant = current_tenant()
        total = memories.count(conn, tenant, scope, include_inactive=inactive)
        rows: list[Memory] = []
        cursor, skip = None, (page - 1) * size
        if skip < total:
            while skip > 0:  # keyset pages have no offset: walk to the page's first row
                step, _ = memories.list_page(conn, tenant, scope, Page(limit=min(skip, _SKIP_CHUNK), after=cursor),
                                             include_inactive=inactive)
                if not step:
                    break
                skip, cursor = skip - len(step), step[-1].id
            if skip == 0:
                rows, _ = memories.list_page(conn, tenant, scope, Page(limit=size, after=cursor),
                                             include_inactive=inactive)
    results = _fields([mem0_objects.memory_object(m) for m in rows], body.fields)
    return {"count": total, "next": f"?page={page + 1}&page_size={size}" if page * size < total else None,
            "previous": f"?page={page - 1}&page_size={size}" if page > 1 else None, "results": results}


@bp.route("/v3/memories/search", methods=["POST"])
def search() -> dict:
    """mem0's search through the native search: ``{"results": [memory dicts with score]}``. ``top_k`` (at most
    100 are returned), ``threshold``, ``metadata``, ``keyword_search`` (keyword ranking), ``latest_only: false``
    (older versions too), ``reference_date`` (the memories valid then) and ``fields`` are honoured."""
    body = request.validate(Mem0Search, request.json_body(bp.current_request))
    if body.categories:
        raise _unsupported("categories", "Engram does not filter memories on categories.")
    _refuse_show_expired(body.show_expired)
    selection = select(body, metadata=True, created=True)
    if body.metadata:
        selection.metadata.extend(metadata_conditions(body.metadata, "metadata"))
    native_body: dict[str, Any] = {"query": body.query, **selection.ids}
    optional = {"filters": selection.metadata_filter(), "top_k": clamp_top_k(body.top_k),
                "score_threshold": None if body.threshold is None else float(body.threshold),
                "created_after": selection.created_after, "created_before": selection.created_before,
                "ranking": "keyword" if body.keyword_search else None,
                "include_invalidated": True if body.latest_only is False else None,
                "as_of": None if body.reference_date is None else unix_seconds(body.reference_date, "reference_date",
                                                                               end_of_day=True)}
    native_body.update({k: v for k, v in optional.items() if v is not None})
    _, hits = native.search(native_body)
    return {"results": _fields([mem0_objects.memory_object(h.memory, score=h.score) for h in hits], body.fields)}


@bp.route("/v1/memories/{memory_id}", methods=["GET"])
def get(memory_id: str) -> dict:
    """One memory (any status) as a mem0 memory dict."""
    with tenant_db() as conn:
        return mem0_objects.memory_object(memories.get(conn, current_tenant(), native.checked_id(memory_id)))


@bp.route("/v1/memories/{memory_id}", methods=["PUT"])
def update(memory_id: str) -> dict:
    """mem0's update through the native update: ``text`` (a new version), ``metadata`` (replaces it),
    ``timestamp`` (when the new version became true), ``expiration_date`` (null clears it)."""
    body = request.validate(Mem0Update, request.json_body(bp.current_request))
    native_body: dict[str, Any] = {}
    if body.text is not None:
        native_body["memory"] = body.text
    if body.metadata is not None:
        native_body["metadata"] = body.metadata
    if body.timestamp is not None:
        native_body["timestamp"] = unix_seconds(body.timestamp, "timestamp")
    if "expiration_date" in body.model_fields_set:
        native_body["expires_at"] = None if body.expiration_date is None else expires_at(body.expiration_date)
    if not native_body:
        raise InvalidRequestError("Nothing to update: give 'text', 'metadata', 'timestamp' or 'expiration_date'.",
                                  param="text", code="invalid_value")
    return mem0_objects.memory_object(native.update(memory_id, native_body))


@bp.route("/v1/memories/{memory_id}", methods=["DELETE"])
def delete(memory_id: str) -> dict:
    """Delete a memory with its earlier versions (what mem0's ``delete_linked`` asks for, always done)."""
    target = native.checked_id(memory_id)
    with tenant_db() as conn:
        if not manage.delete(conn, current_tenant(), target):
            raise NotFoundError(f"No memory found with id '{target}'.", param="memory_id")
    return {"message": "Memory deleted successfully!"}


@bp.route("/v1/memories/{memory_id}/history", methods=["GET"])
def history(memory_id: str) -> list[dict[str, Any]]:
    """Every event of a memory, oldest first, as a list of mem0 history entries."""
    target = native.checked_id(memory_id)
    tenant = current_tenant()
    with tenant_db() as conn:
        rows = memories.history(conn, tenant, target)
        if not rows:
            raise NotFoundError(f"No memory found with id '{target}'.", param="memory_id")
        try:
            scope: dict[str, str | None] = memories.get(conn, tenant, target).scope.as_dict()
        except NotFoundError:  # deleted: its history stays, its scope with it
            scope = {}
    return [mem0_objects.history_entry(row, scope) for row in rows]


@bp.route("/v1/memories", methods=["DELETE"])
def delete_all() -> dict:
    """mem0's delete_all (``?user_id=`` / ``agent_id`` / ``run_id``, ``*`` for any): the native purge of that
    scope. A scope is required: a tenant's memories are never purged whole."""
    params = request.query(bp.current_request)
    named = {k: params[k] for k in ("user_id", "agent_id", "run_id", "app_id") if params.get(k)}
    check_storable(named)
    body = request.validate(Mem0List, named)
    selection = select(body)
    scope = scope_of(request.validate(ListParams, selection.ids))
    with tenant_db() as conn:
        manage.purge(conn, current_tenant(), scope)
    return {"message": "Memories deleted successfully!"}


@bp.route("/v1/event/{event_id}", methods=["GET"])
def event(event_id: str) -> dict:
    """A queued add (its ``event_id`` is the native job's id) as a mem0 event."""
    job_id = ids.validate_id(event_id, ids.MEMORY_JOB, param="event_id")
    with tenant_db() as conn:
        return mem0_objects.event_object(add_jobs.get(conn, current_tenant(), job_id))


def _int_param(params: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        value = default
    else:
        try:
            value = int(raw)
        except ValueError:
            raise InvalidRequestError(f"Invalid '{name}': expected an integer, got {raw[:40]!r}.", param=name,
                                      code="invalid_value") from None
    if not low <= value <= high:
        raise InvalidRequestError(f"Invalid '{name}': must be between {low} and {high}, got {value}.", param=name,
                                  code="invalid_value")
    return value


def _fields(results: list[dict[str, Any]], fields: list[str] | None) -> list[dict[str, Any]]:
    """Only the requested ``fields`` of each result (``id`` always), or everything."""
    if not fields:
        return results
    keep = {"id", *fields}
    return [{k: v for k, v in r.items() if k in keep} for r in results]


def _refuse_show_expired(show_expired: bool | None) -> None:
    if show_expired:
        raise _unsupported("show_expired", "expired memories are not returned by Engram.")


def _unsupported(param: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid '{param}': {message}", param=param, code="unsupported_parameter")
