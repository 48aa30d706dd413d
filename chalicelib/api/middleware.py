"""The one error renderer.

:class:`~chalicelib.errors.EngramError` (which Chalice lets through to middleware because it subclasses
``ChaliceUnhandledError``) becomes ``{"error": {"message", "type", "param", "code"}}`` with its status. Errors
Chalice renders itself — any other exception (its generic 500) and its own 4xx (e.g. a malformed JSON body) —
arrive here as ``{"Code", "Message"}`` responses and are rewritten into the same envelope, so clients only ever
see OpenAI's shape. Internals (exception text, tracebacks) never reach the body.

A database that cannot be reached or used (``psycopg.OperationalError``, psycopg_pool's ``PoolTimeout`` among them)
is a 503 ``database_unavailable`` with ``Retry-After`` (:func:`database_unavailable`), wherever it is raised: in a
middleware (the API-key lookup) it reaches :func:`render_errors` as it is; in a route, Chalice would render any
non-Chalice exception as its own 500 before middleware sees it, so every route is wrapped by
:func:`database_errors` (:func:`guard_routes`, called by ``app.py``), which re-raises it as the
:class:`~chalicelib.errors.DatabaseUnavailableError` Chalice lets through.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import psycopg
from chalice.app import Response

from chalicelib.errors import DatabaseUnavailableError, EngramError, NotFoundError

logger = logging.getLogger("engram.api")

_JSON = {"Content-Type": "application/json"}
_GENERIC_500 = "The server had an error while processing your request."
_DATABASE_UNAVAILABLE = "The database is unavailable right now. Retry after a few seconds."

F = TypeVar("F", bound=Callable[..., Any])


# The SDK retries 408, 409, 429 and 5xx unless told otherwise (openai-python _base_client._should_retry); a
# deterministic client error (e.g. our 409 for an ambiguous name) must not be retried.
_NO_RETRY = {"x-should-retry": "false"}


def error_response(exc: EngramError) -> Response:
    """The HTTP response for a domain error (4xx other than 408/429 carry ``x-should-retry: false``; an error with
    ``retry_after_s`` carries ``Retry-After`` in whole seconds)."""
    # A fresh dict per response: middleware adds headers to it (x-request-id), which must not leak into _JSON.
    headers: dict[str, str | list[str]] = {**_JSON}
    if 400 <= exc.status < 500 and exc.status not in (408, 429):
        headers.update(_NO_RETRY)
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(exc.retry_after_s)
    return Response(body=json.dumps(exc.to_dict()), status_code=exc.status, headers=headers)


def database_unavailable(exc: psycopg.OperationalError) -> DatabaseUnavailableError:
    """The 503 for a database failure (``exc``: refused, timed out, no free connection, the session ended by a
    restart ...). The cause is logged, never put in the body."""
    logger.warning("database unavailable: %s: %s", type(exc).__name__, str(exc).strip()[:500])
    return DatabaseUnavailableError(_DATABASE_UNAVAILABLE)


def database_errors(view: F) -> F:
    """Wrap a Chalice view so that a ``psycopg.OperationalError`` it raises becomes :func:`database_unavailable`'s
    503 (an :class:`EngramError`, which Chalice hands to middleware) instead of Chalice's own 500. The view's
    attributes (its declared query parameters) are kept."""

    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except psycopg.OperationalError as exc:
            raise database_unavailable(exc) from exc

    return guarded  # type: ignore[return-value]


def guard_routes(routes: Mapping[str, Mapping[str, Any]]) -> None:
    """Wrap every view of the app's route table (``app.routes``: path → method → route entry) with
    :func:`database_errors`, once; call it after the last route is registered."""
    for methods in routes.values():
        for entry in methods.values():
            if not getattr(entry.view_function, "_database_guarded", False):
                entry.view_function = database_errors(entry.view_function)
                entry.view_function._database_guarded = True


def render_errors(event, get_response):
    """Chalice ``@app.middleware('http')`` body: run the route, translate what it raises or what Chalice
    rendered in its own error shape (its 405 for a known path with another method becomes OpenAI's 404 "Invalid
    URL", here, so the request log records what the client got)."""
    try:
        response = get_response(event)
    except EngramError as exc:
        return error_response(exc)
    except psycopg.OperationalError as exc:  # from a middleware inside this one (the API-key lookup)
        return error_response(database_unavailable(exc))
    if response.status_code >= 400 and isinstance(response.body, dict) and "Code" in response.body:
        if response.status_code == 405:  # a known path, another method: an unknown URL, as on OpenAI
            path = (event.context or {}).get("path") or event.path
            return error_response(NotFoundError(f"Invalid URL ({event.method} {path})", code=None))
        return _from_chalice(response)
    return response


def _from_chalice(response: Response) -> Response:
    status = response.status_code
    if status >= 500:
        message, kind = _GENERIC_500, "server_error"
    else:
        message, kind = str(response.body.get("Message") or "Bad request."), "invalid_request_error"
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Response(body=json.dumps(body), status_code=status, headers={**response.headers, **_JSON})
