"""mem0 compatibility: every path the official ``mem0ai`` client (2.2, ``MemoryClient`` and ``AsyncMemoryClient``)
calls, served at ``/mem0`` over the memory service (:mod:`chalicelib.memory`; nothing here stores or ranks
memories itself). A team on mem0's platform changes ``host`` and keeps its code::

    MemoryClient(api_key="sk-engram-...", host="https://<engram>/mem0")

Why a prefix: mem0's paths end in a slash and some equal Engram's own once it is dropped
(``GET /v1/memories/{id}/`` vs ``GET /v1/memories/{id}``), and the slash is dropped before any route is chosen —
API Gateway (REST) strips it, Chalice's local server does the same to match it, and Chalice refuses routes that end
in one. Under ``/mem0`` the two APIs never meet, and ``/mem0/v1/memories/{id}/`` reaches the route below.

| mem0 client | path (under /mem0) | served by |
|---|---|---|
| construction | ``GET /v1/ping/`` | the tenant as ``org_id`` and ``project_id`` |
| ``add`` | ``POST /v3/memories/add/`` | add (inline: ``results``; a queued add: ``event_id``) |
| ``get_all`` | ``POST /v3/memories/`` (``page``, ``page_size``) | list, paged, with ``count`` |
| ``search`` | ``POST /v3/memories/search/`` | search |
| ``get`` / ``update`` / ``delete`` | ``GET`` / ``PUT`` / ``DELETE /v1/memories/{id}/`` | get, update, delete |
| ``history`` | ``GET /v1/memories/{id}/history/`` | the memory's history (feedback included) |
| ``delete_all`` | ``DELETE /v1/memories/`` (``user_id`` … or ``filters``) | purge of exactly that scope |
| ``users`` | ``GET /v1/entities/`` | the tenant's users, agents and runs with counts |
| ``delete_users`` / ``reset`` | ``DELETE /v2/entities/{type}/{id}/`` | purge of that user, agent or run |
| ``batch_update`` / ``batch_delete`` | ``PUT`` / ``DELETE /v1/batch/`` | update / delete many, all or none |
| ``feedback`` | ``POST /v1/feedback/`` | a ``FEEDBACK`` event in the memory's history |
| ``get_profile`` | ``GET /v2/entities/user/{id}/profile/`` | the user's persona |
| ``generate_profile`` / ``get_profile_job`` | ``POST /v2/profiles/jobs/`` / ``GET …/{job}/`` | persona now |
| ``get_profile_settings`` | ``GET /v2/profiles/settings/`` | always on, Engram's prompt |
| (a queued add) | ``GET /v1/event/{event_id}/`` | the add job |

Deliberate refusals — 400 ``unsupported_endpoint`` with a message saying what to use instead: memory exports and
their summary (``create_memory_export``, ``get_memory_export``, ``get_summary``: Engram has no schema-driven
export; ``get_all`` pages every memory), profile schemas (``update_profile_settings``, ``sample_profiles``), mem0's
organisations and projects (``project.*``, ``get_project``, ``update_project``: an Engram API key is one tenant),
webhooks (``get_webhooks``, ``create_webhook``, ``update_webhook``, ``delete_webhook``), and ``app`` entities.
(``chat()`` raises ``NotImplementedError`` in the client itself.)

Ids: Engram's are ``mem_…``; any other id-like value (mem0's UUIDs) is a well-formed id of a memory that does not
exist here: 404. Keys are Engram's (``Authorization: Token <key>``, as mem0 sends it, or ``Bearer``); errors keep
Engram's envelope, which the client raises as its own exceptions by status (400 ``ValidationError``, 401
``AuthenticationError``, 404 ``MemoryNotFoundError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chalice import Blueprint

from chalicelib import ids, memory
from chalicelib.api import mem0_objects, request
from chalicelib.api.mem0_schemas import (
    MAX_PAGE_SIZE,
    Mem0Add,
    Mem0BatchDelete,
    Mem0BatchUpdate,
    Mem0Feedback,
    Mem0List,
    Mem0ProfileJob,
    Mem0Search,
    Mem0Update,
    clamp_top_k,
    expires_at,
    filters_param,
    memory_ref,
    metadata_conditions,
    select,
    unix_seconds,
)
from chalicelib.api.memory_schemas import MAX_ID_CHARS, ListParams, UpdateMemory, scope_of
from chalicelib.api.query import ANY, INTEGER, accepts
from chalicelib.api.routes import memories as native
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.validation import check_storable

bp = Blueprint(__name__)

URL_PREFIX = "/mem0"
DEFAULT_PAGE_SIZE = 100  # mem0's get_all default
MAX_PAGE = 100_000
MAX_ENTITIES_PAGE = 10_000  # users(): one page holds them all up to this many
_SKIP_CHUNK = 1000  # rows read per step while skipping to a get_all page
# Query parameters older mem0 clients add to every call (the tenant comes from the key; ignored).
_CLIENT = ("org_id", "project_id")
_PROFILE_JOB = "profjob_"
_NO_PROFILE = _PROFILE_JOB + "insufficient_data"


@bp.route("/v1/ping", methods=["GET"])
@accepts(*_CLIENT)
def ping() -> dict:
    """The key is valid: the client reads ``org_id`` and ``project_id`` (both required) and ``user_email``."""
    from chalicelib.api.context import current_tenant

    tenant = current_tenant()
    return {"status": "ok", "org_id": tenant, "project_id": tenant, "user_email": None}


@bp.route("/v3/memories/add", methods=["POST"])
@accepts(*_CLIENT)
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
    status, out = native.add(native_body, idempotency_key=None)
    if status == 202:
        return {"message": "Memory processing has been queued for background execution.", "status": "PENDING",
                "event_id": out["id"]}
    return {"results": mem0_objects.add_results(out["results"])}


@bp.route("/v3/memories", methods=["POST"])
@accepts(*_CLIENT, page=INTEGER, page_size=INTEGER)
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
    with native.session() as (conn, ctx):
        total = memory.count(conn, ctx, scope, include_inactive=inactive)
        rows: list[memory.Memory] = []
        cursor, skip = None, (page - 1) * size
        if skip < total:
            from chalicelib.store.paging import Page

            while skip > 0:  # keyset pages have no offset: walk to the page's first row
                step, _ = memory.list_page(conn, ctx, scope, Page(limit=min(skip, _SKIP_CHUNK), after=cursor),
                                           include_inactive=inactive)
                if not step:
                    break
                skip, cursor = skip - len(step), step[-1].id
            if skip == 0:
                rows, _ = memory.list_page(conn, ctx, scope, Page(limit=size, after=cursor),
                                           include_inactive=inactive)
    results = _fields([mem0_objects.memory_object(m) for m in rows], body.fields)
    return {"count": total, "next": f"?page={page + 1}&page_size={size}" if page * size < total else None,
            "previous": f"?page={page - 1}&page_size={size}" if page > 1 else None, "results": results}


@bp.route("/v3/memories/search", methods=["POST"])
@accepts(*_CLIENT)
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
@accepts(*_CLIENT)
def get(memory_id: str) -> dict:
    """One memory (any status) as a mem0 memory dict."""
    target = _memory_id(memory_id)
    with native.session() as (conn, ctx):
        return mem0_objects.memory_object(memory.get(conn, ctx, target))


@bp.route("/v1/memories/{memory_id}", methods=["PUT"])
@accepts(*_CLIENT)
def update(memory_id: str) -> dict:
    """mem0's update through the native update: ``text`` (a new version), ``metadata`` (replaces it),
    ``timestamp`` (when the new version became true), ``expiration_date`` (null clears it)."""
    target = _memory_id(memory_id)
    body = request.validate(Mem0Update, request.json_body(bp.current_request))
    native_body = _update_body(body.text, body.metadata)
    if body.timestamp is not None:
        native_body["timestamp"] = unix_seconds(body.timestamp, "timestamp")
    if "expiration_date" in body.model_fields_set:
        native_body["expires_at"] = None if body.expiration_date is None else expires_at(body.expiration_date)
    if not native_body:
        raise InvalidRequestError("Nothing to update: give 'text', 'metadata', 'timestamp' or 'expiration_date'.",
                                  param="text", code="invalid_value")
    return mem0_objects.memory_object(native.update(target, native_body))


@bp.route("/v1/memories/{memory_id}", methods=["DELETE"])
@accepts("delete_linked", *_CLIENT)
def delete(memory_id: str) -> dict:
    """Delete a memory with its earlier versions (what mem0's ``delete_linked`` asks for, always done)."""
    target = _memory_id(memory_id)
    with native.session() as (conn, ctx):
        if not memory.delete(conn, ctx, target):
            raise _not_found(target)
    return {"message": "Memory deleted successfully!"}


@bp.route("/v1/memories/{memory_id}/history", methods=["GET"])
@accepts(*_CLIENT)
def history(memory_id: str) -> list[dict[str, Any]]:
    """Every event of a memory, oldest first, as a list of mem0 history entries."""
    target = _memory_id(memory_id)
    with native.session() as (conn, ctx):
        rows, scope = memory.history(conn, ctx, target)
    ids_ = scope.as_dict() if scope is not None else {}
    return [mem0_objects.history_entry(row, ids_) for row in rows]


@bp.route("/v1/memories", methods=["DELETE"])
@accepts("user_id", "agent_id", "run_id", "app_id", "filters", *_CLIENT)
def delete_all() -> dict:
    """mem0's delete_all: ``?user_id=`` / ``agent_id`` / ``run_id`` (``*`` for any), or ``filters`` (mem0 2.2's
    form, JSON or as the client writes a dict), purging exactly that scope. A scope is required: a tenant's
    memories are never purged whole (``reset`` is the explicit form), and an empty, repeated or unknown parameter
    is refused before anything is deleted. The answer echoes the scope purged (``scope``: a null id means any) and
    the rows removed (``deleted``)."""
    params = request.query(bp.current_request)
    named: dict[str, Any] = {k: params[k] for k in ("user_id", "agent_id", "run_id", "app_id") if k in params}
    if "filters" in params:
        named["filters"] = filters_param(params["filters"])
    body = request.validate(Mem0List, named)
    scope = scope_of(request.validate(ListParams, select(body).ids))
    with native.session() as (conn, ctx):
        counts = memory.purge(conn, ctx, scope)
    return {"message": "Memories deleted successfully!", "scope": scope.as_dict(), "deleted": counts}


@bp.route("/v1/event/{event_id}", methods=["GET"])
@accepts(*_CLIENT)
def event(event_id: str) -> dict:
    """A queued add (its ``event_id`` is the native job's id) as a mem0 event."""
    job_id = ids.validate_id(event_id, ids.MEMORY_JOB, param="event_id")
    with native.session() as (conn, ctx):
        return mem0_objects.event_object(memory.job(conn, ctx, job_id))


# ---- entities ----

@bp.route("/v1/entities", methods=["GET"])
@accepts(*_CLIENT, page=INTEGER, page_size=INTEGER)
def users() -> dict:
    """mem0's users(): the tenant's users, agents and runs holding memories, most recently changed first, each
    with ``total_memories`` (active ones), as ``{"count", "next", "previous", "results"}`` (every entity in one
    page up to 10,000; ``page`` / ``page_size`` to walk more)."""
    params = request.query(bp.current_request)
    page = _int_param(params, "page", 1, 1, MAX_PAGE)
    size = _int_param(params, "page_size", MAX_ENTITIES_PAGE, 1, MAX_ENTITIES_PAGE)
    with native.session() as (conn, ctx):
        rows, total = memory.entities(conn, ctx, limit=size, offset=(page - 1) * size)
        tenant = ctx.tenant_id
    return {"count": total, "next": f"?page={page + 1}&page_size={size}" if page * size < total else None,
            "previous": f"?page={page - 1}&page_size={size}" if page > 1 else None,
            "results": [mem0_objects.entity_object(row, tenant) for row in rows]}


@bp.route("/v2/entities/{entity_type}/{entity_id}", methods=["DELETE"])
@accepts(*_CLIENT)
def delete_entity(entity_type: str, entity_id: str) -> dict:
    """mem0's delete_users(...) for one entity: every memory of that user, agent or run, purged (``app`` is
    refused: Engram has no apps)."""
    kind = _entity_kind(entity_type)
    name = _entity_id(entity_id)
    with native.session() as (conn, ctx):
        counts = memory.delete_entity(conn, ctx, kind, name)
    scope = memory.MemoryScope(**{f"{kind}_id": name})
    return {"message": "Entity deleted successfully.", "scope": scope.as_dict(), "deleted": counts}


# ---- batches and feedback ----

@bp.route("/v1/batch", methods=["PUT"])
@accepts(*_CLIENT)
def batch_update() -> dict:
    """mem0's batch_update: up to 1,000 ``{"memory_id", "text"?, "metadata"?}``, applied in one transaction —
    all of them, or (a missing or replaced memory) none."""
    body = request.validate(Mem0BatchUpdate, request.json_body(bp.current_request))
    updates = []
    for i, item in enumerate(body.memories):
        target = _memory_id(item.memory_id, f"memories[{i}].memory_id")
        changes = native.edit_of(request.validate(UpdateMemory, _update_body(item.text, item.metadata),
                                                  prefix=f"memories[{i}]"))
        updates.append(memory.MemoryUpdate(target, item.text, changes))
    with native.session() as (conn, ctx):
        done = memory.update_many(conn, ctx, updates)
    return {"message": f"Successfully updated {len(done)} memories"}


@bp.route("/v1/batch", methods=["DELETE"])
@accepts(*_CLIENT)
def batch_delete() -> dict:
    """mem0's batch_delete: up to 1,000 ``{"memory_id"}``, deleted in one transaction — all, or (one missing)
    none. The answer names the memories deleted (``memory_ids``)."""
    body = request.validate(Mem0BatchDelete, request.json_body(bp.current_request))
    targets = [_memory_id(item.memory_id, f"memories[{i}].memory_id") for i, item in enumerate(body.memories)]
    with native.session() as (conn, ctx):
        count = memory.delete_many(conn, ctx, targets)
    return {"message": f"Successfully deleted {count} memories", "memory_ids": targets}


@bp.route("/v1/feedback", methods=["POST"])
@accepts(*_CLIENT)
def feedback() -> dict:
    """mem0's feedback: stored as a ``FEEDBACK`` event in the memory's history (shown by ``history``)."""
    body = request.validate(Mem0Feedback, request.json_body(bp.current_request))
    value = body.feedback.upper() if body.feedback else None
    if value is not None and value not in memory.FEEDBACK_VALUES:
        raise InvalidRequestError(f"Invalid 'feedback': expected one of {', '.join(memory.FEEDBACK_VALUES)} or "
                                  "null.", param="feedback", code="invalid_value")
    target = _memory_id(body.memory_id)
    with native.session() as (conn, ctx):
        memory.feedback(conn, ctx, target, value=value, reason=body.feedback_reason)
    return {"id": target, "feedback": value, "feedback_reason": body.feedback_reason}


# ---- profiles (the persona) ----

@bp.route("/v2/entities/user/{entity_id}/profile", methods=["GET"])
@accepts(*_CLIENT)
def get_profile(entity_id: str) -> dict:
    """mem0's get_profile: the user's persona (``status`` ``succeeded``), or ``insufficient_data`` while the user
    has memories but no preferences to write one from; 404 for a user with no memories."""
    name = _entity_id(entity_id)
    with native.session() as (conn, ctx):
        persona = memory.profile(conn, ctx, name)
        rows = memory.history(conn, ctx, persona.id)[0] if persona is not None else []
        if persona is None and memory.count(conn, ctx, memory.MemoryScope(user_id=name),
                                            include_inactive=True) == 0:
            raise NotFoundError(f"No user found with id '{name}'.", param="entity_id")
    return mem0_objects.profile_object(name, persona, generations=sum(r.event in ("ADD", "UPDATE") for r in rows))


@bp.route("/v2/profiles/jobs", methods=["POST"])
@accepts(*_CLIENT)
def profile_job() -> dict:
    """mem0's generate_profile: the user's persona rewritten now (synchronously: the job is done when this
    answers); ``sample`` runs are refused."""
    body = request.validate(Mem0ProfileJob, request.json_body(bp.current_request))
    if body.operation != "trigger":
        raise _unsupported_endpoint("sample_profiles", "profile schemas are not supported; generate one user's "
                                                       "profile with generate_profile.")
    if body.entity_type != "user" or body.entity_id is None:
        raise InvalidRequestError("Invalid 'entity_id': name the user whose profile to generate.",
                                  param="entity_id", code="invalid_value")
    name = _entity_id(body.entity_id)
    with native.session() as (conn, ctx):
        persona = memory.generate_profile(conn, ctx, name)
    job_id = _PROFILE_JOB + persona.id if persona is not None else _NO_PROFILE
    return mem0_objects.profile_job_object(job_id, name, done=persona is not None)


@bp.route("/v2/profiles/jobs/{job_id}", methods=["GET"])
@accepts(*_CLIENT)
def get_profile_job(job_id: str) -> dict:
    """mem0's get_profile_job: a generation (always finished: generation is synchronous)."""
    if job_id == _NO_PROFILE:
        return {"job": mem0_objects.profile_job_state(done=False)}
    memory_id = ids.validate_id(job_id.removeprefix(_PROFILE_JOB), ids.MEMORY, param="job_id") \
        if job_id.startswith(_PROFILE_JOB + ids.MEMORY) else None
    if memory_id is None:
        raise NotFoundError(f"No profile job found with id '{job_id[:80]}'.", param="job_id")
    with native.session() as (conn, ctx):
        persona = memory.get(conn, ctx, memory_id)
    if persona.memory_type != "persona":
        raise NotFoundError(f"No profile job found with id '{job_id[:80]}'.", param="job_id")
    return {"job": mem0_objects.profile_job_state(done=True)}


@bp.route("/v2/profiles/settings", methods=["GET"])
@accepts(*_CLIENT)
def get_profile_settings() -> dict:
    """mem0's get_profile_settings: profiles (Engram's persona) are always on, written by Engram's own prompt."""
    return {"enabled": True, "entities": {"user": {"schema": None, "custom_instructions": None}}}


# ---- deliberate refusals ----

# Public: chalicelib.api.permissions declares these routes' permission.
REFUSED = [
    ("/v2/profiles/settings", "POST", "update_profile_settings",
     "the persona is always on and written by Engram's prompt; there is no profile schema to set."),
    ("/v1/exports", "POST", "create_memory_export",
     "Engram has no schema-driven memory export; page through a scope with get_all."),
    ("/v1/exports/get", "POST", "get_memory_export",
     "Engram has no schema-driven memory export; page through a scope with get_all."),
    ("/v1/summary", "POST", "get_summary", "Engram has no memory exports to summarise; use get_all or users()."),
    ("/api/v1/orgs/organizations/{org_id}/projects", "POST", "project.create",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}", "GET", "project.get / get_project",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}", "PATCH", "project.update / update_project",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}", "DELETE", "project.delete",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members", "GET", "project.get_members",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members", "POST", "project.add_member",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members", "PUT", "project.update_member",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members", "DELETE", "project.remove_member",
     "an Engram API key is one tenant; there are no organisations or projects to manage."),
    ("/api/v1/webhooks/projects/{project_id}", "GET", "get_webhooks",
     "Engram sends no webhooks; poll a queued add at /v1/event/{event_id}/."),
    ("/api/v1/webhooks/projects/{project_id}", "POST", "create_webhook",
     "Engram sends no webhooks; poll a queued add at /v1/event/{event_id}/."),
    ("/api/v1/webhooks/{webhook_id}", "PUT", "update_webhook",
     "Engram sends no webhooks; poll a queued add at /v1/event/{event_id}/."),
    ("/api/v1/webhooks/{webhook_id}", "DELETE", "delete_webhook",
     "Engram sends no webhooks; poll a queued add at /v1/event/{event_id}/."),
]


