"""Ingestion versions: one row per processing run ("version") of an attached file — whichever way it runs (inline
in a request, in a background thread, through SQS) — and the embedding batches of that run that have landed.

A version is the ``vector_store_files.attempts`` number a claim produced (:func:`start`), and it guards the
version's final write (:func:`chalicelib.store.attachments.complete` with ``attempt=version``). Counting landed
batches happens under the job row's lock (:func:`lock`), which makes
"this was the last batch" true for exactly one handler. Lock order everywhere: job row → store row
(:mod:`chalicelib.store.attachments`) → ``vector_store_files`` row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.store import attachments
from chalicelib.store.db import pipeline
from chalicelib.wire import LastError

# A version's status: the CHECK constraint of ``ingest_jobs.status`` (migrations/0006_pipeline.sql says what each
# means).
VersionStatus = Literal["pending", "embedding", "completed", "failed", "rejected", "superseded"]
# Statuses in which a version still has work to do.
OPEN: tuple[VersionStatus, ...] = ("pending", "embedding")
# Statuses a version never leaves (except "failed", which a redriven message may re-open).
FINAL: tuple[VersionStatus, ...] = ("completed", "rejected", "superseded")


@dataclass(frozen=True, slots=True)
class Job:
    """A row of ``ingest_jobs`` (see migrations/0006_pipeline.sql for the status meanings)."""

    tenant_id: str
    vector_store_id: str
    file_id: str
    version: int
    status: VersionStatus
    source_bucket: str | None
    source_key: str | None
    source_etag: str | None
    content_sha256: str | None
    chunk_count: int
    batch_count: int
    batches_done: int
    last_error: LastError | None
    created_at: datetime
    updated_at: datetime
    staged_at: datetime | None


@dataclass(frozen=True, slots=True)
class Context:
    """A version's job with what its handlers need to know besides, read in one statement (one snapshot):

    Attributes:
        job: the version's row.
        state: where it stands against its attachment (:func:`attachment_state`); ``since`` when it failed.
        filename: the attached file's name; ``chunking_strategy`` the attachment's (None when detached).
        store_model / store_dim: the embedding model and dimensions of its store (None when the store is gone).
        batch_landed: whether the batch asked about had already landed.
    """

    job: Job
    state: str
    since: datetime | None
    filename: str | None
    chunking_strategy: dict[str, Any] | None
    store_model: str | None
    store_dim: int | None
    batch_landed: bool


_COLUMNS = """tenant_id, vector_store_id, file_id, version, status, source_bucket, source_key, source_etag,
    content_sha256, chunk_count, batch_count, batches_done, last_error, created_at, updated_at, staged_at"""
_KEY = "tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND version = %(version)s"
_INSERT = """
INSERT INTO ingest_jobs (tenant_id, vector_store_id, file_id, version, source_bucket, source_key, source_etag)
VALUES (%(tenant)s, %(store)s, %(file)s, %(version)s, %(bucket)s, %(key)s, %(etag)s)
ON CONFLICT DO NOTHING"""
_GET = f"SELECT {_COLUMNS} FROM ingest_jobs WHERE {_KEY}"
_CONTEXT = f"""
SELECT {", ".join("j." + c.strip() for c in _COLUMNS.split(","))},
    sf.status, sf.attempts, sf.updated_at, f.filename, sf.chunking_strategy, s.embedding_model, s.embedding_dim,
    %(batch)s::int IS NOT NULL AND EXISTS (
        SELECT 1 FROM ingest_job_batches b WHERE b.tenant_id = j.tenant_id AND b.vector_store_id = j.vector_store_id
            AND b.file_id = j.file_id AND b.version = j.version AND b.batch_no = %(batch)s::int)
FROM ingest_jobs j
LEFT JOIN vector_store_files sf
    ON sf.tenant_id = j.tenant_id AND sf.vector_store_id = j.vector_store_id AND sf.file_id = j.file_id
