"""The scheduled jobs' tables (migrations/0008_jobs.sql): ``job_state`` (lease, cursor, next due time per job and
scope) and ``job_runs`` (one record per run). Run as the owner role."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.store.db import one

__all__ = ["ALL_TENANTS", "EndStatus", "JobState", "RunRecord", "RunStatus", "acquire", "checkpoint", "finish",
           "last_run_covering", "latest_runs", "runs_covering", "start_run", "states", "states_covering"]

ALL_TENANTS = "*"
# A run's status: the CHECK constraint of ``job_runs.status`` (migrations/0008_jobs.sql says what each means).
RunStatus = Literal["running", "finished", "partial", "failed", "abandoned"]
# How a run that reached :func:`finish` ended.
EndStatus = Literal["finished", "partial", "failed"]

# Takes the job's lease if nobody holds it (or the holder's lease ran out: it died) and, unless forced, the job is
# due. Returns the cursor to resume from.
_ACQUIRE = """
INSERT INTO job_state AS s (job, scope, leased_until, lease_owner)
VALUES (%(job)s, %(scope)s, now() + make_interval(secs => %(lease)s), %(owner)s)
ON CONFLICT (job, scope) DO UPDATE
SET leased_until = EXCLUDED.leased_until, lease_owner = EXCLUDED.lease_owner
WHERE (s.leased_until IS NULL OR s.leased_until < now())
  AND (%(force)s OR s.due_at IS NULL OR s.due_at <= now())
RETURNING s.cursor"""
# Runs of this job and scope still marked running now that their lease was taken over: their process died.
_ABANDON = """
UPDATE job_runs SET status = 'abandoned', finished_at = now(), error = 'the run stopped without finishing'
WHERE job = %(job)s AND scope = %(scope)s AND status = 'running'"""
_START = """
INSERT INTO job_runs (job, scope, owner, cursor_in) VALUES (%(job)s, %(scope)s, %(owner)s, %(cursor)s)
RETURNING id"""
_CHECKPOINT_STATE = """
UPDATE job_state SET cursor = %(cursor)s WHERE job = %(job)s AND scope = %(scope)s AND lease_owner = %(owner)s"""
_CHECKPOINT_RUN = "UPDATE job_runs SET cursor_out = %(cursor)s WHERE id = %(run)s"
_FINISH_RUN = """
UPDATE job_runs SET finished_at = now(), status = %(status)s, counts = %(counts)s, cursor_out = %(cursor)s,
    error = %(error)s
WHERE id = %(run)s"""
# Releases the lease (only the holder's: a run that outlived its lease must not clobber its successor's state).
_FINISH_STATE = """
UPDATE job_state SET cursor = %(cursor)s, leased_until = NULL, lease_owner = NULL, last_run_id = %(run)s,
    due_at = CASE WHEN %(cursor)s::jsonb IS NOT NULL THEN now()
                  ELSE (SELECT started_at FROM job_runs WHERE id = %(run)s) + make_interval(secs => %(cadence)s) END
