"""What the S3 drop folder last saw of each object, so duplicated and out-of-order S3 events are recognised.

One row per ``(bucket, key)``: the newest applied event's sequencer, time and ETag, whether the object is
deleted, the file (and version) it became, and — for a sidecar ``<file>.metadata.json`` — the attributes it sets.
Events are applied under the row's lock (:func:`lock`), so two events of one key never interleave. A drop-folder
sync reads the rows of a key range (:func:`in_range`) in S3's listing order (UTF-8 bytes: ``COLLATE "C"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.store.db import one


@dataclass(frozen=True, slots=True)
class DropObject:
    """A row of ``drop_objects``; ``sequencer``/``event_time`` are None until an event was applied."""

    tenant_id: str
    bucket: str
    key: str
    vector_store_id: str | None
    file_id: str | None
    version: int | None
    etag: str | None
    sequencer: str | None
    event_time: datetime | None
    deleted: bool
    attributes: dict[str, Any] | None

    @property
    def is_live(self) -> bool:
        """Whether an event was applied and the object was not deleted since (the store holds what it says)."""
        return (self.sequencer is not None or self.event_time is not None) and not self.deleted


_COLUMNS = """tenant_id, bucket, key, vector_store_id, file_id, version, etag, sequencer, event_time, deleted,
    attributes"""
_PLACEHOLDER = """INSERT INTO drop_objects (tenant_id, bucket, key) VALUES (%(tenant)s, %(bucket)s, %(key)s)
ON CONFLICT DO NOTHING"""
_LOCK = f"""SELECT {_COLUMNS} FROM drop_objects
WHERE tenant_id = %(tenant)s AND bucket = %(bucket)s AND key = %(key)s FOR UPDATE"""
_GET = f"""SELECT {_COLUMNS} FROM drop_objects
WHERE tenant_id = %(tenant)s AND bucket = %(bucket)s AND key = %(key)s"""
# A key range of one prefix in S3's listing order (UTF-8 byte order, which is what COLLATE "C" compares on a UTF8
# database): keys after %(after)s, up to and including %(upto)s (NULL: no end).
_IN_RANGE = f"""SELECT {_COLUMNS} FROM drop_objects
WHERE tenant_id = %(tenant)s AND bucket = %(bucket)s AND starts_with(key, %(prefix)s)
  AND key COLLATE "C" > %(after)s AND (%(upto)s::text IS NULL OR key COLLATE "C" <= %(upto)s)
ORDER BY key COLLATE "C" LIMIT %(limit)s"""
_UPDATE = """
UPDATE drop_objects SET vector_store_id = %(store)s, file_id = %(file)s, version = %(version)s, etag = %(etag)s,
    sequencer = %(sequencer)s, event_time = %(event_time)s, deleted = %(deleted)s, attributes = %(attributes)s,
    updated_at = now()
WHERE tenant_id = %(tenant)s AND bucket = %(bucket)s AND key = %(key)s"""


def lock(conn: psycopg.Connection, tenant_id: str, bucket: str, key: str) -> DropObject:
    """The object's row (an empty one is created first if missing), locked to the end of the caller's
    transaction."""
    params = {"tenant": tenant_id, "bucket": bucket, "key": key}
    conn.execute(_PLACEHOLDER, params)
    with conn.cursor(row_factory=class_row(DropObject)) as cur:
        return one(cur.execute(_LOCK, params))


def get(conn: psycopg.Connection, tenant_id: str, bucket: str, key: str) -> DropObject | None:
    """The object's row without locking it, or None."""
    with conn.cursor(row_factory=class_row(DropObject)) as cur:
        return cur.execute(_GET, {"tenant": tenant_id, "bucket": bucket, "key": key}).fetchone()


def in_range(conn: psycopg.Connection, tenant_id: str, bucket: str, prefix: str, *, after: str, upto: str | None,
             limit: int) -> list[DropObject]:
    """The rows of keys starting with ``prefix`` that sort after ``after`` and up to ``upto`` (None: no end) in
    S3's listing order (UTF-8 bytes), at most ``limit`` of them, in that order; unlocked."""
    params = {"tenant": tenant_id, "bucket": bucket, "prefix": prefix, "after": after, "upto": upto, "limit": limit}
    with conn.cursor(row_factory=class_row(DropObject)) as cur:
        return cur.execute(_IN_RANGE, params).fetchall()


def save(conn: psycopg.Connection, row: DropObject) -> None:
    """Write every field of ``row`` back (the row must exist: take it with :func:`lock`)."""
    conn.execute(_UPDATE, {"tenant": row.tenant_id, "bucket": row.bucket, "key": row.key,
                           "store": row.vector_store_id, "file": row.file_id, "version": row.version,
                           "etag": row.etag, "sequencer": row.sequencer, "event_time": row.event_time,
                           "deleted": row.deleted,
                           "attributes": Jsonb(row.attributes) if row.attributes is not None else None})


_TENANT_EXISTS = "SELECT 1 FROM tenants WHERE id = %(tenant)s"


def tenant_exists(conn: psycopg.Connection, tenant_id: str) -> bool:
    """Whether ``tenant_id`` is a tenant (a drop-folder key must name one; drops never create tenants). Run as the
    owner, or on a connection acting for ``tenant_id`` itself (row-level security shows a tenant its own row)."""
    return conn.execute(_TENANT_EXISTS, {"tenant": tenant_id}).fetchone() is not None
