"""Helpers every blueprint uses: JSON responses with the polling header, path id checks, settle-on-read."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.store import attachments, vector_stores
from chalicelib.store.vector_stores import VectorStore

# The header OpenAI's SDK polling helpers read for their interval (OPENAI-COMPAT.md §5).
POLL_HEADER = "openai-poll-after-ms"


def respond(body: dict[str, Any], *, status: int = 200, in_progress: bool = False) -> Response:
    """A JSON response; ``in_progress`` adds ``openai-poll-after-ms`` so polling clients wait that long."""
    headers: dict[str, str | list[str]] = {"Content-Type": "application/json"}
    if in_progress:
        headers[POLL_HEADER] = str(deps.current_settings().poll_after_ms)
    return Response(body=json.dumps(body), status_code=status, headers=headers)


def store_id(value: str) -> str:
    """A ``vs_`` path parameter, checked.

    Raises:
        InvalidRequestError: wrong prefix or malformed (400, param ``vector_store_id``).
    """
    return ids.validate_id(value, ids.VECTOR_STORE, param="vector_store_id")


def file_id(value: str) -> str:
    """A ``file-`` path parameter, checked.

    Raises:
        InvalidRequestError: wrong prefix or malformed (400, param ``file_id``).
    """
    return ids.validate_id(value, ids.FILE, param="file_id")


def settled_store(conn: psycopg.Connection, tenant_id: str, vs_id: str, *, shared: bool = False) -> VectorStore:
    """The store, after failing any of its files whose processing died (settle-on-read: a stuck file turns
    ``failed`` the next time anyone looks, even when no background worker runs). ``shared=True`` also returns a
    store another tenant shared, unsettled (only its owner's reads settle it).

    Raises:
        NotFoundError: no such store for this tenant.
        PermissionDeniedError: without ``shared``, a store another tenant shared (read-only).
    """
    store = vector_stores.get(conn, tenant_id, vs_id, shared=shared)
    if store.tenant_id != tenant_id:
        return store
    config = deps.current_settings()
    attachments.settle(conn, max_attempts=config.processing_max_attempts, tenant_id=tenant_id, store_id=vs_id,
                      unclaimed_after_s=config.unclaimed_after_s)
    return store


def sync_vector_index(conn: psycopg.Connection, *, tenant_id: str | None = None, store_id: str | None = None,
                      file_id: str | None = None) -> None:
    """After a write that changed chunks (attributes, a detach, a deleted file or store): the vector backends'
    after-write hook (:func:`chalicelib.search.backends.sync.after_write`), so searches see the change at once."""
    from chalicelib.search.backends import sync

    sync.after_write(conn, deps.current_settings(), tenant_id=tenant_id, store_id=store_id, file_id=file_id)
