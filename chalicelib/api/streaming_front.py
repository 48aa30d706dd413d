"""The true-streaming front for ``POST /v1/responses`` with ``"stream": true``.

Why: API Gateway's REST integration (Chalice's front) buffers a Lambda's whole answer, so Server-Sent Events would
arrive in one piece at the end. This front writes each event to the socket as the agentic loop produces it.

The contract (one WSGI app, shared by AWS and ``engram serve``):

- ``POST /v1/responses`` — authenticated exactly like the API (``Authorization: Bearer <key>`` resolved by
  :func:`chalicelib.api.context.resolve_access`, the key's permissions checked as the API checks them: 403
  without ``responses.write``). With ``"stream": true`` the answer is ``200
  text/event-stream``, one ``event: <type>\\ndata: <json>\\n\\n`` block per event from
  :func:`chalicelib.responses.service.stream_events` (encoded by :func:`chalicelib.responses.sse.encode`),
  flushed per event; failures *during* the stream are events (``response.failed``), as OpenAI sends them.
  Errors found before the first event (bad body, unknown key, unknown ``previous_response_id``, no chat backend
  configured ...) are OpenAI's JSON error envelope with their status (400/401/404/429/502/504): the body is
  decoded and checked by the API's own :func:`chalicelib.validation.parse_json_object` and
  :func:`chalicelib.responses.service.prepare`, so a body the API refuses is refused here identically, before
  the stream starts (NUL, lone surrogates, ``1e400``, ``NaN``, absurd nesting: 400). Without
  ``"stream": true`` the request is answered like the API's route (:func:`service.create_response`, JSON), so
  one URL can serve every Responses create call.
- ``GET /health`` (readiness: the database answers, else 503) and ``GET /health/live`` (liveness, touching nothing)
  without a key, answered as the API answers them (:mod:`chalicelib.api.health`). The Lambda Web Adapter's
  readiness check is ``/health/live``: a front started while the database is down must still come up and answer.
- a database that cannot be reached (``psycopg.OperationalError``) before the first event: 503
  ``database_unavailable`` with ``Retry-After``, as on the API; during a stream, a ``response.failed`` event.
- anything else — 404 in the error envelope (retrieve/delete/list stay on the API Gateway API).

Serving it:

- In AWS: a second Lambda function (same code package and environment as the API) behind a **function URL with
  ``InvokeMode: RESPONSE_STREAM``**, running this module through the **AWS Lambda Web Adapter** layer
  (``arn:aws:lambda:${AWS::Region}:753240598075:layer:LambdaAdapterLayerX86:<version>``, or the Arm64 one) with
  ``AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap``, ``AWS_LWA_INVOKE_MODE=response_stream``, ``AWS_LWA_PORT=8080``,
  ``AWS_LWA_READINESS_CHECK_PATH=/health/live`` and the handler set to an executable script in the package root::

      #!/bin/bash
      cd "$LAMBDA_TASK_ROOT" && exec python -m chalicelib.api.streaming_front --port "${AWS_LWA_PORT:-8080}"

  (the adapter waits for ``/health/live``, then forwards each invocation as an HTTP request). The function URL's
  ``AuthType`` can be ``NONE`` because every request is authenticated here by its API key. The function's timeout
  (at most 900 s) bounds one streamed response. Clients use the function URL plus ``/v1`` as ``base_url`` for
  ``responses.create(stream=True)`` / ``responses.stream(...)`` and the API Gateway URL for everything else (or
  one CloudFront distribution routing ``POST /v1/responses`` to the function URL).
- Anywhere else: ``python -m chalicelib.api.streaming_front --host 0.0.0.0 --port 8080`` (stdlib ``wsgiref``
  with one thread per connection), or any WSGI server that does not buffer (``application`` is standard WSGI).
- Locally: ``engram serve`` hands ``POST /v1/responses`` with ``"stream": true`` to :func:`handle` and writes the
  events with chunked transfer encoding on the same port as the rest of the API (see ``engram_cli/server.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import socketserver
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import psycopg

from chalicelib import deps
from chalicelib.api import health as checks
from chalicelib.api.context import resolve_access
from chalicelib.api.middleware import database_unavailable, error_response
from chalicelib.api.query import parse
from chalicelib.errors import EngramError, NotFoundError
from chalicelib.validation import parse_json_object

logger = logging.getLogger("engram.responses.stream")

RESPONSES_PATH = "/v1/responses"
HEALTH_PATH = checks.HEALTH_PATH
LIVE_PATH = checks.LIVE_PATH
SSE_HEADERS = (
    ("Content-Type", "text/event-stream; charset=utf-8"),
    ("Cache-Control", "no-cache"),
    ("X-Accel-Buffering", "no"),  # tells nginx-style proxies not to buffer the stream
)
_GENERIC = "The server had an error while processing your request."


@dataclass
class FrontResponse:
    """What :func:`handle` answers: ``status``, ``headers`` and ``body`` — an iterator of byte strings, one per SSE
    event when ``streaming`` (close it if the client goes away: the response is then not stored); a JSON answer
    is one byte string and its headers carry ``Content-Length``."""

    status: int
    headers: list[tuple[str, str]]
    body: Iterator[bytes]
    streaming: bool = False
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def close(self) -> None:
        """Stop the body's generator (runs its cleanup); safe to call twice."""
        close = getattr(self.body, "close", None)
        if close is not None:
            close()


def wants_stream(method: str, path: str, body: bytes) -> bool:
    """True when a request is ``POST /v1/responses`` with a JSON object body whose ``stream`` is true — the
    requests a buffering front (Chalice, API Gateway) must hand to :func:`handle`."""
    if method.upper() != "POST" or _route(path) != RESPONSES_PATH:
        return False
    try:
        payload = json.loads(body or b"null")
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to decode: Chalice's path refuses it
        return False
    return isinstance(payload, dict) and payload.get("stream") is True


