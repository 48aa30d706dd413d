"""API keys: created, listed and revoked by the operator (``engram keys ...``), stored only as SHA-256 hashes.

A key is ``sk-engram-`` + 43 characters of ``secrets.token_urlsafe(32)`` (256 random bits). The secret is returned
once, by :func:`create_key`; the database keeps its SHA-256 digest (``key_hash``, unique) and a display hint
(``sk-engram-...abcd``). Requests are authenticated by :func:`grants_for_key`, which calls the ``SECURITY DEFINER``
function ``engram_key_grants`` so that a role without ``SELECT`` on ``api_keys`` can still resolve a key to its
tenant and what it may do (:mod:`chalicelib.access`: a permission per resource, an optional memory scope; migration
``0028_key_permissions.sql``).

Why a single unsalted SHA-256 and not bcrypt/scrypt/Argon2: slow, salted KDFs exist because human passwords have
little entropy (tens of bits), so an attacker holding the hashes can enumerate likely inputs. These keys are 256
bits from a CSPRNG, so there is nothing to enumerate; inverting SHA-256 over a 2^256 space is infeasible however
fast one hash is, and a salt adds nothing because no two keys share a secret and precomputed tables cannot cover
the space. The same reasoning is why GitHub and Stripe-style token schemes store a fast digest of high-entropy
tokens and look them up by it (see e.g. security.stackexchange.com/q/232753, "Is single iteration SHA-256 safe
enough for hashing 128bit random number API keys?"). A fast, deterministic hash also lets the lookup be one
indexed equality on ``key_hash`` instead of a per-request KDF run.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import access, ids
from chalicelib.errors import InvalidRequestError
from chalicelib.store.db import one

KEY_PREFIX = "sk-engram-"
_TOKEN_BYTES = 32  # 256 random bits -> 43 url-safe base64 characters
_HINT_CHARS = 4
_TENANT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_COLUMNS = "id, tenant_id, name, key_hint, created_at, last_used_at, revoked_at, permissions, memory_scope"
_INSERT = f"""
INSERT INTO api_keys (id, tenant_id, name, key_hash, key_hint, permissions, memory_scope)
VALUES (%(id)s, %(tenant)s, %(name)s, %(hash)s, %(hint)s, %(permissions)s, %(scope)s)
RETURNING {_COLUMNS}"""
_LIST_ALL = f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id"
_LIST_TENANT = f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = %(tenant)s ORDER BY created_at, id"
_REVOKE = "UPDATE api_keys SET revoked_at = now() WHERE id = %(id)s AND revoked_at IS NULL"
_TENANT_FOR_KEY = "SELECT engram_tenant_for_key(%s)"
_GRANTS_FOR_KEY = "SELECT tenant_id, permissions, memory_scope FROM engram_key_grants(%s)"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A row of ``api_keys`` without its hash: ``key_hint`` is for display only (``sk-engram-...abcd``); times are
    timezone-aware datetimes, ``last_used_at`` / ``revoked_at`` None until the key is used / revoked;
    ``permissions`` / ``memory_scope`` as stored (None: full access / unbound; :attr:`access` reads them)."""

    id: str
    tenant_id: str
    name: str | None
    key_hint: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    permissions: dict[str, Any] | None = None
    memory_scope: dict[str, Any] | None = None

    @property
    def access(self) -> access.Access:
        """What the key may do (:mod:`chalicelib.access`)."""
        return access.parse(self.permissions, self.memory_scope)


