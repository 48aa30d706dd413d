"""What a scheduled job is (:class:`Job`), where it runs (:class:`Lane`), and what a run of it sees
(:class:`JobContext`) and returns (:class:`JobResult`). Plain values: the table (:mod:`chalicelib.jobs.table`)
lists the rows, the runner (:mod:`chalicelib.jobs.runner`) executes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.config import Settings

__all__ = ["Job", "JobContext", "JobResult", "Lane"]


@dataclass(frozen=True, slots=True)
class Lane:
    """One scheduled Lambda function and the jobs it runs.

    Attributes:
        name: the ``app.py`` handler (and Chalice function) name, e.g. ``housekeeping``.
        timeout_s: the function's timeout, seconds (``.chalice/config.json`` ``lambda_timeout`` must equal it).
        memory_mb: the function's memory, MB (``lambda_memory_size``).
        needs: AWS access beyond the database, as ``infra/`` grants it: ``bucket`` (read/delete the drop
            bucket), ``queues`` (send to Engram's queues), ``models`` (invoke the Bedrock models).
        description: one line for ``engram jobs list`` and the function's description.
    """

    name: str
    timeout_s: int
    memory_mb: int
    needs: frozenset[str] = frozenset()
    description: str = ""

    @property
    def budget_s(self) -> float:
        """Seconds the lane's jobs may use per invocation: the timeout minus a margin for recording the runs."""
        return max(1.0, self.timeout_s - max(5.0, 0.1 * self.timeout_s))


@dataclass(frozen=True, slots=True)
class Job:
    """One scheduled job.

    Attributes:
        name: unique, e.g. ``settle_files`` (``engram jobs run NAME``).
        function: dotted ``module:function`` taking a :class:`JobContext` and returning a :class:`JobResult`;
            imported when the job first runs (cold starts stay cheap, and nothing registers itself at import).
        cadence_s: seconds between the starts of two passes; an unfinished pass (a run that returned a cursor)
            continues on the lane's next tick instead.
        lane: the :class:`Lane` whose function runs it.
        budget_s: seconds one run may take (bounded by the lane's budget); the job stops before it and returns a
            cursor to resume from.
        description: one line for ``engram jobs list``.
    """

    name: str
    function: str
    cadence_s: float
    lane: str
    budget_s: float
    description: str = ""


@dataclass(slots=True)
class JobResult:
    """What a run did: ``counts`` (e.g. ``{"failed_files": 2}``, published as EMF metrics) and ``cursor`` —
    None when the pass is complete, else where the next run resumes (a JSON object)."""

    counts: dict[str, int] = field(default_factory=dict)
    cursor: dict[str, Any] | None = None


@dataclass(slots=True)
class JobContext:
    """What a run sees.

    Attributes:
        settings: the process's settings.
        tenant: the tenant the run is limited to, or None for every tenant.
        cursor: where the previous, unfinished pass stopped (None: start a new pass).
        deadline: ``time.monotonic()`` value the run must finish by (its budget).
        save: persists a cursor mid-run (:meth:`checkpoint`), so a run killed later resumes from there.
        options: what a run asked for beyond its tenant (e.g. ``{"store": "docs"}`` for ``sync_drop_folder``); a run
            with options has a scope of its own (:func:`chalicelib.jobs.runner.scope_of`).
    """

    settings: Settings
    tenant: str | None
    cursor: Mapping[str, Any] | None
    deadline: float
    save: Callable[[dict[str, Any] | None], None] = lambda cursor: None
    options: Mapping[str, str] = field(default_factory=dict)

    def time_left(self) -> float:
        """Seconds until the deadline (negative once past it)."""
        return self.deadline - time.monotonic()

    def out_of_time(self, margin_s: float = 0.0) -> bool:
        """Whether less than ``margin_s`` seconds remain: stop, and return a cursor."""
        return self.time_left() <= margin_s

    def checkpoint(self, cursor: dict[str, Any] | None) -> None:
        """Record ``cursor`` now (idempotent work done up to it survives a kill)."""
        self.save(cursor)