LEFT JOIN files f ON f.tenant_id = j.tenant_id AND f.id = j.file_id
LEFT JOIN vector_stores s ON s.tenant_id = j.tenant_id AND s.id = j.vector_store_id
WHERE j.tenant_id = %(tenant)s AND j.vector_store_id = %(store)s AND j.file_id = %(file)s
  AND j.version = %(version)s"""
_LOCK = f"SELECT {_COLUMNS} FROM ingest_jobs WHERE {_KEY} FOR UPDATE"
# Staging happens once per version: the update is the version's lock, and only a pending version is staged.
_SET_STAGED = f"""
UPDATE ingest_jobs SET status = 'embedding', chunk_count = %(chunks)s, batch_count = %(batches)s,
    content_sha256 = %(sha256)s, staged_at = now(), updated_at = now()
WHERE {_KEY} AND status = 'pending'
RETURNING {_COLUMNS}"""
_SET_CONTENT = f"""
UPDATE ingest_jobs SET chunk_count = %(chunks)s, content_sha256 = %(sha256)s, updated_at = now() WHERE {_KEY}"""
_SET_STATUS = f"""
UPDATE ingest_jobs SET status = %(status)s, last_error = %(error)s, updated_at = now() WHERE {_KEY}"""
_SUPERSEDE_OLDER = """
UPDATE ingest_jobs SET status = 'superseded', updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND version < %(version)s
  AND status IN ('pending', 'embedding', 'failed')"""
_REOPEN = f"""
UPDATE ingest_jobs SET status = CASE WHEN staged_at IS NULL THEN 'pending' ELSE 'embedding' END, last_error = NULL,
    updated_at = now()
WHERE {_KEY}"""
# Under the job's lock (taken by the statement before it): the batch's marker, if the version is still embedding
# and the batch had not landed, and the count. The marker's unique key decides between duplicate deliveries.
_LAND = f"""
WITH marker AS (
    INSERT INTO ingest_job_batches (tenant_id, vector_store_id, file_id, version, batch_no)
    SELECT tenant_id, vector_store_id, file_id, version, %(batch)s FROM ingest_jobs
    WHERE {_KEY} AND status = 'embedding'
    ON CONFLICT DO NOTHING RETURNING 1)
UPDATE ingest_jobs SET batches_done = batches_done + 1, updated_at = now()
WHERE {_KEY} AND EXISTS (SELECT 1 FROM marker)
RETURNING batches_done, batch_count"""
_OUTSTANDING = """
SELECT b FROM ingest_jobs j, generate_series(0, j.batch_count - 1) AS b
WHERE j.tenant_id = %(tenant)s AND j.vector_store_id = %(store)s AND j.file_id = %(file)s AND j.version = %(version)s
  AND NOT EXISTS (SELECT 1 FROM ingest_job_batches d
                  WHERE d.vector_store_id = j.vector_store_id AND d.file_id = j.file_id
                    AND d.version = j.version AND d.batch_no = b)
ORDER BY b"""
_CLEAR_BATCHES = f"DELETE FROM ingest_job_batches WHERE {_KEY}"
# The version's attachment: in_progress under this version (current), failed under it (re-openable), or neither.
_ATTACHMENT = """
SELECT status, attempts, updated_at FROM vector_store_files
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s"""
_REOPEN_FILE = """
UPDATE vector_store_files SET status = 'in_progress', last_error = NULL,
    lease_expires_at = now() + make_interval(secs => %(lease)s), updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s
  AND status = 'failed' AND attempts = %(version)s"""
_HEARTBEAT = """
UPDATE vector_store_files SET lease_expires_at = now() + make_interval(secs => %(lease)s)
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s
  AND status = 'in_progress' AND attempts = %(version)s"""
# Housekeeping (owner, all tenants): in_progress files whose lease ran out (or that nobody claimed for a lease)
# while attempts remain are claimed again, to be re-sent to the ingestion queue — unless their version is open and
# made progress within the stall time: its messages are still in SQS (queued behind a backlog, or being redelivered),
# and SQS's own retries and dead-letter queue take care of it.
_CLAIM_STUCK = """
UPDATE vector_store_files SET attempts = attempts + 1,
    lease_expires_at = now() + make_interval(secs => %(lease)s), updated_at = now()