def hash_key(secret: str) -> bytes:
    """The 32-byte SHA-256 digest of ``secret`` (UTF-8), as stored in ``api_keys.key_hash`` (see the module
    docstring for why a fast hash is adequate for 256-bit random keys)."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def validate_tenant(tenant_id: object) -> str:
    """Return ``tenant_id`` if it is 1-64 characters of ``[A-Za-z0-9_.-]``.

    Raises:
        InvalidRequestError: (``param="tenant"``) otherwise.
    """
    if not isinstance(tenant_id, str) or not _TENANT_NAME.match(tenant_id):
        raise InvalidRequestError(
            f"Invalid tenant name {tenant_id!r}: use 1-64 characters of letters, digits, '_', '.' and '-'.",
            param="tenant")
    return tenant_id


def _hint(secret: str) -> str:
    return f"{KEY_PREFIX}...{secret[-_HINT_CHARS:]}"


def create_key(conn: psycopg.Connection, tenant_id: str, name: str | None = None, *,
               grants: access.Access | None = None) -> tuple[ApiKey, str]:
    """Create a key for ``tenant_id`` (the tenant row is created if missing) labelled ``name``, allowed ``grants``
    (None or :data:`chalicelib.access.FULL`: every data resource, no ``operations``, no memory scope — stored as
    NULLs).

    Returns:
        ``(ApiKey, secret)``: the stored row and the secret ``sk-engram-...`` key. The secret is not stored and
        cannot be recovered later; only its SHA-256 hash and hint are kept.

    Raises:
        InvalidRequestError: (``param="tenant"``) the tenant name is not 1-64 characters of ``[A-Za-z0-9_.-]``;
            ``grants`` that :func:`chalicelib.access.parse` refuses.
    """
    from chalicelib.store.vector_stores import ensure_tenant

    validate_tenant(tenant_id)
    grants = grants or access.FULL
    checked = access.parse(grants.permissions, grants.memory_scope)  # what is stored reads back the same
    as_full = all(checked.level(r) == access.FULL.level(r) for r in access.RESOURCES)  # NULL reads back as FULL
    permissions = None if as_full else {r: checked.level(r) for r in access.RESOURCES}
    secret = KEY_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
    ensure_tenant(conn, tenant_id)
    with conn.cursor(row_factory=class_row(ApiKey)) as cur:
        row = one(cur.execute(_INSERT, {"id": ids.new_id(ids.API_KEY), "tenant": tenant_id, "name": name,
                                        "hash": hash_key(secret), "hint": _hint(secret),
                                        "permissions": None if permissions is None else Jsonb(permissions),
                                        "scope": Jsonb(dict(checked.memory_scope)) if checked.memory_scope else None}))
    return row, secret


def list_keys(conn: psycopg.Connection, tenant_id: str | None = None) -> list[ApiKey]:
    """The keys of ``tenant_id`` (of every tenant when None), revoked ones included, oldest first."""
    with conn.cursor(row_factory=class_row(ApiKey)) as cur:
        if tenant_id is None:
            return cur.execute(_LIST_ALL).fetchall()
        return cur.execute(_LIST_TENANT, {"tenant": tenant_id}).fetchall()


def revoke_key(conn: psycopg.Connection, key_id: str) -> bool:
    """Revoke key ``key_id`` (sets ``revoked_at``; the row is kept for the listing). True if it was revoked now,
    False if no such key exists or it was already revoked."""
    return conn.execute(_REVOKE, {"id": key_id}).rowcount == 1


def tenant_for_key(conn: psycopg.Connection, secret: str) -> str | None:
    """The tenant id of the un-revoked key ``secret`` (recording its use in ``last_used_at``), or None for an
    unknown or revoked key. Goes through ``engram_tenant_for_key`` (``SECURITY DEFINER``), so ``conn``'s role
    needs no privileges on ``api_keys``."""
    if not secret.startswith(KEY_PREFIX):
        return None
    row = conn.execute(_TENANT_FOR_KEY, (hash_key(secret),)).fetchone()
    return row[0] if row else None


def grants_for_key(conn: psycopg.Connection, secret: str) -> tuple[str, access.Access] | None:
    """``(tenant id, what the key may do)`` for the un-revoked key ``secret`` (recording its use in
    ``last_used_at``), or None for an unknown or revoked key. Goes through ``engram_key_grants`` (``SECURITY
    DEFINER``), so ``conn``'s role needs no privileges on ``api_keys``.

    Raises:
        InvalidRequestError: the stored grants are malformed (only a hand-edited row can be).
    """
    if not secret.startswith(KEY_PREFIX):
        return None
    row = conn.execute(_GRANTS_FOR_KEY, (hash_key(secret),)).fetchone()
    return (row[0], access.parse(row[1], row[2])) if row else None
