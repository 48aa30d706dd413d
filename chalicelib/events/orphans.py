"""Removing S3 objects nothing refers to any more: uploaded files' bytes (``files/<tenant>/<file_id>``) whose file
was deleted without its object (a failed delete, a crash between the upload and the row), and upload parts
(``<tenant>/uploads/upload_…/part_…``) no upload knows. Drop-folder objects are the users' and never touched.
Objects younger than :data:`ORPHAN_GRACE_S` are left alone: their row may be about to be written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from chalicelib import aws
from chalicelib.config import Settings
from chalicelib.events import s3_keys
from chalicelib.store import blob_refs
from chalicelib.store.files import CONTENT_PREFIX

# An object is written before the row that names it (chalicelib/store/files.py create_file); one hour is far
# longer than any request or upload-part write takes.
ORPHAN_GRACE_S = 3600.0
# DeleteObjects takes at most 1,000 keys per call (Amazon S3 API Reference, DeleteObjects).
_DELETE_BATCH = 1000


def sweep(conn: psycopg.Connection, settings: Settings, *, grace_s: float = ORPHAN_GRACE_S,
          tenant_id: str | None = None) -> int:
    """Delete orphaned objects of ``settings.bucket`` older than ``grace_s`` seconds (one tenant's, or every
    tenant's as the owner); returns how many.

    Raises:
        botocore.exceptions.ClientError / BotoCoreError: S3 failed (housekeeping logs it and carries on).
    """
    bucket = settings.bucket
    if not bucket:
        return 0
    tenants = [tenant_id] if tenant_id else blob_refs.tenants(conn)
    prefixes = ([f"{CONTENT_PREFIX}{tenant_id}/"] if tenant_id else [CONTENT_PREFIX]) + [
        f"{tenant}/uploads/" for tenant in tenants]
    cutoff = datetime.now(UTC) - timedelta(seconds=grace_s)
    return sum(_sweep_prefix(conn, settings, bucket, prefix, cutoff) for prefix in prefixes)


def _sweep_prefix(conn: psycopg.Connection, settings: Settings, bucket: str, prefix: str, cutoff: datetime) -> int:
    client = aws.client("s3", settings.aws_region)
    deleted = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        old = [item["Key"] for item in page.get("Contents", [])
               if item["LastModified"] < cutoff and s3_keys.is_internal(item["Key"])]
        orphans = sorted(set(old) - blob_refs.known_keys(conn, bucket, old))
        for start in range(0, len(orphans), _DELETE_BATCH):
            keys = [{"Key": k} for k in orphans[start:start + _DELETE_BATCH]]
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            deleted += len(keys)
    return deleted