WHERE (vector_store_id, file_id) IN (
    SELECT sf.vector_store_id, sf.file_id FROM vector_store_files sf
    WHERE sf.status = 'in_progress' AND sf.attempts - sf.attempt_base < %(max_attempts)s
      AND (%(tenant)s::text IS NULL OR sf.tenant_id = %(tenant)s)
      AND (sf.lease_expires_at < now()
           OR (sf.lease_expires_at IS NULL AND sf.updated_at < now() - make_interval(secs => %(lease)s)))
      AND NOT EXISTS (SELECT 1 FROM ingest_jobs j
                      WHERE j.vector_store_id = sf.vector_store_id AND j.file_id = sf.file_id
                        AND j.version = sf.attempts AND j.status IN ('pending', 'embedding')
                        AND j.updated_at > now() - make_interval(secs => %(stall)s))
    ORDER BY sf.updated_at LIMIT %(limit)s FOR UPDATE OF sf SKIP LOCKED)
RETURNING tenant_id, vector_store_id, file_id, attempts"""
# The version each in_progress attachment is processing, while open (a restarted local stack re-sends them).
_OPEN_VERSIONS = """
SELECT j.tenant_id, j.vector_store_id, j.file_id, j.version FROM ingest_jobs j
JOIN vector_store_files sf ON sf.vector_store_id = j.vector_store_id AND sf.file_id = j.file_id
WHERE sf.status = 'in_progress' AND sf.attempts = j.version AND j.status IN ('pending', 'embedding')
ORDER BY j.updated_at LIMIT %(limit)s"""
# A version whose message could not be sent: nobody will process it, so it is retried at the next housekeeping.
_ABANDON_JOB = f"""
UPDATE ingest_jobs SET status = 'superseded', updated_at = now()
WHERE {_KEY} AND status IN ('pending', 'embedding')"""
_EXPIRE_LEASE = """
UPDATE vector_store_files SET lease_expires_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s
  AND status = 'in_progress' AND attempts = %(version)s"""
# Finished versions older than the retention, and versions whose attachment is gone (detached, store deleted).
_PURGE = """
DELETE FROM ingest_jobs j
WHERE (%(tenant)s::text IS NULL OR j.tenant_id = %(tenant)s)
  AND ((j.status IN ('completed', 'failed', 'rejected', 'superseded')
        AND j.updated_at < now() - make_interval(secs => %(retention)s))
       OR (j.updated_at < now() - make_interval(secs => %(grace)s)
           AND NOT EXISTS (SELECT 1 FROM vector_store_files sf
                           WHERE sf.vector_store_id = j.vector_store_id AND sf.file_id = j.file_id)))"""


def _key(tenant_id: str, store_id: str, file_id: str, version: int) -> dict[str, Any]:
    return {"tenant": tenant_id, "store": store_id, "file": file_id, "version": version}


def start(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, lease_s: float,
          max_attempts: int, source: tuple[str, str, str | None] | None = None) -> int | None:
    """Claim an ``in_progress`` attachment (:func:`chalicelib.store.attachments.claim`, lease ``lease_s`` seconds)
    and record the new version as a ``pending`` job; ``source`` is ``(bucket, key, etag)`` of the drop-folder
    object it ingests. Returns the version, or None when the file is not claimable. Older open versions of the
    file become ``superseded``."""
    with conn.transaction():
        version = attachments.claim(conn, tenant_id, store_id, file_id, lease_s=lease_s, max_attempts=max_attempts)
        if version is None:
            return None
        record(conn, tenant_id, store_id, file_id, version, source=source)
    return version


def record(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int, *,
           source: tuple[str, str, str | None] | None = None) -> None:
    """Insert the ``pending`` job of a version already claimed (idempotent) and supersede older open versions."""
    bucket, key, etag = source or (None, None, None)
    params = _key(tenant_id, store_id, file_id, version)
    conn.execute(_INSERT, {**params, "bucket": bucket, "key": key, "etag": etag})
    conn.execute(_SUPERSEDE_OLDER, params)


def get(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int) -> Job | None:
    """The job of one version, or None (never started, or purged)."""
    with conn.cursor(row_factory=class_row(Job)) as cur:
        return cur.execute(_GET, _key(tenant_id, store_id, file_id, version)).fetchone()


def lock(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int) -> Job | None:
    """Like :func:`get`, holding the row lock to the end of the caller's transaction."""
    with conn.cursor(row_factory=class_row(Job)) as cur:
        return cur.execute(_LOCK, _key(tenant_id, store_id, file_id, version)).fetchone()