def _refusal(method: str, why: str) -> Callable[..., dict]:
    """A route view that refuses mem0's ``method`` with ``why``."""

    def refuse(**_: str) -> dict:
        raise _unsupported_endpoint(method, why)

    refuse.__doc__ = f"mem0's ``{method}``: refused (400 ``unsupported_endpoint``): {why}"
    return accepts(ANY)(refuse)


def _register_refusals() -> None:
    """One route per refused path and method (the table above), each answering its own 400."""
    by_path: dict[str, list[tuple[str, str, str]]] = {}
    for path, http_method, method, why in REFUSED:
        by_path.setdefault(path, []).append((http_method, method, why))
    for path, entries in by_path.items():
        for http_method, method, why in entries:
            view = _refusal(method, why)
            view.__name__ = "refuse_" + "".join(c if c.isalnum() else "_" for c in f"{http_method}_{path}")
            bp.route(path, methods=[http_method])(view)


_register_refusals()


# ---- helpers ----

def _memory_id(value: str, param: str = "memory_id") -> str:
    """An Engram memory id from a mem0 path or body.

    Raises:
        NotFoundError: a well-formed id that is not Engram's (a mem0 UUID): no such memory here.
        InvalidRequestError: not an id at all.
    """
    checked = memory_ref(value, param)
    if checked is None:
        raise _not_found(value, param)
    return checked


def _not_found(memory_id: str, param: str = "memory_id") -> NotFoundError:
    return NotFoundError(f"No memory found with id '{memory_id[:128]}'.", param=param)


def _update_body(text: str | None, metadata: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if text is not None:
        body["memory"] = text
    if metadata is not None:
        body["metadata"] = metadata
    return body


def _entity_kind(value: str) -> str:
    if value == "app":
        raise _unsupported("entity_type", "Engram scopes memories by user, agent and run; there are no apps.")
    if value not in memory.ENTITY_KINDS:
        raise InvalidRequestError(f"Invalid 'entity_type': expected user, agent or run, got {value[:40]!r}.",
                                  param="entity_type", code="invalid_value")
    return value


def _entity_id(value: str) -> str:
    if not value or len(value) > MAX_ID_CHARS:
        raise InvalidRequestError(f"Invalid 'entity_id': expected 1 to {MAX_ID_CHARS} characters.",
                                  param="entity_id", code="invalid_value")
    check_storable(value, "entity_id")
    return value


def _int_param(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, default)
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


def _unsupported_endpoint(method: str, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"mem0's {method} is not supported by Engram: {why}", param=None,
                               code="unsupported_endpoint")
