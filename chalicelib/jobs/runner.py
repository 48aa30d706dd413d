"""Running scheduled jobs: **bounded** (a run gets a deadline — the job's budget, within its lane's — and returns a
cursor when it stops early; the next run resumes from it), **exclusive** (a lease in ``job_state``: two runs of one
job and scope never overlap, and a run whose process died is taken over once its lease runs out), **recorded**
(``job_runs``: started, finished, status, counts, cursors, error; counts also go out as EMF metrics) and
**idempotent** (the jobs themselves find their work by predicate or resume from a saved cursor, so a repeated or
resumed run changes nothing that is done).

:func:`run_lane` is what a lane's scheduled Lambda (and the local pump, and ``engram serve``'s scheduler) calls:
every due job of the lane, in table order, while the lane's budget lasts. :func:`run_job` runs one job now
(``engram jobs run NAME [--tenant T]``).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from chalicelib import observability
from chalicelib.config import Settings
from chalicelib.entrypoints import resolve
from chalicelib.jobs import store, table
from chalicelib.jobs.model import Job, JobContext, JobResult

__all__ = ["LEASE_GRACE_S", "OutcomeStatus", "RunOutcome", "run_job", "run_lane", "scope_of"]

logger = logging.getLogger("engram.jobs")

# A run's lease outlasts its budget by this much (seconds): time to record the run after the deadline. A run that
# is still going after it is presumed dead and may be taken over.
LEASE_GRACE_S = 60.0
# A job is not started with less time than this left in its lane's invocation (seconds).
MIN_RUN_S = 1.0

# What one call did with a job: a recorded run's end (:data:`store.EndStatus`), or ``skipped`` (no run).
OutcomeStatus = Literal["finished", "partial", "failed", "skipped"]


@dataclass(slots=True)
class RunOutcome:
    """What happened to one job in one call: ``status`` is ``finished``, ``partial`` (stopped at its budget; it
    resumes at the lane's next tick), ``failed``, or ``skipped`` (not due, or another run holds it; ``reason``
    says which). ``counts`` are the job's; ``seconds`` the run's wall time."""

    job: str
    scope: str
    status: OutcomeStatus
    counts: dict[str, int] = field(default_factory=dict)
    cursor: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0
    reason: str | None = None


def run_lane(settings: Settings, lane_name: str, *, budget_s: float | None = None) -> dict[str, RunOutcome]:
    """Run every due job of the lane ``lane_name`` (in table order) within ``budget_s`` seconds (default: the
    lane's budget, its function timeout minus a margin); returns each job's outcome. One job's failure does not
    stop the others.

    Raises:
        KeyError: no such lane.
    """
    lane = table.lane(lane_name)
    deadline = time.monotonic() + (lane.budget_s if budget_s is None else budget_s)
    outcomes: dict[str, RunOutcome] = {}
    for job in table.jobs_of(lane.name):
        if deadline - time.monotonic() < MIN_RUN_S:
            outcomes[job.name] = RunOutcome(job.name, store.ALL_TENANTS, "skipped", reason="lane budget spent")
            continue
        outcomes[job.name] = run_job(settings, job, deadline=deadline)
    logger.info("lane %s: %s", lane.name, {name: o.status for name, o in outcomes.items()})
    return outcomes


def scope_of(tenant: str | None, options: Mapping[str, str] | None = None) -> str:
    """The scope a run is recorded (and leased) under: the tenant, or ``*`` for every tenant, then its options as
    ``?name=value&...`` (sorted), e.g. ``acme?store=docs``."""
    base = tenant or store.ALL_TENANTS
    if not options:
        return base
    return base + "?" + "&".join(f"{name}={value}" for name, value in sorted(options.items()))


def run_job(settings: Settings, job: Job | str, *, tenant: str | None = None, force: bool = False,
            deadline: float | None = None, options: Mapping[str, str] | None = None) -> RunOutcome:
    """Run ``job`` (a row or its name) once if it is due (or ``force``) and nobody else runs it, limited to
    ``tenant`` when given and with ``options`` (:attr:`JobContext.options`); the run gets the job's budget, cut to
    ``deadline`` (``time.monotonic()``) if sooner. Its scope is :func:`scope_of` ``(tenant, options)``.

    Raises:
        KeyError: no such job.
    """
    from chalicelib.store.db import pool

    row = table.job(job) if isinstance(job, str) else job
    scope = scope_of(tenant, options)
    started = time.monotonic()
    end = started + row.budget_s if deadline is None else min(deadline, started + row.budget_s)
    owner = _owner()
    with pool(settings).connection() as conn:
        taken, cursor = store.acquire(conn, row.name, scope, owner, lease_s=max(0.0, end - started) + LEASE_GRACE_S,
                                      force=force)
        if not taken:
            return RunOutcome(row.name, scope, "skipped", reason="not due, or running elsewhere")
        run_id = store.start_run(conn, row.name, scope, owner, cursor)

        def save(value: dict[str, Any] | None) -> None:
            store.checkpoint(conn, row.name, scope, owner, run_id, value)

        ctx = JobContext(settings=settings, tenant=tenant, cursor=cursor, deadline=end, save=save,
                         options=dict(options or {}))
        try:
            result = resolve(row.function)(ctx)
            if isinstance(result, dict):
                result = JobResult(counts=result)
        except Exception as exc:  # recorded, and the lane carries on with its other jobs
            logger.exception("job %s (%s) failed", row.name, scope)
            error = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"[:1000]
            store.finish(conn, row.name, scope, owner, run_id, status="failed", counts={}, cursor=cursor,
                         error=error, cadence_s=row.cadence_s)
            return RunOutcome(row.name, scope, "failed", cursor=cursor, error=error,
                              seconds=time.monotonic() - started)
        status: store.EndStatus = "partial" if result.cursor is not None else "finished"
        store.finish(conn, row.name, scope, owner, run_id, status=status, counts=result.counts,
                     cursor=result.cursor, error=None, cadence_s=row.cadence_s)
    seconds = time.monotonic() - started
    _publish(row.name, result.counts, seconds)
    return RunOutcome(row.name, scope, status, counts=dict(result.counts), cursor=result.cursor, seconds=seconds)


def _owner() -> str:
    """Who runs: host, process and a random suffix (unique per run)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _publish(job: str, counts: dict[str, int], seconds: float) -> None:
    """One EMF data point per count (``Job<Name>.<count>``) and the run's duration (``JobDuration``)."""
    observability.record("JobDuration", seconds * 1000.0)
    prefix = "Job" + "".join(part.title() for part in job.split("_"))
    for name, value in counts.items():
        observability.record(f"{prefix}.{name}", float(value), "Count")
