"""Scheduled handlers: ``housekeeping`` (every 5 minutes) keeps statuses true and storage clean; ``memory_jobs``
(hourly) is where memory consolidation, decay and summarization run — features register into
:data:`MEMORY_JOBS`.

Housekeeping, one pass (as the table owner, all tenants):

1. retry stuck files (serverless mode, ``Settings.ingest_queue`` set): an ``in_progress`` file whose lease ran out
   while attempts remain is claimed again and its new version re-sent to the ingestion queue;
2. fail files out of attempts or never picked up (:func:`chalicelib.store.processing.settle`), delete expired
   vector stores and files and finished uploads' parts (:func:`chalicelib.ingest.worker.housekeeping`);
3. purge finished ingestion jobs past :data:`JOB_RETENTION_S` (and their staged chunks);
4. remove orphaned S3 objects (:mod:`chalicelib.events.orphans`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from chalicelib.config import Settings

logger = logging.getLogger("engram.events")

# Finished jobs are kept as long as a message of theirs may still arrive: SQS keeps a message at most 14 days
# (MessageRetentionPeriod maximum, Amazon SQS Developer Guide), so a dead-letter message redriven at the last
# moment still finds its failed version and re-opens it.
JOB_RETENTION_S = 14 * 86_400.0
# A version that is open (its messages in SQS) is only retried by housekeeping after this long without progress:
# SQS redelivers and dead-letters its messages itself, and a backlog must not restart files whose batches are merely
# queued. Six hours exceeds a Lambda visibility timeout (at most 12 h, typically 6 × the 15-minute function timeout
# = 90 minutes) times a few receives.
STALL_S = 6 * 3600.0
# Functions run by the hourly memory_jobs handler: each takes the settings and returns a dict of counts (or None).
MEMORY_JOBS: list[Callable[[Settings], dict[str, Any] | None]] = []


def register_memory_job(job: Callable[[Settings], dict[str, Any] | None]) -> None:
    """Add ``job`` to the hourly memory jobs (idempotent: a job registered twice runs once)."""
    if job not in MEMORY_JOBS:
        MEMORY_JOBS.append(job)


def housekeeping(settings: Settings) -> dict[str, int]:
    """One housekeeping pass; returns counts ``{"retried_files", "failed_files", "expired_stores",
    "expired_files", "stale_uploads", "purged_jobs", "orphaned_objects"}``. A failing step is logged and counted
    as 0 so the others still run."""
    from chalicelib.ingest import worker
    from chalicelib.store import ingest_jobs
    from chalicelib.store.db import pool

    counts: dict[str, int] = {"retried_files": 0, "purged_jobs": 0, "orphaned_objects": 0}
    with pool(settings).connection() as conn:
        if settings.ingest_queue:
            counts["retried_files"] = _step("retry", lambda: retry_stuck(conn, settings))
        counts.update(worker.housekeeping(settings, conn))
        counts["purged_jobs"] = _step("purge", lambda: ingest_jobs.purge(
            conn, retention_s=JOB_RETENTION_S, grace_s=settings.processing_lease_s))
        if settings.bucket:
            from chalicelib.events import orphans

            counts["orphaned_objects"] = _step("orphans", lambda: orphans.sweep(conn, settings))
    logger.info("housekeeping: %s", counts)
    return counts


def retry_stuck(conn, settings: Settings) -> int:
    """Claim stuck files that have attempts left (see :func:`ingest_jobs.claim_stuck`, stall :data:`STALL_S`) and
    send their new versions to the ingestion queue; returns how many were re-sent.

    Raises:
        UpstreamError: SQS failed (the versions are abandoned, so the next pass tries again).
    """
    from chalicelib.errors import EngramError
    from chalicelib.events import dispatch
    from chalicelib.events.messages import FileMessage
    from chalicelib.store import ingest_jobs

    claimed = ingest_jobs.claim_stuck(conn, lease_s=settings.processing_lease_s,
                                      max_attempts=settings.processing_max_attempts, stall_s=STALL_S)
    try:
        dispatch.send_files(settings, [FileMessage(*row) for row in claimed])
    except EngramError:
        for row in claimed:
            ingest_jobs.abandon(conn, *row)
        raise
    return len(claimed)


def summarize_conversations(settings: Settings) -> dict[str, int]:
    """Eager conversation summarization: precompute the summary of every long stored Responses chain that has
    none yet (:func:`chalicelib.responses.summarize.precompute_summaries`, at most 50 per run); ``{"summaries": n}``.
    Chains whose backend fails are logged and retried on the next run."""
    from chalicelib.responses.summarize import precompute_summaries

    return {"summaries": precompute_summaries(settings)}


register_memory_job(summarize_conversations)


def memory_jobs(settings: Settings) -> dict[str, Any]:
    """Run every registered memory job; returns ``{job name: its result or {"error": message}}``."""
    results: dict[str, Any] = {}
    for job in list(MEMORY_JOBS):
        name = getattr(job, "__qualname__", repr(job))
        try:
            results[name] = job(settings)
        except Exception as exc:  # one job's failure must not stop the others
            logger.exception("memory job %s failed", name)
            results[name] = {"error": str(exc)[:300]}
    return results


def _step(name: str, run: Callable[[], int]) -> int:
    try:
        return int(run())
    except Exception:
        logger.exception("housekeeping step %s failed", name)
        return 0
