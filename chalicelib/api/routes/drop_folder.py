"""Drop-folder API: ``POST /v1/drop_folder/sync`` (an Engram extension in OpenAI's conventions: Bearer keys,
the error envelope, strict bodies) — the caller's drop folder ``s3://<bucket>/<tenant>/`` brought to match its
stores now, as the hourly ``sync_drop_folder`` job does (:mod:`chalicelib.events.sync`) — and what happened to
it: ``GET /v1/drop_folder/syncs`` (the sync runs that covered it) and ``GET /v1/drop_folder/errors`` (objects
that could not be applied).

The run is the job's (``engram jobs run sync_drop_folder --tenant T``): exclusive per tenant (and store), recorded in
``job_runs`` with its counts, bounded; a run that stops at its time budget answers ``in_progress`` and the next call
continues where it stopped.
"""

from __future__ import annotations

import time
from typing import Any

from chalice import Blueprint
from chalice.app import Response
from pydantic import Field

from chalicelib import deps
from chalicelib.api import request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import INTEGER, accepts
from chalicelib.api.routes.common import respond
from chalicelib.errors import ConflictError, InvalidRequestError, UpstreamError
from chalicelib.validation import RequestBody

bp = Blueprint(__name__)

JOB = "sync_drop_folder"
# Seconds one request may sync for (the API function's timeout is 30 s, API Gateway's 29 s).
REQUEST_BUDGET_S = 20.0


class SyncDropFolder(RequestBody):
    """``POST /v1/drop_folder/sync``: ``vector_store`` limits the sync to one store (its name or ``vs_`` id, the
    key's second segment); absent, every store of the caller's drop folder."""

    vector_store: str | None = Field(default=None, min_length=1, max_length=256)


@bp.route("/drop_folder/sync", methods=["POST"])
@accepts()
def sync_drop_folder() -> Response:
    """Sync the caller's drop folder (or one store's) → ``{"object": "drop_folder.sync", "status": "completed" |
    "in_progress", "vector_store_id", "counts": {"scanned", "new", "modified", "deleted", "unchanged", "failed"},
    "seconds"}``. The differences found are sent to the ingestion path; the files' statuses show how each ends.

    Errors: 400 an unknown field, no such store (``store_not_found``), no drop bucket configured
    (``drop_folder_not_configured``), the drop folder disabled (``drop_folder_disabled``); 409 another sync of the
    same scope is running, or the store name is ambiguous; 403 another tenant's shared store; 502 S3 or SQS failed.
    """
    from chalicelib.events import sync
    from chalicelib.jobs import runner

    body = request.validate(SyncDropFolder, request.json_body(bp.current_request))
    settings, tenant = deps.current_settings(), current_tenant()
    scope = sync.scope(settings, tenant, body.vector_store)
    options = {"store": scope.store_id} if scope.store_id else None
    outcome = runner.run_job(settings, JOB, tenant=tenant, force=True, options=options,
                             deadline=time.monotonic() + REQUEST_BUDGET_S)
    if outcome.status == "skipped":
        raise ConflictError("A sync of this drop folder is already running; try again when it ends.",
                            code="sync_in_progress")
    if outcome.status == "failed":
        detail = outcome.error if (outcome.error or "").startswith("UpstreamError") else "an internal error"
        raise UpstreamError(f"The drop-folder sync failed ({detail}); the next sync continues where it stopped.")
    counts = {name: int(outcome.counts.get(name, 0)) for name in sync.COUNTS}
    status = "in_progress" if outcome.status == "partial" else "completed"
    return respond({"object": "drop_folder.sync", "status": status, "vector_store_id": scope.store_id,
                    "counts": counts, "seconds": round(outcome.seconds, 3)}, in_progress=status == "in_progress")


@bp.route("/drop_folder/syncs", methods=["GET"])
@accepts(limit=INTEGER, before=INTEGER)
def list_syncs() -> dict:
    """The newest drop-folder sync runs that covered the caller's drop folder (the hourly job over every tenant,
    and the caller's own: ``POST /v1/drop_folder/sync``, ``engram sync``), newest first (``limit`` 1..100, default
    20; ``before``: the last ``id`` of the previous page) → a list of ``drop_folder.sync_run``: ``{"id", "scope",
    "all_tenants", "vector_store" (the store a run was limited to, or null), "started_at", "finished_at",
    "status", "counts", "error"}``. A run over every tenant shows its status and times only: its counts and
    error are the whole service's."""
    from chalicelib.jobs import store
    from chalicelib.store.db import pool

    params = request.query(bp.current_request)
    limit = params.get("limit", 20)
    if not 1 <= limit <= 100:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and 100, got {limit}.", param="limit",
                                  code="invalid_value")
    with pool(deps.current_settings()).connection() as conn:
        runs = store.runs_covering(conn, JOB, current_tenant(), limit=limit + 1, before=params.get("before"))
    data = [_sync_run(run) for run in runs[:limit]]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(runs) > limit}


def _sync_run(run: Any) -> dict[str, Any]:
    from urllib.parse import parse_qs

    from chalicelib.jobs.store import ALL_TENANTS

    everyone = run.scope == ALL_TENANTS
    options = parse_qs(run.scope.partition("?")[2])
    error = run.error if run.error is None or run.error.startswith("UpstreamError") else "an internal error"
    return {"object": "drop_folder.sync_run", "id": run.id, "scope": run.scope, "all_tenants": everyone,
            "vector_store": (options.get("store") or [None])[0],
            "started_at": _ts(run.started_at), "finished_at": _ts(run.finished_at), "status": run.status,
            "counts": None if everyone else (run.counts or {}), "error": None if everyone else error}


def _ts(value: Any) -> int | None:
    return int(value.timestamp()) if value is not None else None


@bp.route("/drop_folder/errors", methods=["GET"])
@accepts(limit=INTEGER)
def list_drop_errors() -> dict:
    """The newest drop-folder events of the caller's tenant that could not be applied (a bad sidecar, no usable
    store, an object the pipeline gave up on: :mod:`chalicelib.store.drop_errors`), newest first (``limit``
    1..50, default 20) → ``{"object": "list", "data": [{"object": "drop_folder.error", "bucket", "key", "code",
    "message", "created_at"}], "has_more": false}``."""
    from chalicelib.store import drop_errors

    params = request.query(bp.current_request)
    limit = params.get("limit", 20)
    if not 1 <= limit <= drop_errors.RECENT_LIMIT:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and {drop_errors.RECENT_LIMIT}, got {limit}.",
                                  param="limit", code="invalid_value")
    tenant = current_tenant()
    with tenant_db() as conn:
        rows = drop_errors.recent(conn, tenant, limit)
    data = [{"object": "drop_folder.error", "bucket": r["bucket"], "key": r["key"], "code": r["code"],
             "message": r["message"], "created_at": r["created_at"]} for r in rows]
    return {"object": "list", "data": data, "has_more": False}
