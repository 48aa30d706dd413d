"""The one error renderer.

:class:`~chalicelib.errors.EngramError` (which Chalice lets through to middleware because it subclasses
``ChaliceUnhandledError``) becomes ``{"error": {"message", "type", "param", "code"}}`` with its status. Errors
Chalice renders itself — any other exception (its generic 500) and its own 4xx (e.g. a malformed JSON body) —
arrive here as ``{"Code", "Message"}`` responses and are rewritten into the same envelope, so clients only ever
see OpenAI's shape. Internals (exception text, tracebacks) never reach the body.
"""

from __future__ import annotations

import json
import logging

from chalice.app import Response

from chalicelib.errors import EngramError

logger = logging.getLogger("engram.api")

_JSON = {"Content-Type": "application/json"}
_GENERIC_500 = "The server had an error while processing your request."


# The SDK retries 408, 409, 429 and 5xx unless told otherwise (openai-python _base_client._should_retry); a
# deterministic client error (e.g. our 409 for an ambiguous name) must not be retried.
_NO_RETRY = {"x-should-retry": "false"}


def error_response(exc: EngramError) -> Response:
    """The HTTP response for a domain error (4xx other than 408/429 carry ``x-should-retry: false``)."""
    # A fresh dict per response: middleware adds headers to it (x-request-id), which must not leak into _JSON.
    headers: dict[str, str | list[str]] = {**_JSON}
    if 400 <= exc.status < 500 and exc.status not in (408, 429):
        headers.update(_NO_RETRY)
    return Response(body=json.dumps(exc.to_dict()), status_code=exc.status, headers=headers)


def render_errors(event, get_response):
    """Chalice ``@app.middleware('http')`` body: run the route, translate what it raises or what Chalice
    rendered in its own error shape."""
    try:
        response = get_response(event)
    except EngramError as exc:
        return error_response(exc)
    if response.status_code >= 400 and isinstance(response.body, dict) and "Code" in response.body:
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
