"""Drop-folder events that could not be applied — a key naming no tenant or no usable store, a bad sidecar, an
object the pipeline gave up on — kept as rows so nothing dropped into the bucket disappears silently. Shown by
``engram stats --json`` (``drop_errors``).

``tenant_id`` is the tenant the key names, which may not exist (then only the table owner sees the row; row-level
security shows each tenant its own).
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from chalicelib.store.db import one

# Rows `recent` returns at most.
RECENT_LIMIT = 50

_INSERT = """
INSERT INTO drop_errors (tenant_id, bucket, key, event, code, message)
VALUES (%(tenant)s, %(bucket)s, %(key)s, %(event)s, %(code)s, %(message)s)
ON CONFLICT (bucket, key, event, code) DO NOTHING"""
# The tenant's errors; with %(unowned)s (the operator's view) also those of keys that name no existing tenant
# (such a key names another tenant's prefix, store and file names: never shown in a tenant's view).
_RECENT = """
SELECT tenant_id, bucket, key, code, message, created_at FROM drop_errors e
WHERE e.tenant_id = %(tenant)s
   OR (%(unowned)s AND (e.tenant_id IS NULL OR NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = e.tenant_id)))
ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""
# Which of these (key, ETag) pairs a sync already failed to apply: a synced record's event id is
# "ObjectCreated:Sync|<etag>" (chalicelib/events/notifications.py S3Record.event_id).
SYNCED_EVENT = "ObjectCreated:Sync|"
_FAILED_AT = """
SELECT DISTINCT e.key FROM drop_errors e
JOIN unnest(%(keys)s::text[], %(etags)s::text[]) AS o(key, etag) ON e.key = o.key
WHERE e.bucket = %(bucket)s AND e.event = %(synced)s || o.etag"""
_COUNT = "SELECT count(*) FROM drop_errors WHERE bucket = %(bucket)s AND key = %(key)s"


def record(conn: psycopg.Connection, *, tenant_id: str | None, bucket: str, key: str, event: str, code: str,
           message: str) -> None:
    """Record that ``event`` (a string identifying one S3 event: name, sequencer or time, ETag) on ``key`` failed
    with ``code``/``message``; recording the same event and code again is a no-op."""
    conn.execute(_INSERT, {"tenant": tenant_id, "bucket": bucket, "key": key[:1024], "event": event[:512],
                           "code": code, "message": message[:2000]})


def recent(conn: psycopg.Connection, tenant_id: str, limit: int = RECENT_LIMIT, *,
           unowned: bool = False) -> list[dict[str, object]]:
    """The tenant's newest errors — with ``unowned`` (the operator's view, on the owner's connection) also those of
    keys naming no existing tenant: ``[{"tenant", "bucket", "key", "code", "message", "created_at" (Unix
    seconds)}]``, newest first."""
    rows = conn.execute(_RECENT, {"tenant": tenant_id, "limit": limit, "unowned": unowned}).fetchall()
    return [{"tenant": t, "bucket": b, "key": k, "code": c, "message": m, "created_at": _seconds(at)}
            for t, b, k, c, m, at in rows]


def failed_at(conn: psycopg.Connection, bucket: str, etags: dict[str, str]) -> set[str]:
    """The keys of ``etags`` (key → ETag) that a drop-folder sync already failed to apply at that very ETag (an
    error recorded for its synced record)."""
    if not etags:
        return set()
    keys = list(etags)
    rows = conn.execute(_FAILED_AT, {"bucket": bucket, "keys": keys, "etags": [etags[k] for k in keys],
                                     "synced": SYNCED_EVENT}).fetchall()
    return {row[0] for row in rows}


def count_for_key(conn: psycopg.Connection, bucket: str, key: str) -> int:
    """How many errors were recorded for one object key."""
    return int(one(conn.execute(_COUNT, {"bucket": bucket, "key": key}))[0])


def _seconds(value: datetime) -> int:
    return int(value.timestamp())