def handle(method: str, path: str, headers: Mapping[str, str], body: bytes, query: str = "") -> FrontResponse:
    """Answer one request (see the module docstring). ``headers`` are matched case-insensitively; ``body`` is
    the raw request body (bytes); ``query`` the raw query string (``POST /v1/responses`` takes no parameter, as
    on the API: any is a 400 ``unknown_parameter``). Never raises: errors become the JSON error envelope."""
    route = _route(path)
    lowered = {k.lower(): v for k, v in headers.items()}
    started = time.monotonic()
    try:
        if method.upper() == "GET" and route == LIVE_PATH:
            return _json(200, checks.LIVE)
        if method.upper() == "GET" and route == HEALTH_PATH:
            status, answer, extra = checks.readiness(deps.current_settings())
            return _json(status, answer, extra)
        if route != RESPONSES_PATH:
            raise NotFoundError(f"Invalid URL ({method.upper()} {route})", code=None)
        if method.upper() != "POST":
            raise NotFoundError(f"Invalid URL ({method.upper()} {route}): this endpoint only creates responses.",
                                code=None)
        tenant, grants = resolve_access(lowered.get("authorization"))
        grants.require("responses", "write")  # the route's permission (chalicelib.api.permissions)
        parse({}, parse_qs(query, keep_blank_values=True))  # the route declares no parameter
        payload = parse_json_object(body)  # the API's own decoder: same 400s, before any event
        settings = deps.current_settings()
        from chalicelib.responses import service

        if payload.get("stream") is not True:
            return _json(200, service.create_response(settings, tenant, payload, access=grants))
        events = service.stream_events(settings, tenant, payload, access=grants)
        logger.info("streaming response for tenant %s", tenant)
        return FrontResponse(200, list(SSE_HEADERS), _encoded(events, started), streaming=True)
    except EngramError as exc:
        return _error(exc)
    except psycopg.OperationalError as exc:  # the database is unreachable or went away: 503, Retry-After
        return _error(database_unavailable(exc))
    except Exception:  # a bug: logged, answered generically (never the exception text)
        logger.exception("streaming front failed on %s %s", method, route)
        return _json(500, {"error": {"message": _GENERIC, "type": "server_error", "param": None, "code": None}})


def _encoded(events: Iterator[dict[str, Any]], started: float) -> Iterator[bytes]:
    """Each event as SSE bytes. The service reports its own failures as ``response.failed``; should its generator
    itself break, a final OpenAI ``error`` event (``ResponseErrorEvent``) ends the stream instead of a cut-off."""
    from chalicelib.responses import sse

    sequence = -1
    count = 0
    try:
        for event in events:
            sequence = event.get("sequence_number", sequence + 1)
            count += 1
            yield sse.encode(event)
    except Exception:
        logger.exception("response stream broke after %d events", count)
        yield sse.encode({"type": "error", "code": "server_error", "message": _GENERIC, "param": None,
                          "sequence_number": sequence + 1})
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
        logger.info("response stream ended after %d events in %.0f ms", count, (time.monotonic() - started) * 1000)


def _error(exc: EngramError) -> FrontResponse:
    """The API's error response for ``exc`` (its envelope, status and headers, e.g. Retry-After)."""
    rendered = error_response(exc)
    payload = rendered.body.encode("utf-8")
    # error_response sets single-valued headers only (Chalice also allows lists of values).
    pairs = [(name, value) for name, value in rendered.headers.items() if isinstance(value, str)]
    return FrontResponse(exc.status, [*pairs, ("Content-Length", str(len(payload)))], iter([payload]))


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> FrontResponse:
    data = json.dumps(payload).encode()
    extra = list((headers or {}).items())
    return FrontResponse(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                                  *extra], iter([data]))


def _route(path: str) -> str:
    route = path.split("?", 1)[0]
    return route.rstrip("/") or "/"


# ---------------------------------------------------------------------------------------------------- WSGI


def application(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """The WSGI application (PEP 3333): :func:`handle` for the request, the body returned as an iterable the
    server writes (and should flush) chunk by chunk; the iterable's ``close`` stops an abandoned stream."""
    headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    response = handle(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/", headers, body,
                      environ.get("QUERY_STRING") or "")
    reason = HTTPStatus(response.status).phrase
    start_response(f"{response.status} {reason}", [*response.headers, ("x-request-id", response.request_id)])
    return response.body


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """``wsgiref``'s server with one thread per connection (a slow stream must not block health checks)."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)


def build_server(host: str = "127.0.0.1", port: int = 8080) -> WSGIServer:
    """A threaded ``wsgiref`` server for :func:`application` bound to ``host:port`` (0: a free port; read it from
    ``server.server_port``), not yet serving. ``wsgiref`` writes and flushes every chunk the application yields,
    so events leave as soon as they exist; responses are HTTP/1.0, delimited by closing the connection.

    Raises:
        OSError: the port is taken.
    """
    return make_server(host, port, application, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)


def serve(host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve :func:`application` on ``host:port`` until interrupted."""
    with build_server(host, port) as server:
        logger.info("streaming front on http://%s:%d%s", host, server.server_port, RESPONSES_PATH)
        server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """``python -m chalicelib.api.streaming_front [--host H] [--port P]``."""
    parser = argparse.ArgumentParser(description="Engram's streaming front for POST /v1/responses.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0 in Lambda/containers)")
    parser.add_argument("--port", type=int, default=8080, help="TCP port (the Lambda Web Adapter's AWS_LWA_PORT)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    serve(args.host, args.port)


if __name__ == "__main__":
    main()
