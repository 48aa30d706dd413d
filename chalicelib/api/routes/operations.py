"""Operations API (Engram extensions under ``/v1``): who the caller is, the tenant's limits and usage, the scheduled
jobs and their runs — what the console's Operations page shows, and what operators' scripts call instead of the
CLI.

- ``GET /v1/me`` (any key): the caller's tenant and what its key may do (:mod:`chalicelib.access`).
- ``GET /v1/tenant/limits`` (any key): the tenant's limits, their defaults and what it uses of them (the usage of
  knowledge shown to a key that may read vector stores, of memory to one that may read all memories).
- ``POST /v1/tenant/limits`` (``operations.write``): change some limits (``null`` restores a default), as
  ``engram tenants limits TENANT --set`` does.
- ``GET /v1/jobs`` (``operations.read``): every scheduled job (:data:`chalicelib.jobs.table.JOBS`) with its
  standing in the scopes that concern the caller's tenant — every tenant's (``*``) and its own — and
  ``GET /v1/jobs/{job_name}/runs`` the newest runs there.
- ``POST /v1/jobs/{job_name}/runs`` (``operations.write``): run a job now for the caller's tenant, bounded,
  exclusive and recorded like a scheduled run (``consolidation`` among them; ``engram jobs run NAME --tenant``).

An operator key acts on its own tenant like any key: no route here reads or changes another tenant. The job tables
belong to the database owner (``job_runs`` is not the tenant role's), so the job routes read them on the owner's
connection, every statement limited to the scopes that concern the caller's tenant
(:func:`chalicelib.jobs.store.states_covering`).
"""

from __future__ import annotations

import time
from typing import Any

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps
from chalicelib.api import request
from chalicelib.api.context import current_access, current_tenant, tenant_db
from chalicelib.api.query import INTEGER, accepts
from chalicelib.api.routes.common import respond
from chalicelib.errors import ConflictError, EngramError, InvalidRequestError, NotFoundError

bp = Blueprint(__name__)

# Seconds one request may run a job for (the API function's timeout is 30 s, API Gateway's 29 s); a run that stops
# at it answers ``partial`` and the next call continues where it stopped.
REQUEST_BUDGET_S = 20.0


@bp.route("/me", methods=["GET"])
@accepts()
def me() -> dict:
    """The caller: ``{"object": "caller", "tenant_id", "permissions": {resource: level}, "memory_scope",
    "operator"}`` — what the console shows and hides by."""
    grants = current_access()
    return {"object": "caller", "tenant_id": current_tenant(), **grants.as_dict(), "operator": grants.operator}


def _limits_object(conn: Any, tenant: str, current: Any) -> dict[str, Any]:
    from chalicelib import memory
    from chalicelib.store import tenants

    grants = current_access()
    names = tenants.TenantLimits.names()
    usage: dict[str, Any] = {"knowledge": None, "memory": None}
    if grants.allows("vector_stores", "read"):
        usage["knowledge"] = tenants.knowledge_usage(conn, tenant)
    if grants.allows("memories", "read") and not grants.memory_scope:
        ctx = memory.context(deps.current_settings(), tenant)
        counts = memory.stats(conn, ctx, None)
        usage["memory"] = {"active_memories": counts["active"], "memories": counts["total"],
                           "archived_memories": counts["archived"]}
    return {"object": "tenant.limits", "tenant_id": tenant,
            "limits": {name: getattr(current, name) for name in names},
            "defaults": {name: getattr(tenants.DEFAULT_LIMITS, name) for name in names}, "usage": usage}


@bp.route("/tenant/limits", methods=["GET"])
@accepts()
def tenant_limits() -> dict:
    """The tenant's limits → ``{"object": "tenant.limits", "tenant_id", "limits": {name: value}, "defaults",
    "usage": {"knowledge": {"vector_stores", "storage_bytes", "files", "max_store_files", "max_file_bytes"} | null,
    "memory": {"active_memories", "memories", "archived_memories"} | null}}`` (a usage part the key may not read
    is null)."""
    from chalicelib.store import tenants

    tenant = current_tenant()
    with tenant_db() as conn:
        return _limits_object(conn, tenant, tenants.limits(conn, tenant))


@bp.route("/tenant/limits", methods=["POST"])
def update_tenant_limits() -> dict:
    """Change some of the tenant's limits: a JSON object ``{name: positive integer | null}`` (null restores the
    default) → the ``tenant.limits`` object. Nothing changes unless every name and value is valid.

    Raises:
        InvalidRequestError: (400) an unknown limit or a value that is not a positive integer (``param`` names it).
    """
    from chalicelib.store import tenants

    body = request.json_body(bp.current_request)
    tenant = current_tenant()
    with tenant_db() as conn:
        current = tenants.set_limits(conn, tenant, body)
        return _limits_object(conn, tenant, current)


def _job(name: str) -> Any:
    from chalicelib.jobs import table

    try:
        return table.job(name)
    except KeyError:
        raise NotFoundError(f"No job named '{name[:64]}' (GET /v1/jobs lists them).", param="job_name") from None


