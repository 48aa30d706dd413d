"""The permission every route needs, declared in one table keyed by route (``METHOD path``, the path as ``app.py``
mounts it), and the middleware that checks it (:func:`authorize`) after authentication and before the route runs.

A route reads (``read``) or changes (``write``) one resource of :mod:`chalicelib.access`. Reads that arrive as
``POST`` (searches, mem0's ``get_all``) are reads. ``/mcp`` only needs a valid key: each of its tools checks its
own permission, and a tool the key may not use is not listed (:mod:`chalicelib.mcp_server`). ``POST /v1/responses``
needs ``responses.write``, plus ``vector_stores.read`` for a ``file_search`` tool and ``memories.read`` / ``write``
for recalling / remembering (:mod:`chalicelib.responses.service` checks those). ``GET /v1/me`` and
``GET /v1/tenant/limits`` only need a valid key (the usage shown follows the key's reads). The operator's routes
(``/v1/jobs``, changing ``/v1/tenant/limits``) need ``operations``, which no key has unless created with it. The
probes (``/health``) and the console's page and files (``/console``) need no key at all.
``tests/compat/test_permissions.py`` walks ``app.routes`` and fails on any route missing here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chalicelib.access import Level, Resource

__all__ = ["ANY_KEY", "PUBLIC", "ROUTES", "authorize", "required"]

# Declared by a route any valid key may call (its parts check their own permissions).
ANY_KEY = "any key"
# Declared by a route that needs no key (the health probes).
PUBLIC = "public"

Need = tuple[Resource, Level] | str


def _table(resource: Resource, reads: str, writes: str) -> dict[str, Need]:
    """``{"METHOD path": (resource, level)}`` from two blocks of ``METHOD path`` lines."""
    out: dict[str, Need] = {}
    for level, block in (("read", reads), ("write", writes)):
        for line in block.strip().splitlines():
            method, path = line.split()
            out[f"{method} {path}"] = (resource, level)  # type: ignore[assignment]
    return out


ROUTES: dict[str, Need] = {
    "GET /health": PUBLIC,
    "GET /health/live": PUBLIC,
    "GET /console": PUBLIC,
    "GET /console/{asset}": PUBLIC,
    "POST /mcp": ANY_KEY,
    "GET /mcp": ANY_KEY,
    "DELETE /mcp": ANY_KEY,
    "GET /v1/me": ANY_KEY,
    "GET /v1/tenant/limits": ANY_KEY,
    **_table("files", reads="""
        GET /v1/files
        GET /v1/files/{file_id}
        GET /v1/files/{file_id}/content
    """, writes="""
        POST /v1/files
        DELETE /v1/files/{file_id}
        POST /v1/uploads
        POST /v1/uploads/{upload_id}/parts
        POST /v1/uploads/{upload_id}/complete
        POST /v1/uploads/{upload_id}/cancel
    """),
    **_table("vector_stores", reads="""
        GET /v1/vector_stores
        GET /v1/vector_stores/{vector_store_id}
        POST /v1/vector_stores/{vector_store_id}/search
        GET /v1/vector_stores/{vector_store_id}/files
        GET /v1/vector_stores/{vector_store_id}/files/{file_id}
        GET /v1/vector_stores/{vector_store_id}/files/{file_id}/content
        GET /v1/vector_stores/{vector_store_id}/files/{file_id}/chunks
        GET /v1/vector_stores/{vector_store_id}/file_batches/{batch_id}
        GET /v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/files
        GET /v1/drop_folder/syncs
        GET /v1/drop_folder/errors
    """, writes="""
        POST /v1/vector_stores
        POST /v1/vector_stores/{vector_store_id}
        DELETE /v1/vector_stores/{vector_store_id}
        POST /v1/vector_stores/{vector_store_id}/files
        POST /v1/vector_stores/{vector_store_id}/files/{file_id}
        DELETE /v1/vector_stores/{vector_store_id}/files/{file_id}
        POST /v1/vector_stores/{vector_store_id}/file_batches
        POST /v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel
        POST /v1/drop_folder/sync
    """),
    **_table("responses", reads="""
        GET /v1/responses
        GET /v1/responses/{response_id}
        GET /v1/responses/{response_id}/input_items
        GET /v1/conversations
        GET /v1/conversations/{conversation_id}
        GET /v1/conversations/{conversation_id}/items
        GET /v1/conversations/{conversation_id}/items/{item_id}
        GET /v1/agents
        GET /v1/agents/{agent_id}
    """, writes="""
        POST /v1/responses
        DELETE /v1/responses/{response_id}
        POST /v1/responses/{response_id}/cancel
        POST /v1/conversations
        POST /v1/conversations/{conversation_id}
        DELETE /v1/conversations/{conversation_id}
        POST /v1/conversations/{conversation_id}/items
        DELETE /v1/conversations/{conversation_id}/items/{item_id}
        POST /v1/agents
        POST /v1/agents/{agent_id}
        DELETE /v1/agents/{agent_id}
    """),
    **_table("memories", reads="""
        GET /v1/memories
        POST /v1/memories/search
        GET /v1/memories/audit
        GET /v1/memories/jobs/{job_id}
        GET /v1/memories/{memory_id}
        GET /v1/memories/{memory_id}/history
        GET /v1/memories/stats
        GET /v1/memories/entities
        GET /v1/memories/exchanges
        GET /v1/memories/exchanges/{exchange_id}
        GET /mem0/v1/ping
        POST /mem0/v3/memories
        POST /mem0/v3/memories/search
        GET /mem0/v1/memories/{memory_id}
        GET /mem0/v1/memories/{memory_id}/history
        GET /mem0/v1/event/{event_id}
        GET /mem0/v1/entities
        GET /mem0/v2/entities/user/{entity_id}/profile
        GET /mem0/v2/profiles/jobs/{job_id}
        GET /mem0/v2/profiles/settings
    """, writes="""
        POST /v1/memories
        DELETE /v1/memories
        POST /v1/memories/{memory_id}
        DELETE /v1/memories/{memory_id}
        POST /v1/memories/{memory_id}/restore
        DELETE /v1/memories/exchanges/{exchange_id}
        POST /mem0/v3/memories/add
        PUT /mem0/v1/memories/{memory_id}
        DELETE /mem0/v1/memories/{memory_id}
        DELETE /mem0/v1/memories
        DELETE /mem0/v2/entities/{entity_type}/{entity_id}
        PUT /mem0/v1/batch
        DELETE /mem0/v1/batch
        POST /mem0/v1/feedback
        POST /mem0/v2/profiles/jobs
    """),
    **_table("operations", reads="""
        GET /v1/jobs
        GET /v1/jobs/{job_name}/runs
    """, writes="""
        POST /v1/jobs/{job_name}/runs
        POST /v1/tenant/limits
    """),
}


def _mem0_refusals() -> dict[str, Need]:
    """mem0's deliberately refused paths (each answers its own 400): ``memories.read``, as the client's other
    calls, so a key that may use mem0 learns why the call is refused."""
    from chalicelib.api.routes import mem0

    return {f"{method} {mem0.URL_PREFIX}{path}": ("memories", "read") for path, method, _, _ in mem0.REFUSED}


ROUTES.update(_mem0_refusals())


def required(path: str, method: str) -> Need | None:
    """What the route ``method path`` (``app.routes``' path) needs: ``(resource, level)``, :data:`ANY_KEY`,
    :data:`PUBLIC`, or None for a route nobody declared (refused by :func:`authorize`)."""
    return ROUTES.get(f"{method.upper()} {path}")


def authorize(routes: Mapping[str, Mapping[str, Any]]) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """The Chalice ``http`` middleware refusing a call the key may not make (run after authentication).
    ``routes``: the app's route table, used only to tell a known route from an unknown path (which Chalice
    answers 404 itself).

    Raises (rendered by the error middleware):
        PermissionDeniedError: (403, ``insufficient_permissions``) naming the missing ``<resource>.<level>``; a
            route with no declared permission is refused to every restricted key (and answers for full keys).
    """
    from chalicelib.access import denied
    from chalicelib.api.context import current_access

    def middleware(event: Any, get_response: Callable[[Any], Any]) -> Any:
        path = event.context.get("resourcePath") or ""
        need = required(path, event.method)
        if isinstance(need, str) or path not in routes:  # PUBLIC, ANY_KEY, or a path Chalice answers 404
            return get_response(event)
        grants = current_access()
        if need is None:  # undeclared (the route-table test fails first): only a full key may use it
            if not grants.full:
                raise _undeclared(event.method, path)
            return get_response(event)
        resource, level = need
        if not grants.allows(resource, level):
            raise denied(resource, level)
        return get_response(event)

    return middleware


def _undeclared(method: str, path: str) -> Exception:
    from chalicelib.errors import PermissionDeniedError

    return PermissionDeniedError(f"{method} {path} declares no permission; only a full-access key may call it.",
                                 code="insufficient_permissions")
