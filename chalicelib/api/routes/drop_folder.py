"""Drop-folder sync API: ``POST /v1/drop_folder/sync`` (an Engram extension in OpenAI's conventions: Bearer keys,
the error envelope, strict bodies) — the caller's drop folder ``s3://<bucket>/<tenant>/`` brought to match its
stores now, as the hourly ``sync_drop_folder`` job does (:mod:`chalicelib.events.sync`).

The run is the job's (``engram jobs run sync_drop_folder --tenant T``): exclusive per tenant (and store), recorded in
``job_runs`` with its counts, bounded; a run that stops at its time budget answers ``in_progress`` and the next call
continues where it stopped.
"""

from __future__ import annotations

import time

from chalice import Blueprint
from chalice.app import Response
from pydantic import Field

from chalicelib import deps
from chalicelib.api import request
from chalicelib.api.context import current_tenant
from chalicelib.api.query import accepts
from chalicelib.api.routes.common import respond
from chalicelib.errors import ConflictError, UpstreamError
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