def _public_error(recorded: str | None) -> str | None:
    """A run's recorded error as a client may read it: an Engram error's own line (``UpstreamError: ...``), else
    only that an internal error happened (internals stay in the logs)."""
    if recorded is None:
        return None
    kind = recorded.split(":", 1)[0]
    return recorded if kind in _engram_errors() else "an internal error (see the service's logs)"


def _engram_errors() -> set[str]:
    found, todo = set(), [EngramError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found


def _ts(value: Any) -> int | None:
    return int(value.timestamp()) if value is not None else None


def run_object(run: Any) -> dict[str, Any]:
    """``job.run``: one recorded run of a job (a :class:`chalicelib.jobs.store.RunRecord`) — its scope, times,
    status (``running``, ``finished``, ``partial``, ``failed``, ``abandoned``), counts and error."""
    return {"object": "job.run", "id": run.id, "job": run.job, "scope": run.scope, "started_at": _ts(run.started_at),
            "finished_at": _ts(run.finished_at), "status": run.status, "counts": run.counts or {},
            "error": _public_error(run.error)}


@bp.route("/jobs", methods=["GET"])
@accepts()
def list_jobs() -> dict:
    """Every scheduled job → ``{"object": "list", "data": [{"object": "job", "name", "lane", "cadence_s",
    "budget_s", "description", "scopes": [{"scope", "due_at", "running", "last_run": {"started_at",
    "finished_at", "status", "counts", "error"} | null}]}]}`` — the scopes that concern the caller's tenant
    (``*`` and its own), empty for a job never run there."""
    from chalicelib.jobs import store, table
    from chalicelib.store.db import pool

    tenant = current_tenant()
    with pool(deps.current_settings()).connection() as conn:
        states = store.states_covering(conn, tenant)
    by_job: dict[str, list[dict[str, Any]]] = {}
    for state in states:
        last = None if state.started_at is None else {
            "started_at": _ts(state.started_at), "finished_at": _ts(state.finished_at), "status": state.status,
            "counts": state.counts or {}, "error": _public_error(state.error)}
        by_job.setdefault(state.job, []).append({"scope": state.scope, "due_at": _ts(state.due_at),
                                                 "running": state.leased_until is not None, "last_run": last})
    data = [{"object": "job", "name": job.name, "lane": job.lane, "cadence_s": job.cadence_s,
             "budget_s": job.budget_s, "description": job.description, "scopes": by_job.get(job.name, [])}
            for job in table.JOBS]
    return {"object": "list", "data": data, "has_more": False}


@bp.route("/jobs/{job_name}/runs", methods=["GET"])
@accepts(limit=INTEGER, before=INTEGER)
def list_job_runs(job_name: str) -> dict:
    """The newest runs of a job in the scopes that concern the caller's tenant, newest first (``limit`` 1..100,
    default 20; ``before``: the ``id`` of the last run of the previous page) → a list of ``job.run``."""
    from chalicelib.jobs import store
    from chalicelib.store.db import pool

    job = _job(job_name)
    params = request.query(bp.current_request)
    limit = _limit(params)
    with pool(deps.current_settings()).connection() as conn:
        runs = store.runs_covering(conn, job.name, current_tenant(), limit=limit + 1, before=params.get("before"))
    data = [run_object(run) for run in runs[:limit]]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(runs) > limit}


def _limit(params: Any, default: int = 20) -> int:
    limit = params.get("limit", default)
    if not 1 <= limit <= 100:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and 100, got {limit}.", param="limit",
                                  code="invalid_value")
    return int(limit)


@bp.route("/jobs/{job_name}/runs", methods=["POST"])
def run_job(job_name: str) -> Response:
    """Run a job now for the caller's tenant (body ``{}``), whatever its cadence, within the request's budget
    (:data:`REQUEST_BUDGET_S`) → ``{"object": "job.run", "job", "scope", "status": "finished" | "partial" |
    "failed", "counts", "error", "seconds"}``; ``partial``: it stopped at the budget, call again to continue.

    Raises:
        NotFoundError: (404) no such job.
        ConflictError: (409 ``job_running``) another run of the job holds the tenant's scope.
        InvalidRequestError: (400) a body that is not ``{}``.
    """
    from chalicelib.jobs import runner

    job = _job(job_name)
    body = request.json_body(bp.current_request)
    if body:
        raise InvalidRequestError(f"Unrecognized request argument supplied: {sorted(body)[0]}", param=sorted(body)[0],
                                  code="unknown_parameter")
    outcome = runner.run_job(deps.current_settings(), job, tenant=current_tenant(), force=True,
                             deadline=time.monotonic() + REQUEST_BUDGET_S)
    if outcome.status == "skipped":
        raise ConflictError(f"A run of {job.name} for this tenant is already going; try again when it ends.",
                            code="job_running")
    return respond({"object": "job.run", "job": outcome.job, "scope": outcome.scope, "status": outcome.status,
                    "counts": outcome.counts, "error": _public_error(outcome.error),
                    "seconds": round(outcome.seconds, 3)}, in_progress=outcome.status == "partial")
