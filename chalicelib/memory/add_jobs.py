"""Asynchronous adds: ``POST /v1/memories`` with ``async`` answers 202 with a job (``memjob_…``) and the memory
queue's handler (:func:`chalicelib.memory.service.handle_add_job`) does the add (the model calls included) in the
background.

A job is a row of ``memory_jobs`` (migration 0010): ``queued`` → ``in_progress`` → ``completed`` (with the add's
``results`` and token ``usage``) or ``failed`` (with ``last_error``). Delivery is at least once, and the handler is
safe under it: the add is applied and the job completed in one transaction that first locks the job row and
checks it is not completed yet, so a redelivered or concurrently delivered message changes nothing. A failed
delivery records ``last_error`` and is retried by the queue; the last one fails the job (``give_up``) and the
message goes to the dead-letter queue, from which a redrive completes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.chat.base import ChatBackend
from chalicelib.config import Settings
from chalicelib.dispatch.port import Delivery, Dispatcher, Message
from chalicelib.embed.base import Embedder
from chalicelib.errors import EngramError, NotFoundError, RateLimitError
from chalicelib.memory import write

__all__ = ["AddJob", "AddJobMessage", "JobStatus", "get", "give_up", "open_jobs", "run", "submit"]

logger = logging.getLogger("engram.memory")

JobStatus = Literal["queued", "in_progress", "completed", "failed"]

_COLUMNS = """id, tenant_id, user_id, agent_id, run_id, status, request, results, usage, last_error, attempts,
    created_at, updated_at, completed_at"""
_CREATE = f"""INSERT INTO memory_jobs (id, tenant_id, user_id, agent_id, run_id, request)
VALUES (%(id)s, %(tenant)s, %(user_id)s, %(agent_id)s, %(run_id)s, %(request)s) RETURNING {_COLUMNS}"""
_GET = f"SELECT {_COLUMNS} FROM memory_jobs WHERE tenant_id = %(tenant)s AND id = %(id)s"
_DELETE = "DELETE FROM memory_jobs WHERE tenant_id = %(tenant)s AND id = %(id)s"
_START = f"""UPDATE memory_jobs SET status = 'in_progress', attempts = attempts + 1, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s AND status <> 'completed' RETURNING {_COLUMNS}"""
_LOCK_OPEN = """SELECT 1 FROM memory_jobs WHERE tenant_id = %(tenant)s AND id = %(id)s AND status <> 'completed'
FOR UPDATE"""
_COMPLETE = """UPDATE memory_jobs SET status = 'completed', results = %(results)s, usage = %(usage)s,
    last_error = NULL, updated_at = now(), completed_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s"""
_NOTE_ERROR = """UPDATE memory_jobs SET last_error = %(error)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s AND status <> 'completed'"""
_OPEN = """SELECT tenant_id, id FROM memory_jobs WHERE status IN ('queued', 'in_progress')
ORDER BY created_at LIMIT %(limit)s"""
_FAIL = """UPDATE memory_jobs SET status = 'failed', last_error = %(error)s, updated_at = now()
WHERE tenant_id = %(tenant)s AND id = %(id)s AND status <> 'completed'"""


@dataclass(frozen=True, slots=True)
class AddJobMessage(Message):
    """Run the asynchronous add ``job_id``. Body ``{"type": "memory.add", "v": 1, "tenant", "job_id"}``."""

    kind: ClassVar[str] = "memory.add"
    job_id: str


@dataclass(frozen=True, slots=True)
class AddJob:
    """A row of ``memory_jobs``: the add ``request`` (:meth:`AddRequest.to_json`), its ``results`` and ``usage``
    when completed, ``last_error`` (``{"code", "message"}``) of the latest failed attempt, ``attempts`` made."""

    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    status: JobStatus
    request: dict[str, Any]
    results: list[dict[str, Any]] | None
    usage: dict[str, Any] | None
    last_error: dict[str, Any] | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None


def submit(conn: psycopg.Connection, tenant_id: str, request: write.AddRequest, *,
           dispatcher: Dispatcher) -> AddJob:
    """Record a job for ``request`` and send its message; returns the job as it stands after the send (an inline
    dispatcher has already run it).

    Raises:
        UpstreamError / ConfigurationError: the queue refused the message (the job is removed: nothing written).
    """
    job_id = ids.new_id(ids.MEMORY_JOB)
    conn.execute(_CREATE, {"id": job_id, "tenant": tenant_id, **request.scope.as_dict(),
                           "request": Jsonb(request.to_json())})
    try:
        dispatcher.send([AddJobMessage(tenant=tenant_id, job_id=job_id)])
    except Exception:
        conn.execute(_DELETE, {"tenant": tenant_id, "id": job_id})
        raise
    return get(conn, tenant_id, job_id)


def get(conn: psycopg.Connection, tenant_id: str, job_id: str) -> AddJob:
    """The tenant's job ``job_id``.

    Raises:
        NotFoundError: no such job for this tenant.
    """
    with conn.cursor(row_factory=class_row(AddJob)) as cur:
        job = cur.execute(_GET, {"tenant": tenant_id, "id": job_id}).fetchone()
    if job is None:
        raise NotFoundError(f"No memory job found with id '{job_id}'.", param="job_id")
    return job


def open_jobs(conn: psycopg.Connection, *, limit: int = 100_000) -> list[AddJobMessage]:
    """The messages of every tenant's jobs not yet done (``queued`` or ``in_progress``; run as the owner), oldest
    first, at most ``limit``: what a restarted local stack re-sends."""
    return [AddJobMessage(tenant=tenant, job_id=job_id)
            for tenant, job_id in conn.execute(_OPEN, {"limit": limit}).fetchall()]


def run(conn: psycopg.Connection, settings: Settings, tenant_id: str, job_id: str, *, embedder: Embedder,
        backend_for: Callable[[str], ChatBackend], default_model: Callable[[Settings], str]) -> str:
    """Do job ``job_id``'s add (with the model chosen when it was accepted, else ``default_model(settings)``;
    its backend from ``backend_for``); returns ``completed``, or ``duplicate`` when the job is gone or already
    done.

    Raises:
        whatever the add raises (the job keeps the error as ``last_error``; the queue retries).
    """
    with conn.cursor(row_factory=class_row(AddJob)) as cur:
        job = cur.execute(_START, {"tenant": tenant_id, "id": job_id}).fetchone()
    if job is None:
        return "duplicate"
    request = write.AddRequest.from_json(job.request)
    try:
        model = (request.model or default_model(settings)) if request.infer and request.messages else None
        backend = backend_for(model) if model is not None else None
        result = write.plan(conn, settings, tenant_id, request, embedder=embedder, backend=backend, model=model)
        with conn.transaction():
            if conn.execute(_LOCK_OPEN, {"tenant": tenant_id, "id": job_id}).fetchone() is None:
                return "duplicate"
            write.apply(conn, tenant_id, request, result, embedder=embedder)
            conn.execute(_COMPLETE, {"tenant": tenant_id, "id": job_id,
                                     "results": Jsonb([c.result() for c in result.changes]),
                                     "usage": Jsonb(result.usage_dict())})
    except Exception as exc:
        conn.execute(_NOTE_ERROR, {"tenant": tenant_id, "id": job_id, "error": Jsonb(error_of(exc))})
        raise
    write.after_write(conn, settings, tenant_id, request)
    return "completed"


def give_up(message: AddJobMessage, delivery: Delivery, error: BaseException) -> None:
    """The last allowed delivery failed: the job is ``failed`` with ``last_error`` (a redrive may still complete
    it)."""
    from chalicelib.store.db import tenant_connection

    with tenant_connection(delivery.settings, message.tenant) as conn:
        conn.execute(_FAIL, {"tenant": message.tenant, "id": message.job_id, "error": Jsonb(error_of(error))})


def error_of(error: BaseException) -> dict[str, str]:
    """A job's ``last_error``: ``{"code", "message"}`` — the error's own code for Engram errors
    (``memory_model_output_invalid``, ``model_not_available`` …), ``rate_limit_exceeded`` for a 429 that outlasted
    the retries, ``server_error`` with a generic message for anything else."""
    if isinstance(error, RateLimitError):
        return {"code": "rate_limit_exceeded", "message": error.message}
    if isinstance(error, EngramError):
        return {"code": error.code or error.type, "message": error.message}
    logger.error("memory add job failed", exc_info=error)
    return {"code": "server_error", "message": "Internal error while adding memories."}
