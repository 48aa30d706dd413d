"""Processing leases for attached files: how a worker claims an ``in_progress`` file, and how a file whose
worker died is retried or failed, so that no file stays ``in_progress`` forever (OPENAI-COMPAT.md §7.1).

A claim sets ``lease_expires_at = now() + lease`` and increments ``attempts``; the worker's final write is guarded
by that attempt number (:func:`chalicelib.store.files.mark_completed`). A lease that expires means the worker is
gone: the file is claimable again until ``max_attempts`` claims have expired, then :func:`settle` fails it with
``last_error = {"code": "server_error", ...}``. Attempt numbers only grow (re-attaching a file moves
``attempt_base`` instead of resetting them), so a stale worker's guard can never match a newer claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

_CLAIM = """
UPDATE vector_store_files SET attempts = attempts + 1, lease_expires_at = now() + make_interval(secs => %(lease)s),
    updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND status = 'in_progress'
  AND (lease_expires_at IS NULL OR lease_expires_at < now()) AND attempts - attempt_base < %(max_attempts)s
RETURNING attempts"""
_CLAIM_NEXT = """
UPDATE vector_store_files SET attempts = attempts + 1, lease_expires_at = now() + make_interval(secs => %(lease)s),
    updated_at = now()
WHERE (vector_store_id, file_id) = (
    SELECT vector_store_id, file_id FROM vector_store_files
    WHERE status = 'in_progress' AND (lease_expires_at IS NULL OR lease_expires_at < now())
      AND attempts - attempt_base < %(max_attempts)s
    ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, vector_store_id, file_id, attempts, attributes, chunking_strategy"""
# Stuck: the last allowed lease expired, or nobody claimed the file for unclaimed_after seconds (no worker runs).
_STUCK = """status = 'in_progress' AND (
    (lease_expires_at < now() AND attempts - attempt_base >= %(max_attempts)s)
    OR (lease_expires_at IS NULL AND %(unclaimed_after)s::float8 IS NOT NULL
        AND updated_at < now() - make_interval(secs => %(unclaimed_after)s::float8)))"""
_EXHAUSTED = f"""
SELECT tenant_id, vector_store_id, file_id, lease_expires_at IS NULL FROM vector_store_files
WHERE {_STUCK}
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) AND (%(store)s::text IS NULL OR vector_store_id = %(store)s)
LIMIT 1000"""
_FAIL_EXHAUSTED = f"""
UPDATE vector_store_files SET status = 'failed', last_error = %(error)s, chunk_count = 0, usage_bytes = 0,
    lease_expires_at = NULL, updated_at = now()
WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s AND file_id = %(file)s AND {_STUCK}"""


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed file: who it belongs to, the attempt number that guards its final write, and how to chunk it."""

    tenant_id: str
    vector_store_id: str
    file_id: str
    attempts: int
    attributes: dict[str, Any]
    chunking_strategy: dict[str, Any]


def claim(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, *, lease_s: float,
          max_attempts: int) -> int | None:
    """Claim one attached file for ``lease_s`` seconds; returns the attempt number, or None when the file is not
    claimable (not ``in_progress``, leased by a live worker, or out of attempts)."""
    row = conn.execute(_CLAIM, {"tenant": tenant_id, "store": store_id, "file": file_id, "lease": lease_s,
                                "max_attempts": max_attempts}).fetchone()
    return row[0] if row else None


def claim_next(conn: psycopg.Connection, *, lease_s: float, max_attempts: int) -> Job | None:
    """Claim the longest-waiting claimable file of any tenant (background workers; run as the table owner), or
    None when there is nothing to do. Concurrent workers never claim the same file (``FOR UPDATE SKIP LOCKED``)."""
    with conn.cursor(row_factory=class_row(Job)) as cur:
        return cur.execute(_CLAIM_NEXT, {"lease": lease_s, "max_attempts": max_attempts}).fetchone()


def settle(conn: psycopg.Connection, *, max_attempts: int, tenant_id: str | None = None,
           store_id: str | None = None, unclaimed_after_s: float | None = None) -> int:
    """Fail every stuck file — its last allowed lease expired (its workers died), or, with ``unclaimed_after_s``,
    no worker claimed it for that many seconds — removing any chunks it had, with ``last_error.code =
    "server_error"``. Scoped to a tenant and/or store when given (settle-on-read); returns how many were failed."""
    from chalicelib.store import chunks

    query = {"max_attempts": max_attempts, "tenant": tenant_id, "store": store_id,
             "unclaimed_after": unclaimed_after_s}
    rows = conn.execute(_EXHAUSTED, query).fetchall()
    failed = 0
    for tenant, store, file_id, unclaimed in rows:
        message = (f"No worker picked the file up within {unclaimed_after_s:.0f} seconds." if unclaimed else
                   f"Processing did not finish after {max_attempts} attempts (the worker stopped).")
        params = {**query, "tenant": tenant, "store": store, "file": file_id,
                  "error": Jsonb({"code": "server_error", "message": message})}
        with conn.transaction():
            chunks.lock_store(conn, tenant, store)
            if conn.execute(_FAIL_EXHAUSTED, params).rowcount:
                chunks.delete_file_chunks(conn, tenant, store, file_id)
                chunks.refresh_store_usage(conn, tenant, store)
                failed += 1
    return failed