WHERE job = %(job)s AND scope = %(scope)s AND lease_owner = %(owner)s"""
_STATES = """
SELECT s.job, s.scope, s.cursor, s.due_at, s.leased_until, r.started_at, r.finished_at, r.status, r.counts, r.error
FROM job_state s LEFT JOIN job_runs r ON r.id = s.last_run_id ORDER BY s.job, s.scope"""
_LATEST = """
SELECT id, job, scope, owner, started_at, finished_at, status, counts, cursor_in, cursor_out, error FROM job_runs
WHERE job = %(job)s AND (%(scope)s::text IS NULL OR scope = %(scope)s) ORDER BY id DESC LIMIT %(limit)s"""

# The newest run whose scope covers a tenant: every tenant's ("*"), the tenant's, or one with options
# ("<tenant>?name=value", chalicelib/jobs/runner.py scope_of).
_COVERING = """
SELECT id, job, scope, owner, started_at, finished_at, status, counts, cursor_in, cursor_out, error FROM job_runs
WHERE job = %(job)s AND (scope IN (%(all)s, %(tenant)s) OR starts_with(scope, %(tenant)s || '?'))
ORDER BY id DESC LIMIT 1"""


# The scopes whose runs concern one tenant: every tenant's ("*"), the tenant's, or the tenant's with options
# ("<tenant>?name=value"; a tenant name holds no "?", chalicelib/store/api_keys.py validate_tenant). What the API
# shows a tenant's key (chalicelib/api/routes/operations.py): never another tenant's scope.
_COVERS = "({scope} IN (%(all)s, %(tenant)s) OR starts_with({scope}, %(tenant)s || '?'))"
_STATES_COVERING = f"""
SELECT s.job, s.scope, s.cursor, s.due_at, s.leased_until, r.started_at, r.finished_at, r.status, r.counts, r.error
FROM job_state s LEFT JOIN job_runs r ON r.id = s.last_run_id WHERE {_COVERS.format(scope="s.scope")}
ORDER BY s.job, s.scope"""
_RUNS_COVERING = f"""
SELECT id, job, scope, owner, started_at, finished_at, status, counts, cursor_in, cursor_out, error FROM job_runs
WHERE job = %(job)s AND {_COVERS.format(scope="scope")} AND (%(before)s::bigint IS NULL OR id < %(before)s)
ORDER BY id DESC LIMIT %(limit)s"""


@dataclass(frozen=True, slots=True)
class JobState:
    """A job's standing for one scope: the open pass's ``cursor``, when it is next ``due_at``, whether a run
    holds it (``leased_until``), and its last run's times, status, counts and error."""

    job: str
    scope: str
    cursor: dict[str, Any] | None
    due_at: datetime | None
    leased_until: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    status: RunStatus | None
    counts: dict[str, int] | None
    error: str | None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A row of ``job_runs``."""

    id: int
    job: str
    scope: str
    owner: str
    started_at: datetime
    finished_at: datetime | None
    status: RunStatus
    counts: dict[str, int]
    cursor_in: dict[str, Any] | None
    cursor_out: dict[str, Any] | None
    error: str | None


def acquire(conn: psycopg.Connection, job: str, scope: str, owner: str, *, lease_s: float,
            force: bool) -> tuple[bool, dict[str, Any] | None]:
    """Take the lease of ``job`` for ``scope`` for ``lease_s`` seconds: ``(True, cursor)`` when taken (runs of it
    left ``running`` by a dead process become ``abandoned``), ``(False, None)`` when another run holds it or (not
    ``force``) it is not due yet."""
    with conn.transaction():
        row = conn.execute(_ACQUIRE, {"job": job, "scope": scope, "owner": owner, "lease": lease_s,
                                      "force": force}).fetchone()
        if row is None:
            return False, None
        conn.execute(_ABANDON, {"job": job, "scope": scope})
    return True, row[0]


def start_run(conn: psycopg.Connection, job: str, scope: str, owner: str, cursor: dict[str, Any] | None) -> int:
    """Record a run starting from ``cursor``; returns its id."""
    return int(one(conn.execute(_START, {"job": job, "scope": scope, "owner": owner,
                                         "cursor": Jsonb(cursor) if cursor is not None else None}))[0])


def checkpoint(conn: psycopg.Connection, job: str, scope: str, owner: str, run_id: int,
               cursor: dict[str, Any] | None) -> None:
    """Save a mid-run ``cursor`` (a killed run resumes from it)."""
    value = Jsonb(cursor) if cursor is not None else None
    with conn.transaction():
        conn.execute(_CHECKPOINT_STATE, {"job": job, "scope": scope, "owner": owner, "cursor": value})
        conn.execute(_CHECKPOINT_RUN, {"run": run_id, "cursor": value})


def finish(conn: psycopg.Connection, job: str, scope: str, owner: str, run_id: int, *, status: EndStatus,
           counts: dict[str, int], cursor: dict[str, Any] | None, error: str | None, cadence_s: float) -> None:
    """Record how a run ended and release the lease: an unfinished pass (``cursor``) is due again at once, a
    finished one ``cadence_s`` seconds after this run started."""
    value = Jsonb(cursor) if cursor is not None else None
    with conn.transaction():
        conn.execute(_FINISH_RUN, {"run": run_id, "status": status, "counts": Jsonb(counts), "cursor": value,
                                   "error": error})
        conn.execute(_FINISH_STATE, {"job": job, "scope": scope, "owner": owner, "run": run_id, "cursor": value,
                                     "cadence": cadence_s})


def states(conn: psycopg.Connection) -> list[JobState]:
    """Every job's standing per scope (jobs never run have none)."""
    with conn.cursor(row_factory=class_row(JobState)) as cur:
        return cur.execute(_STATES).fetchall()


def latest_runs(conn: psycopg.Connection, job: str, *, scope: str | None = None, limit: int = 20) -> list[RunRecord]:
    """The newest ``limit`` runs of ``job`` (of one scope, or all)."""
    with conn.cursor(row_factory=class_row(RunRecord)) as cur:
        return cur.execute(_LATEST, {"job": job, "scope": scope, "limit": limit}).fetchall()


def last_run_covering(conn: psycopg.Connection, job: str, tenant: str) -> RunRecord | None:
    """The newest run of ``job`` that covered ``tenant`` (all tenants', the tenant's, or one of the tenant's with
    options), or None."""
    with conn.cursor(row_factory=class_row(RunRecord)) as cur:
        return cur.execute(_COVERING, {"job": job, "all": ALL_TENANTS, "tenant": tenant}).fetchone()


def states_covering(conn: psycopg.Connection, tenant: str) -> list[JobState]:
    """Every job's standing in the scopes that concern ``tenant`` (every tenant's, the tenant's, the tenant's with
    options); jobs never run there have none."""
    with conn.cursor(row_factory=class_row(JobState)) as cur:
        return cur.execute(_STATES_COVERING, {"all": ALL_TENANTS, "tenant": tenant}).fetchall()


def runs_covering(conn: psycopg.Connection, job: str, tenant: str, *, limit: int = 20,
                  before: int | None = None) -> list[RunRecord]:
    """The newest ``limit`` runs of ``job`` in the scopes that concern ``tenant`` (see :func:`states_covering`),
    those with an id below ``before`` when given (the next page)."""
    with conn.cursor(row_factory=class_row(RunRecord)) as cur:
        return cur.execute(_RUNS_COVERING, {"job": job, "all": ALL_TENANTS, "tenant": tenant, "limit": limit,
                                            "before": before}).fetchall()
