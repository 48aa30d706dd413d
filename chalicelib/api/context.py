"""Who is calling, and the database connection a request works through.

:func:`authenticate` (Chalice HTTP middleware) resolves ``Authorization: Bearer <key>`` (or ``Token <key>``, the
scheme mem0's clients send) to a tenant and what the key may do (:mod:`chalicelib.access`) once per request;
routes then use :func:`tenant_db`, a pooled connection acting as the row-level-security role for that tenant,
:func:`current_tenant` for their own ``WHERE tenant_id = ...`` and :func:`current_access` for the key's grants
(checked per route by :mod:`chalicelib.api.permissions`, and by the memory service for a key bound to a memory
scope). Two walls: a route that forgot its tenant filter still cannot read another tenant's rows.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator

import psycopg

from chalicelib import deps
from chalicelib.access import FULL, Access
from chalicelib.errors import AuthenticationError

# Paths served without a key: the readiness and liveness probes (chalicelib.api.health) and the console's page and
# files (chalicelib.api.routes.console: it asks for a key and sends it with every API call it makes).
PUBLIC_PATHS = frozenset({"/health", "/health/live", "/console", "/console/{asset}"})
# Authorization schemes carrying an API key (lower case): OpenAI's ``Bearer``, and ``Token``, which mem0's clients
# send (``chalicelib.api.routes.mem0``). Both name the same keys.
KEY_SCHEMES = frozenset({"bearer", "token"})
# How long a resolved key is trusted without asking the database again, seconds. Bounds how long a revoked key
# keeps working in a warm process.
KEY_CACHE_TTL_S = 10.0
_KEY_CACHE_MAX = 1024

_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar("engram_tenant", default=None)
_access: contextvars.ContextVar[Access] = contextvars.ContextVar("engram_access", default=FULL)
_key_cache: dict[bytes, tuple[str, Access, float]] = {}
_key_cache_lock = threading.Lock()

_MISSING_KEY = ("You didn't provide an API key. You need to provide your API key in an Authorization header "
                "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")


def _hint(secret: str) -> str:
    return f"{secret[:6]}***{secret[-4:]}" if len(secret) > 12 else "***"


def resolve_tenant(authorization: str | None) -> str:
    """The tenant an ``Authorization`` header value (``Bearer <key>`` or ``Token <key>``, see :data:`KEY_SCHEMES`)
    authenticates (see :func:`resolve_access`).

    Raises:
        AuthenticationError: (401) the header is missing or malformed, or the key is unknown or revoked.
    """
    return resolve_access(authorization)[0]


def resolve_access(authorization: str | None) -> tuple[str, Access]:
    """``(tenant, grants)`` of an ``Authorization`` header value (``Bearer <key>`` or ``Token <key>``, see
    :data:`KEY_SCHEMES`).

    In ``auth_mode = "dev"`` any key maps to ``settings.tenant`` with full access; otherwise the key must be one
    created with ``engram keys create`` and not revoked, and carries the grants it was created with.

    Raises:
        AuthenticationError: (401) the header is missing or malformed, or the key is unknown or revoked.
    """
    config = deps.current_settings()
    scheme, _, secret = (authorization or "").strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() not in KEY_SCHEMES or not secret:
        raise AuthenticationError(_MISSING_KEY, code="missing_api_key" if not authorization else "invalid_api_key")
    if config.auth_mode == "dev":
        return config.tenant, FULL
    from chalicelib.store import api_keys

    digest = api_keys.hash_key(secret)
    now = time.monotonic()
    with _key_cache_lock:
        cached = _key_cache.get(digest)
    if cached and now - cached[2] < KEY_CACHE_TTL_S:
        return cached[0], cached[1]
    from chalicelib.store.db import pool

    with pool(config).connection() as conn:
        found = api_keys.grants_for_key(conn, secret)
    if found is None:
        raise AuthenticationError(f"Incorrect API key provided: {_hint(secret)}.", code="invalid_api_key")
    tenant, grants = found
    with _key_cache_lock:
        if len(_key_cache) >= _KEY_CACHE_MAX:
            _key_cache.clear()
        _key_cache[digest] = (tenant, grants, now)
    return tenant, grants


def forget_keys() -> None:
    """Drop cached key resolutions (tests; after revoking keys in-process)."""
    with _key_cache_lock:
        _key_cache.clear()


def authenticate(event, get_response):
    """Chalice HTTP middleware: authenticate the caller and make the tenant current for the route (and the
    request's log lines). Public paths pass through.

    Raises:
        AuthenticationError: see :func:`resolve_tenant` (rendered as 401 by the error middleware).
    """
    if event.context.get("resourcePath") in PUBLIC_PATHS:
        return get_response(event)
    tenant, grants = resolve_access(event.headers.get("authorization"))
    from chalicelib import observability

    observability.set_tenant(tenant)
    with acting_as(tenant, grants):
        return get_response(event)


@contextlib.contextmanager
def acting_as(tenant: str, grants: Access = FULL) -> Iterator[None]:
    """Make ``tenant`` and its key's ``grants`` the current caller for the block (the middleware above; the
    streaming front; ``engram mcp``)."""
    tenant_token, access_token = _tenant.set(tenant), _access.set(grants)
    try:
        yield
    finally:
        _tenant.reset(tenant_token)
        _access.reset(access_token)


def current_access() -> Access:
    """What the current request's key may do (:data:`chalicelib.access.FULL` outside a request and in dev
    auth)."""
    return _access.get()


def current_tenant() -> str:
    """The authenticated tenant of the request being served.

    Raises:
        AuthenticationError: called outside an authenticated request.
    """
    tenant = _tenant.get()
    if tenant is None:
        raise AuthenticationError(_MISSING_KEY, code="missing_api_key")
    return tenant


@contextlib.contextmanager
def tenant_db() -> Iterator[psycopg.Connection]:
    """A pooled autocommit connection limited (row-level security) to the current tenant's rows."""
    from chalicelib.store.db import tenant_connection

    with tenant_connection(deps.current_settings(), current_tenant()) as conn:
        yield conn