def set_staged(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int, *,
               chunk_count: int, batch_count: int, content_sha256: str) -> Job | None:
    """Mark a ``pending`` version ``embedding`` (``chunk_count`` chunks staged in ``batch_count`` batches), locking
    its row for the caller's transaction; returns the updated job, or None when the version is not pending (then
    nothing changed). Call first in the transaction that stages the chunks (lock order: job first)."""
    with conn.cursor(row_factory=class_row(Job)) as cur:
        return cur.execute(_SET_STAGED, {**_key(tenant_id, store_id, file_id, version), "chunks": chunk_count,
                                         "batches": batch_count, "sha256": content_sha256}).fetchone()


def set_content(conn: psycopg.Connection, job: Job, *, chunk_count: int, content_sha256: str) -> None:
    """Record what an inline version read: ``chunk_count`` chunks of content with hex SHA-256 ``content_sha256``."""
    conn.execute(_SET_CONTENT, {**_key(job.tenant_id, job.vector_store_id, job.file_id, job.version),
                                "chunks": chunk_count, "sha256": content_sha256})


def set_status(conn: psycopg.Connection, job: Job, status: VersionStatus, error: LastError | None = None) -> None:
    """Set a version's status and ``last_error``."""
    conn.execute(_SET_STATUS, {**_key(job.tenant_id, job.vector_store_id, job.file_id, job.version),
                               "status": status, "error": Jsonb(error) if error else None})


def context(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int, *,
            batch: int | None = None) -> Context | None:
    """The version's :class:`Context` (job, attachment state, file name, chunking strategy, store embedding, and
    whether ``batch`` already landed), or None when the version does not exist."""
    row = conn.execute(_CONTEXT, {**_key(tenant_id, store_id, file_id, version), "batch": batch}).fetchone()
    if row is None:
        return None
    job = Job(*row[:16])
    status, attempts, updated_at, filename, strategy, model, dim, landed = row[16:]
    state, since = _state(job, status, attempts, updated_at)
    return Context(job=job, state=state, since=since, filename=filename, chunking_strategy=strategy,
                   store_model=model, store_dim=dim, batch_landed=bool(landed))


def attachment_state(conn: psycopg.Connection, job: Job) -> tuple[str, datetime | None]:
    """Where the version stands against its attachment, and since when: ``current`` (``in_progress`` under this
    version), ``failed`` (failed under this version: re-openable; the time is when it failed) or ``gone``
    (detached, cancelled, completed by or claimed for another version; no time)."""
    row = conn.execute(_ATTACHMENT, _key(job.tenant_id, job.vector_store_id, job.file_id, job.version)).fetchone()
    return _state(job, *(row or (None, None, None)))


def _state(job: Job, status: str | None, attempts: int | None, updated_at: datetime | None
           ) -> tuple[str, datetime | None]:
    if status is None or attempts != job.version:
        return "gone", None
    state = {"in_progress": "current", "failed": "failed"}.get(status, "gone")
    return state, (updated_at if state != "gone" else None)


def reopen(conn: psycopg.Connection, job: Job, *, lease_s: float) -> bool:
    """Re-open a version that was failed (after its last receive, or by settle) because a message of it arrived
    again (an ``engram redrive``): the attachment goes back to ``in_progress`` with a fresh lease of ``lease_s``
    seconds and the job to ``pending``/``embedding``. Returns False when the attachment moved on meanwhile."""
    with conn.transaction():
        locked = lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status in FINAL:
            return False
        params = _key(job.tenant_id, job.vector_store_id, job.file_id, job.version)
        state, _ = attachment_state(conn, locked)
        if state == "failed":
            conn.execute(_REOPEN_FILE, {**params, "lease": lease_s})
        elif state != "current":
            return False
        conn.execute(_REOPEN, params)
    return True


