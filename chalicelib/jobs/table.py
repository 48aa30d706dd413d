"""Every scheduled job, as data: one :class:`~chalicelib.jobs.model.Job` row per job and one
:class:`~chalicelib.jobs.model.Lane` per scheduled Lambda function. ``app.py`` generates one schedule handler per lane
(ticking at its shortest cadence), the local event pump fires them, ``infra/`` builds one function per lane, and
``.chalice/config.json`` sets each lane's timeout and memory (tests fail when any of them disagrees with this table).

Adding a scheduled job is one row here plus its function. A job's function is named by dotted path and imported
when it first runs.
"""

from __future__ import annotations

from chalicelib.jobs.model import Job, Lane

__all__ = ["JOBS", "LANES", "job", "jobs_of", "lane", "tick_s"]

MINUTE, HOUR, DAY = 60.0, 3600.0, 86_400.0

LANES: tuple[Lane, ...] = (
    Lane(name="housekeeping", timeout_s=120, memory_mb=512, needs=frozenset({"bucket", "queues"}),
         description="Keeps statuses true and storage clean: stuck files, expiry, orphans."),
    Lane(name="memory_jobs", timeout_s=900, memory_mb=1024, needs=frozenset({"models"}),
         description="Memory and conversation maintenance: summarization, consolidation, decay."),
)

_HK = "chalicelib.jobs.housekeeping"
_MEM = "chalicelib.jobs.memory"
JOBS: tuple[Job, ...] = (
    Job("retry_stalled_files", f"{_HK}:retry_stalled_files", 5 * MINUTE, "housekeeping", 30,
        "Re-send in_progress files whose lease ran out while attempts remain."),
    Job("settle_files", f"{_HK}:settle_files", 5 * MINUTE, "housekeeping", 20,
        "Fail files out of attempts or never picked up (last_error server_error)."),
    Job("expire_vector_stores", f"{_HK}:expire_vector_stores", 5 * MINUTE, "housekeeping", 20,
        "Delete vector stores past expires_at plus the retention period."),
    Job("expire_files", f"{_HK}:expire_files", 5 * MINUTE, "housekeeping", 20,
        "Delete files past their expires_at."),
    Job("sweep_upload_parts", f"{_HK}:sweep_upload_parts", 5 * MINUTE, "housekeeping", 15,
        "Delete the parts of finished or expired uploads."),
    Job("purge_ingest_versions", f"{_HK}:purge_ingest_versions", HOUR, "housekeeping", 10,
        "Delete finished ingestion versions older than 14 days."),
    Job("sweep_orphaned_objects", f"{_HK}:sweep_orphaned_objects", HOUR, "housekeeping", 20,
        "Remove S3 objects no file or upload names any more."),
    Job("sync_drop_folder", f"{_HK}:sync_drop_folder", HOUR, "housekeeping", 60,
        "Bring each store to match the drop bucket: objects whose S3 event was missed, changed or deleted."),
    Job("sync_vector_index", f"{_HK}:sync_vector_index", 5 * MINUTE, "housekeeping", 30,
        "Bring Qdrant's points to match Postgres for queued files (deletes, retries) and build its indexes."),
    Job("summarize_conversations", "chalicelib.responses.summarize:summarize_job", HOUR, "memory_jobs", 600,
        "Precompute the summaries of long Responses conversations."),
    Job("index_memories", f"{_MEM}:index_memories", 5 * MINUTE, "memory_jobs", 120,
        "Index long user histories on their backend (pgvector), retry failed writes, move between backends."),
    Job("consolidation", f"{_MEM}:consolidation", DAY, "memory_jobs", 600,
        "Merge each scope's duplicate memories (and related ones, with a memory model)."),
    Job("archive_stale_memories", f"{_MEM}:archive_stale_memories", DAY, "memory_jobs", 120,
        "Archive memories unused for auto_archive_days (never pinned or important ones)."),
    Job("enforce_memory_quotas", f"{_MEM}:enforce_memory_quotas", HOUR, "memory_jobs", 60,
        "Archive each tenant's memories beyond max_entries, lowest value first."),
    Job("sweep_expired_memories", f"{_MEM}:sweep_expired_memories", 15 * MINUTE, "memory_jobs", 60,
        "Delete expired working memories, and other expired memories after their retention."),
    Job("episodize_conversations", f"{_MEM}:episodize_conversations", HOUR, "memory_jobs", 300,
        "Summarise threads quiet for 6 hours into searchable episodes."),
    Job("instancize_episodes", f"{_MEM}:instancize_episodes", DAY, "memory_jobs", 120,
        "Compress episodes older than 30 days into instances."),
    Job("refresh_personas", f"{_MEM}:refresh_personas", HOUR, "memory_jobs", 120,
        "Rewrite user personas whose preferences changed."),
)


def lane(name: str) -> Lane:
    """The lane called ``name``.

    Raises:
        KeyError: no such lane.
    """
    for row in LANES:
        if row.name == name:
            return row
    raise KeyError(name)


def job(name: str) -> Job:
    """The job called ``name``.

    Raises:
        KeyError: no such job (``engram jobs list`` shows them).
    """
    for row in JOBS:
        if row.name == name:
            return row
    raise KeyError(name)


def jobs_of(lane_name: str) -> tuple[Job, ...]:
    """The jobs a lane runs, in table order."""
    return tuple(row for row in JOBS if row.lane == lane_name)


def tick_s(lane_name: str) -> float:
    """Seconds between a lane's invocations: its jobs' shortest cadence, at least one minute (EventBridge's
    finest rate)."""
    return max(MINUTE, min((row.cadence_s for row in jobs_of(lane_name)), default=HOUR))
