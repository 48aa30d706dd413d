"""Which S3 keys the database still refers to (files' bytes, upload parts), for the orphaned-object sweep.
Runs as the owner, across tenants."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

_KNOWN = """
SELECT content_key FROM files WHERE content_bucket = %(bucket)s AND content_key = ANY(%(keys)s)
UNION ALL
SELECT blob_key FROM upload_parts WHERE blob_key = ANY(%(keys)s)"""
_TENANTS = "SELECT id FROM tenants ORDER BY id"


def known_keys(conn: psycopg.Connection, bucket: str, keys: Sequence[str]) -> set[str]:
    """The subset of ``keys`` (objects of ``bucket``) that a ``files`` row or an upload part still names."""
    if not keys:
        return set()
    return {row[0] for row in conn.execute(_KNOWN, {"bucket": bucket, "keys": list(keys)}).fetchall()}


def tenants(conn: psycopg.Connection) -> list[str]:
    """Every tenant id (upload parts live under ``<tenant>/uploads/``)."""
    return [row[0] for row in conn.execute(_TENANTS).fetchall()]
