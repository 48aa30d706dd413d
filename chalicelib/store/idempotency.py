"""Idempotency keys: a client that retries a write with the same ``Idempotency-Key`` header gets the first
request's answer instead of a second write (Stripe's and OpenAI's convention; migration 0010's table).

A key is reserved before the work starts (a row with status 0), so a concurrent retry is told the first is still
running instead of doing the work twice; the answer replaces the reservation when the work is done, and a failed
attempt releases it (the client may retry). The same key with another request body is refused. Keys are kept
:data:`RETENTION_S` seconds (24 hours, as Stripe keeps them) and swept by housekeeping.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chalicelib.errors import ConflictError, InvalidRequestError

__all__ = ["MAX_KEY_CHARS", "RETENTION_S", "Replay", "release", "reserve", "save", "sweep"]

MAX_KEY_CHARS = 255  # Stripe's limit
RETENTION_S = 24 * 3600
_PENDING = 0

_RESERVE = """
INSERT INTO idempotency_keys (tenant_id, key, route, request_sha256, status_code, response, user_id, agent_id, run_id)
VALUES (%(tenant)s, %(key)s, %(route)s, %(sha)s, 0, '{}', %(user_id)s, %(agent_id)s, %(run_id)s)
ON CONFLICT (tenant_id, key) DO NOTHING"""
_GET = """SELECT route, request_sha256, status_code, response, created_at > now() - make_interval(secs => %(keep)s)
FROM idempotency_keys WHERE tenant_id = %(tenant)s AND key = %(key)s"""
_REPLACE_EXPIRED = """UPDATE idempotency_keys SET route = %(route)s, request_sha256 = %(sha)s, status_code = 0,
    response = '{}', created_at = now(), user_id = %(user_id)s, agent_id = %(agent_id)s, run_id = %(run_id)s
WHERE tenant_id = %(tenant)s AND key = %(key)s AND created_at <= now() - make_interval(secs => %(keep)s)"""
_SAVE = """UPDATE idempotency_keys SET status_code = %(status)s, response = %(response)s
WHERE tenant_id = %(tenant)s AND key = %(key)s"""
_RELEASE = "DELETE FROM idempotency_keys WHERE tenant_id = %(tenant)s AND key = %(key)s AND status_code = 0"
_SWEEP = """DELETE FROM idempotency_keys WHERE ctid IN (
    SELECT ctid FROM idempotency_keys WHERE created_at <= now() - make_interval(secs => %(keep)s) LIMIT %(limit)s)"""


@dataclass(frozen=True, slots=True)
class Replay:
    """The stored answer of the first request with a key: HTTP ``status`` and JSON ``body``."""

    status: int
    body: dict[str, Any]


def request_hash(route: str, body: Any) -> str:
    """SHA-256 hex of the route and the canonical JSON of the body (key order ignored)."""
    return hashlib.sha256(json.dumps([route, body], sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def reserve(conn: psycopg.Connection, tenant_id: str, key: str, route: str, body: Any,
            scope: dict[str, str | None]) -> Replay | None:
    """Reserve ``key`` for this request, or return the answer its first use got. ``scope`` (user/agent/run ids)
    is kept so a purge of that scope removes the record.

    Raises:
        InvalidRequestError: (code ``invalid_idempotency_key``) an empty or over-long key; (code
            ``idempotency_key_reused``) the key was used for another route or body.
        ConflictError: (409, code ``idempotency_key_in_use``) the first request with this key is still running.
    """
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise InvalidRequestError(f"Invalid 'Idempotency-Key' header: 1 to {MAX_KEY_CHARS} printable characters.",
                                  param="Idempotency-Key", code="invalid_idempotency_key")
    params = {"tenant": tenant_id, "key": key, "route": route, "sha": request_hash(route, body),
              "keep": RETENTION_S, **scope}
    if conn.execute(_RESERVE, params).rowcount == 1:
        return None
    if conn.execute(_REPLACE_EXPIRED, params).rowcount == 1:
        return None
    row = conn.execute(_GET, params).fetchone()
    if row is None:  # released between the insert and the read: take it now
        return reserve(conn, tenant_id, key, route, body, scope)
    stored_route, sha, status, response, _ = row
    if stored_route != route or sha != params["sha"]:
        raise InvalidRequestError("This Idempotency-Key was already used with a different request; use a new key "
                                  "for a different request.", param="Idempotency-Key", code="idempotency_key_reused")
    if status == _PENDING:
        raise ConflictError("A request with this Idempotency-Key is still being processed; retry later.",
                            param="Idempotency-Key", code="idempotency_key_in_use")
    return Replay(int(status), response)


def save(conn: psycopg.Connection, tenant_id: str, key: str, status: int, body: dict[str, Any]) -> None:
    """Store the answer of the request that reserved ``key``."""
    conn.execute(_SAVE, {"tenant": tenant_id, "key": key, "status": status, "response": Jsonb(body)})


def release(conn: psycopg.Connection, tenant_id: str, key: str) -> None:
    """Give up a reservation (the request failed: a retry with the key does the work)."""
    conn.execute(_RELEASE, {"tenant": tenant_id, "key": key})


def sweep(conn: psycopg.Connection, limit: int) -> int:
    """Delete up to ``limit`` records older than :data:`RETENTION_S` (any tenant; housekeeping runs as the
    owner); returns how many."""
    return conn.execute(_SWEEP, {"keep": RETENTION_S, "limit": limit}).rowcount
