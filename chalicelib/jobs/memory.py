"""The memory lifecycle's scheduled jobs (rows of :mod:`chalicelib.jobs.table`, lane ``memory_jobs``): each runs as
the owner across tenants (or for the run's tenant), bounded by its budget, resumable from its cursor, and
idempotent because every step finds its work by a predicate (the lifecycle steps of :mod:`chalicelib.memory`'s
public face, done by its ``archive``, ``expiry``, ``consolidation``, ``episodes`` and ``persona`` modules). The
memory model, when one is configured, is the one :func:`chalicelib.memory.lifecycle_model` picks. Counts are
published as EMF metrics by the runner.
"""

from __future__ import annotations

from typing import Any

from chalicelib.jobs.batches import MARGIN_S, batches, connection
from chalicelib.jobs.model import JobContext, JobResult

__all__ = ["archive_stale_memories", "consolidation", "enforce_memory_quotas", "episodize_conversations",
           "index_memories", "instancize_episodes", "refresh_personas", "sweep_expired_memories"]

# Memories per archive / sweep statement; threads per episode step; users per persona step; scopes per query.
MEMORY_BATCH = 500
THREAD_BATCH = 20
USER_BATCH = 20
SCOPE_BATCH = 50


def _actor(name: str) -> str:
    return f"job:{name}"


def _model(ctx: JobContext) -> tuple[Any, str | None]:
    """The memory model's backend and name, or (None, None) when none is configured (the jobs then do what they
    can without a model)."""
    from chalicelib.memory import lifecycle_model

    return lifecycle_model(ctx.settings)


def index_memories(ctx: JobContext) -> JobResult:
    """Index users' histories on their backends (:mod:`chalicelib.search.backends.partition_sync`): the new rows of
    every partition long enough to be indexed, rows changed or deleted since, and moves between backends
    (``engram memory reindex --backend``). Counts ``indexed_rows``, ``removed_rows``, ``moved_rows``,
    ``partitions`` and ``failed_partitions`` (their rows stay searchable from the tail; retried next run)."""
    from chalicelib.search.backends import partition_sync

    with connection(ctx) as conn:
        counts, more = partition_sync.index_pending(conn, ctx.settings, tenant_id=ctx.tenant,
                                                    deadline=ctx.deadline - MARGIN_S)
    return JobResult(counts.as_dict(), cursor={"more": True} if more else None)


def archive_stale_memories(ctx: JobContext) -> JobResult:
    """Archive memories not accessed for their tenant's ``auto_archive_days`` (not pinned or important)."""
    from chalicelib.memory import archive_stale
    from chalicelib.store.tenants import DEFAULT_LIMITS

    return batches(ctx, "archived", lambda conn: archive_stale(
        conn, tenant_id=ctx.tenant, limit=MEMORY_BATCH, actor=_actor("archive_stale_memories"),
        default_days=DEFAULT_LIMITS.auto_archive_days), size=MEMORY_BATCH)


def enforce_memory_quotas(ctx: JobContext) -> JobResult:
    """Archive each tenant's excess over ``max_entries``, lowest value first."""
    from chalicelib.memory import enforce_quota
    from chalicelib.store.tenants import DEFAULT_LIMITS

    settings = ctx.settings
    return batches(ctx, "quota_archived", lambda conn: enforce_quota(
        conn, tenant_id=ctx.tenant, limit=MEMORY_BATCH, actor=_actor("enforce_memory_quotas"),
        default_max=DEFAULT_LIMITS.max_entries, half_life_days=settings.memory_half_life_days,
        decay_floor=settings.memory_decay_floor), size=MEMORY_BATCH)


def sweep_expired_memories(ctx: JobContext) -> JobResult:
    """Delete expired working memories, and other expired memories past their retention."""
    from chalicelib.memory import sweep_expired
    from chalicelib.store.tenants import DEFAULT_LIMITS

    totals = {"ttl_swept": 0, "expired": 0}

    def step(conn: Any) -> int:
        counts = sweep_expired(conn, tenant_id=ctx.tenant, limit=MEMORY_BATCH, actor=_actor("sweep_expired_memories"),
                              default_retention_days=DEFAULT_LIMITS.expired_retention_days)
        for key, value in counts.items():
            totals[key] += value
        return sum(counts.values())

    result = batches(ctx, "deleted", step, size=MEMORY_BATCH)
    result.counts.update(totals)
    return result


def episodize_conversations(ctx: JobContext) -> JobResult:
    """Summarise quiet threads' exchanges into episodes (with the memory model, or extractively)."""
    from chalicelib import deps
    from chalicelib.memory import episodize

    backend, model = _model(ctx)
    embedder = deps.embedder(ctx.settings)
    return batches(ctx, "episodes", lambda conn: episodize(
        conn, tenant_id=ctx.tenant, limit=THREAD_BATCH, embedder=embedder, backend=backend, model=model,
        actor=_actor("episodize_conversations")), size=THREAD_BATCH)


def instancize_episodes(ctx: JobContext) -> JobResult:
    """Compress episodes older than 30 days into instances."""
    from chalicelib.memory import instancize

    return batches(ctx, "instances", lambda conn: instancize(
        conn, tenant_id=ctx.tenant, limit=MEMORY_BATCH, actor=_actor("instancize_episodes")), size=MEMORY_BATCH)


def refresh_personas(ctx: JobContext) -> JobResult:
    """Rewrite the persona of users whose preferences changed."""
    from chalicelib import deps
    from chalicelib.memory import refresh_personas

    backend, model = _model(ctx)
    embedder = deps.embedder(ctx.settings)
    return batches(ctx, "personas", lambda conn: refresh_personas(
        conn, tenant_id=ctx.tenant, limit=USER_BATCH, embedder=embedder, backend=backend, model=model,
        actor=_actor("refresh_personas")), size=USER_BATCH)


def consolidation(ctx: JobContext) -> JobResult:
    """Merge each scope's duplicates (and, with a model, related memories), scope by scope from the cursor; the
    cursor is saved after every scope, so a killed run resumes where it stopped."""
    from chalicelib import deps
    from chalicelib.memory import ScopeKey, consolidate_scope, consolidation_scopes

    backend, model = _model(ctx)
    embedder = deps.embedder(ctx.settings)
    after = ScopeKey(**ctx.cursor["after"]) if ctx.cursor and ctx.cursor.get("after") else None
    counts = {"scopes": 0, "groups": 0, "merged": 0}
    with connection(ctx) as conn:
        while True:
            keys = consolidation_scopes(conn, tenant_id=ctx.tenant, after=after, limit=SCOPE_BATCH)
            if not keys:
                return JobResult(counts)
            for key in keys:
                done = consolidate_scope(conn, key, near_duplicate=ctx.settings.memory_near_duplicate,
                                                 embedder=embedder, backend=backend, model=model,
                                                 actor=_actor("consolidation"))
                counts["scopes"] += 1
                counts["groups"] += done["groups"]
                counts["merged"] += done["merged"]
                after = key
                ctx.checkpoint({"after": key.as_cursor()})
                if ctx.out_of_time(MARGIN_S):
                    return JobResult(counts, cursor={"after": key.as_cursor()})
