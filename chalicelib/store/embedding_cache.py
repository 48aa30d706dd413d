"""Content-hash embedding cache: a chunk text embedded once with a model is never embedded again for the tenant.

Keyed by (tenant, model, SHA-256 of the UTF-8 text); scoped per tenant so no tenant can probe what another has
embedded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg

_LOOKUP = """
SELECT sha256, embedding FROM embedding_cache
WHERE tenant_id = %(tenant)s AND model = %(model)s AND sha256 = ANY(%(hashes)s)"""
_ADD = """
INSERT INTO embedding_cache (tenant_id, model, sha256, embedding)
SELECT %(tenant)s, %(model)s, u.h, u.e FROM unnest(%(hashes)b::bytea[], %(vectors)b::vector[]) AS u(h, e)
ON CONFLICT DO NOTHING"""


def text_hash(text: str) -> bytes:
    """SHA-256 digest (32 bytes) of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def lookup(conn: psycopg.Connection, tenant_id: str, model: str, hashes: Sequence[bytes]) -> dict[bytes, Any]:
    """Cached vectors for the given text hashes: ``{sha256: vector}`` for the hits only."""
    if not hashes:
        return {}
    rows = conn.execute(_LOOKUP, {"tenant": tenant_id, "model": model, "hashes": list(set(hashes))}).fetchall()
    return {bytes(h): vec for h, vec in rows}


def store(conn: psycopg.Connection, tenant_id: str, model: str, items: Sequence[tuple[bytes, Any]]) -> None:
    """Add ``(sha256, vector)`` pairs to the cache (existing keys are kept), creating the tenant row if needed."""
    if not items:
        return
    from chalicelib.store.db import pipeline
    from chalicelib.store.vector_stores import ensure_tenant

    with pipeline(conn):
        ensure_tenant(conn, tenant_id)
        add(conn, tenant_id, model, items)


def add(conn: psycopg.Connection, tenant_id: str, model: str, items: Sequence[tuple[bytes, Any]]) -> None:
    """Add ``(sha256, vector)`` pairs to the cache of an existing tenant, in one statement (existing keys are
    kept; a batch holding the same text twice is fine)."""
    if items:
        from chalicelib.store.chunks import dumpable

        conn.execute(_ADD, {"tenant": tenant_id, "model": model, "hashes": [h for h, _ in items],
                            "vectors": [dumpable(v) for _, v in items]})
