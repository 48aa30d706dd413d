"""The knowledge half's housekeeping, one scheduled job per step (rows of :mod:`chalicelib.jobs.table`). Each runs as
the owner across tenants (or for the run's tenant), in bounded batches: it stops when its budget runs out and
returns a cursor, and the next run continues (every step finds its work by a predicate — stuck, expired, orphaned
— so work done is never found again and a repeated run changes nothing; the drop-folder sync walks the bucket in
key order from its cursor, and finds nothing to do where the stores already match it).
"""

from __future__ import annotations

from chalicelib.jobs.batches import BATCH, MARGIN_S, batches, connection
from chalicelib.jobs.model import JobContext, JobResult

__all__ = [
    "JOB_RETENTION_S",
    "expire_files",
    "expire_vector_stores",
    "purge_ingest_versions",
    "retry_stalled_files",
    "settle_files",
    "sweep_orphaned_objects",
    "sweep_upload_parts",
    "sync_drop_folder",
    "sync_vector_index",
]

# Finished ingestion versions are kept as long as a message of theirs may still arrive: SQS keeps a message at most
# 14 days (MessageRetentionPeriod maximum, Amazon SQS Developer Guide), so a dead-letter message redriven at the
# last moment still finds its failed version and re-opens it.
JOB_RETENTION_S = 14 * 86_400.0


def retry_stalled_files(ctx: JobContext) -> JobResult:
    """Re-send ``in_progress`` files whose lease ran out with attempts left (:func:`engine.retry_stalled`)."""
    from chalicelib import deps
    from chalicelib.ingest import engine

    dispatcher = deps.dispatcher(ctx.settings)
    return batches(ctx, "retried_files", lambda conn: engine.retry_stalled(
        conn, ctx.settings, dispatcher, limit=100, tenant_id=ctx.tenant), size=100)


def settle_files(ctx: JobContext) -> JobResult:
    """Fail files out of attempts, or never picked up (:func:`attachments.settle`)."""
    from chalicelib.store import attachments

    settings = ctx.settings
    return batches(ctx, "failed_files", lambda conn: attachments.settle(
        conn, max_attempts=settings.processing_max_attempts, tenant_id=ctx.tenant,
        unclaimed_after_s=settings.unclaimed_after_s), size=attachments.SETTLE_LIMIT)


def expire_vector_stores(ctx: JobContext) -> JobResult:
    """Delete vector stores expired longer than ``expired_retention_s`` seconds ago."""
    from chalicelib.store import vector_stores

    return batches(ctx, "expired_stores", lambda conn: vector_stores.sweep_expired(
        conn, retention_s=ctx.settings.expired_retention_s, tenant_id=ctx.tenant, limit=BATCH))


def expire_files(ctx: JobContext) -> JobResult:
    """Delete files past their ``expires_at`` (detached everywhere)."""
    from chalicelib.store import files

    return batches(ctx, "expired_files", lambda conn: files.sweep_expired(conn, tenant_id=ctx.tenant, limit=BATCH))


def sweep_upload_parts(ctx: JobContext) -> JobResult:
    """Delete the parts of finished or expired uploads."""
    from chalicelib import deps
    from chalicelib.store import uploads

    blobs = deps.blob_store(ctx.settings)
    return batches(ctx, "stale_uploads", lambda conn: uploads.sweep_expired(conn, blobs, tenant_id=ctx.tenant,
                                                                              limit=BATCH))


def purge_ingest_versions(ctx: JobContext) -> JobResult:
    """Delete finished ingestion versions older than :data:`JOB_RETENTION_S` (and their staged chunks)."""
    from chalicelib.store import ingest_jobs

    with connection(ctx) as conn:
        purged = ingest_jobs.purge(conn, retention_s=JOB_RETENTION_S, grace_s=ctx.settings.processing_lease_s,
                                   tenant_id=ctx.tenant)
    return JobResult({"purged_versions": purged})


def sweep_orphaned_objects(ctx: JobContext) -> JobResult:
    """Remove S3 objects no row names any more (only with ``ENGRAM_BUCKET``)."""
    from chalicelib.events import orphans

    if not ctx.settings.bucket:
        return JobResult({"orphaned_objects": 0})
    with connection(ctx) as conn:
        return JobResult({"orphaned_objects": orphans.sweep(conn, ctx.settings, tenant_id=ctx.tenant)})


def sync_drop_folder(ctx: JobContext) -> JobResult:
    """Sync the drop folder with its bucket (:mod:`chalicelib.events.sync`): every tenant whose drop folder is on,
    or the run's tenant (and its ``store`` option); the differences go through the ingestion path. Counts
    ``scanned``, ``new``, ``modified``, ``deleted``, ``unchanged``, ``failed`` (only with ``ENGRAM_BUCKET``).

    Raises:
        InvalidRequestError: for the run's tenant, see :func:`chalicelib.events.sync.scope`.
        UpstreamError: S3 or SQS failed (the next run resumes from the last checkpoint).
    """
    from chalicelib import deps
    from chalicelib.events import sync

    if not ctx.settings.bucket:
        return JobResult(sync.zero_counts())
    result = sync.run(ctx.settings, deps.dispatcher(ctx.settings), tenant=ctx.tenant, store=ctx.options.get("store"),
                      cursor=dict(ctx.cursor) if ctx.cursor else None, out_of_time=lambda: ctx.out_of_time(MARGIN_S),
                      checkpoint=ctx.checkpoint)
    return JobResult(result.counts, cursor=result.cursor)


def sync_vector_index(ctx: JobContext) -> JobResult:
    """Sync the queued files of stores on backends that keep their own copy of their candidates
    (:mod:`chalicelib.search.backends.sync`): every tenant's, or the run's tenant's, in batches until none is left
    or the time is up; then let those backends build what was written since their last build (the embedded
    engine's indexes), whoever wrote it — this sync, an ingest's swap ahead of its commit, a move, a load (issue
    33: the job used to build only after upserting points itself, so points written ahead of their commit stayed
    unindexed). Counts ``synced_files``, ``failed_files`` (kept queued with their error), ``skipped_files``
    (another sync held them) and ``points``.
    """
    from chalicelib.search.backends import sync

    totals = sync.SyncCounts()
    more = False
    with connection(ctx) as conn:
        while True:
            counts = sync.sync_pending(conn, ctx.settings, tenant_id=ctx.tenant)
            totals.add(counts)
            if counts.synced == 0 or ctx.out_of_time(MARGIN_S):
                more = counts.synced > 0
                break
        sync.settle(conn, ctx.settings)
    return JobResult(totals.as_dict(), cursor={"more": True} if more else None)