def heartbeat(conn: psycopg.Connection, job: Job, *, lease_s: float) -> None:
    """Extend the version's lease to ``lease_s`` seconds from now (progress was made), if it is still current."""
    conn.execute(_HEARTBEAT, {**_key(job.tenant_id, job.vector_store_id, job.file_id, job.version),
                              "lease": lease_s})


def land(conn: psycopg.Connection, job: Job, batch_no: int) -> tuple[Job | None, tuple[int, int] | None]:
    """Lock the version's row and, if it is still ``embedding`` and batch ``batch_no`` had not landed, record the
    batch and count it. Returns ``(locked job or None when gone, (batches_done, batch_count) after this one or None
    when nothing was counted: a duplicate, or the version moved on)``. One round trip; call first in the
    transaction that stores the batch (lock order: job first)."""
    params = {**_key(job.tenant_id, job.vector_store_id, job.file_id, job.version), "batch": batch_no}
    with pipeline(conn):
        locked = conn.cursor(row_factory=class_row(Job)).execute(_LOCK, params)
        counted = conn.execute(_LAND, params)
        job_row, count = locked.fetchone(), counted.fetchone()
    return job_row, (int(count[0]), int(count[1])) if count else None


def outstanding_batches(conn: psycopg.Connection, job: Job) -> list[int]:
    """Numbers of the version's batches that have not landed yet, ascending."""
    params = _key(job.tenant_id, job.vector_store_id, job.file_id, job.version)
    return [row[0] for row in conn.execute(_OUTSTANDING, params).fetchall()]


def clear_batches(conn: psycopg.Connection, job: Job) -> None:
    """Forget the landed-batch markers of a finished version (its status answers duplicates from now on)."""
    conn.execute(_CLEAR_BATCHES, _key(job.tenant_id, job.vector_store_id, job.file_id, job.version))


def claim_stuck(conn: psycopg.Connection, *, lease_s: float, max_attempts: int, stall_s: float,
                limit: int = 100, tenant_id: str | None = None) -> list[tuple[str, str, str, int]]:
    """Claim (all tenants; run as the owner) up to ``limit`` ``in_progress`` files whose lease expired, or that
    waited a whole lease unclaimed, while attempts remain — except those whose current version is open and made
    progress in the last ``stall_s`` seconds (its messages are still in SQS). Records the new versions as
    ``pending`` jobs and returns ``(tenant_id, vector_store_id, file_id, version)`` to re-send. Files out of
    attempts are left for :func:`chalicelib.store.attachments.settle` to fail."""
    with conn.transaction():
        rows = conn.execute(_CLAIM_STUCK, {"lease": lease_s, "max_attempts": max_attempts, "stall": stall_s,
                                           "limit": limit, "tenant": tenant_id}).fetchall()
        for tenant, store, file_id, version in rows:
            record(conn, tenant, store, file_id, version)
    return [tuple(row) for row in rows]


def open_versions(conn: psycopg.Connection, *, limit: int = 100_000) -> list[tuple[str, str, str, int]]:
    """Every tenant's open versions (run as the owner): ``(tenant, store, file, version)`` of each ``in_progress``
    attachment whose current version is ``pending`` or ``embedding``, oldest first, at most ``limit``."""
    return [tuple(row) for row in conn.execute(_OPEN_VERSIONS, {"limit": limit}).fetchall()]


def abandon(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int) -> None:
    """Give up on a version whose ingestion message could not be sent: its job is ``superseded`` and its lease
    ends now, so the next housekeeping pass claims and re-sends the file (while attempts remain)."""
    params = _key(tenant_id, store_id, file_id, version)
    with conn.transaction():
        conn.execute(_ABANDON_JOB, params)
        conn.execute(_EXPIRE_LEASE, params)


def purge(conn: psycopg.Connection, *, retention_s: float, grace_s: float, tenant_id: str | None = None) -> int:
    """Delete (one tenant's, or every tenant's) finished versions older than ``retention_s`` seconds and versions
    whose attachment is gone (older than ``grace_s`` seconds), with their staged chunks and batch markers; returns
    versions deleted."""
    return conn.execute(_PURGE, {"retention": retention_s, "grace": grace_s, "tenant": tenant_id}).rowcount
