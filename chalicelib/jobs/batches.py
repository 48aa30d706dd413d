"""Running a job's work in bounded batches: each step is one statement (or transaction) that handles up to a batch
of rows found by a predicate — stuck, expired, stale — so work done is never found again, and a repeated or resumed
run changes nothing more. A run stops when a batch comes back short (done) or its time is up (a cursor says more
may remain)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from chalicelib.jobs.model import JobContext, JobResult

__all__ = ["BATCH", "MARGIN_S", "batches", "connection"]

# Rows one step handles per statement; a step repeats statements until it has done everything or its time is up.
BATCH = 1000
# Seconds kept in hand after a batch: a batch never starts with less than this left.
MARGIN_S = 2.0


def batches(ctx: JobContext, counter: str, step: Callable[..., int], *, size: int = BATCH) -> JobResult:
    """Run ``step(conn)`` (one bounded batch; returns rows handled) until a batch comes back short or the time is
    up; a full last batch leaves a cursor (more may remain). ``counter`` names the total in the result."""
    total = 0
    with connection(ctx) as conn:
        while True:
            handled = step(conn)
            total += handled
            if handled < size:
                return JobResult({counter: total})
            if ctx.out_of_time(MARGIN_S):
                return JobResult({counter: total}, cursor={"more": True})


def connection(ctx: JobContext) -> AbstractContextManager[psycopg.Connection[Any]]:
    """A pooled owner connection for the run (jobs work across tenants, filtering on the run's tenant)."""
    from chalicelib.store.db import pool

    return pool(ctx.settings).connection()
