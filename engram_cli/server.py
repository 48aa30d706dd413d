"""Serving the API on this machine: Chalice's threaded local server running the real ``app.py`` (same routes,
middleware and Lambda event shapes as API Gateway), plus background threads that process large files.
``POST /v1/responses`` with ``"stream": true`` bypasses Chalice (which buffers whole answers) for the streaming
front (:mod:`chalicelib.api.streaming_front`), so its events arrive as they are produced, as in AWS.

Used by ``engram serve`` and by the tests, which start it on an ephemeral port.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from engram_cli.local.scheduler import LocalScheduler

if TYPE_CHECKING:
    from chalice.local import LocalDevServer

    from chalicelib.dispatch.local import LocalDispatcher


@dataclass
class RunningServer:
    """A server started by :func:`start`: ``url`` is the API root (``http://host:port/v1``)."""

    url: str
    host: str
    port: int
    _server: LocalDevServer
    _thread: threading.Thread
    _scheduler: LocalScheduler | None
    _dispatcher: LocalDispatcher | None = None

    def stop(self) -> None:
        """Stop accepting requests and the scheduler, let the background dispatcher finish, close the pools."""
        from chalicelib.store.db import close_pools

        self._server.shutdown()
        self._server.server.server_close()
        self._thread.join(10)
        if self._scheduler is not None:
            self._scheduler.stop()
        if self._dispatcher is not None:
            deps.set_dispatcher(None)
            self._dispatcher.shutdown()
        close_pools()


def _request_handler_cls():
    import json

    from chalice.local import ChaliceRequestHandler, ForbiddenError

    from chalicelib.api import streaming_front

    class RequestHandler(ChaliceRequestHandler):
        # Chalice writes headers and body in separate sends; with Nagle on, keep-alive clients wait ~40 ms for the
        # delayed ACK on every request.
        disable_nagle_algorithm = True
        _buffered_body: bytes | None = None  # a POST body already read by do_POST, for Chalice's _parse_payload

        # Seconds a read of the request may wait for the client's next bytes (a body shorter than announced, a
        # stalled upload); then the request is answered 400 and the connection closed, nothing acted on.
        timeout = READ_TIMEOUT_S

        def do_POST(self) -> None:
            # Chalice's local gateway buffers whole answers; a streamed Responses request goes to the streaming
            # front instead (events written as they are produced, chunked), everything else on through Chalice.
            body = self._read_body()
            if body is None:
                return
            if streaming_front.wants_stream(self.command, self.path, body):
                query = self.path.split("?", 1)[1] if "?" in self.path else ""
                self._stream(streaming_front.handle(self.command, self.path, dict(self.headers), body, query))
                return
            self._buffered_body = body
            self._generic_handle()

        def _generic_handle(self) -> None:
            if self._buffered_body is None and self.command != "POST":
                body = self._read_body()
                if body is None:
                    return
                self._buffered_body = body
            super()._generic_handle()

        def _read_body(self) -> bytes | None:
            """The whole request body — by ``Content-Length``, or decoded from ``Transfer-Encoding: chunked`` — or
            None after answering 400 (a malformed length or chunk, a body that ends before what it announced, a
            stalled client) or 413 (over ``settings.max_request_bytes``): a request is never acted on half-read.
            The connection is closed after such an answer (its stream position is unknown)."""
            limit = deps.current_settings().max_request_bytes
            try:
                if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                    return self._read_chunked(limit)
                length = self._content_length()
                if length is None:
                    return None
                if length > limit:  # the app's own refusal (chalicelib.api.request.raw_body), before reading it
                    self._refuse(413, f"Request body is {length:,} bytes; the limit is {limit:,} bytes. Upload "
                                      "larger files in parts with the Uploads API (POST /v1/uploads).",
                                 code="request_too_large")
                    return None
                body = self.rfile.read(length) if length > 0 else b""
            except TimeoutError:
                self._refuse(400, f"The request body did not arrive within {READ_TIMEOUT_S:g} s.")
                return None
            if len(body) < length:
                self._refuse(400, f"The request body ended after {len(body):,} of the {length:,} bytes its "
                                         "Content-Length announced.")
                return None
            return body

        def _read_chunked(self, limit: int) -> bytes | None:
            """A chunked body (RFC 9112 §7.1), trailers skipped; None after answering 400/413."""
            pieces: list[bytes] = []
            size_read = 0
            while True:
                line = self.rfile.readline(1026)
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self._refuse(400, "Malformed chunked request body.")
                    return None
                if size == 0:
                    while self.rfile.readline(8194) not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields
                    return b"".join(pieces)
                size_read += size
                if size_read > limit:
                    self._refuse(413, f"Request body is over the limit of {limit:,} bytes. Upload larger files in "
                                      "parts with the Uploads API (POST /v1/uploads).", code="request_too_large")
                    return None
                piece = self.rfile.read(size)
                if len(piece) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    self._refuse(400, "The chunked request body ended before its last chunk.")
                    return None
                pieces.append(piece)

        def _refuse(self, status: int, message: str, code: str | None = None) -> None:
            self.close_connection = True
            self._envelope(status, message, code)

        do_GET = do_PUT = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

        def _parse_payload(self):
            if self._buffered_body is None:
                return super()._parse_payload()
            body, self._buffered_body = self._buffered_body, None
            return dict(self.headers), body or None

        def _content_length(self) -> int | None:
            """The request's Content-Length, or None after answering 400 for one that is not a number ≥ 0."""
            raw = (self.headers.get("content-length") or "0").strip()
            if raw.isdigit():
                return int(raw)
            self.close_connection = True
            self._envelope(400, "The Content-Length header must be a non-negative integer.")
            return None

        def _envelope(self, status: int, message: str, code: str | None = None) -> None:
            body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
            super()._send_http_response(status, {"Content-Type": "application/json"}, json.dumps(body).encode())

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            # http.server's own errors (a garbage request line, an unknown method, a header block too long) in
            # OpenAI's envelope, as 400s: they are the client's.
            self.close_connection = True
            if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":  # unparsable: answer in HTTP/1.0
                self.request_version = "HTTP/1.0"
            status = 400 if code in (400, 501) else code
            try:
                self._envelope(status, message or "Bad request.")
            except OSError:
                pass

        def _stream(self, response: streaming_front.FrontResponse) -> None:
            self.send_response(response.status)
            for name, value in [*response.headers, ("x-request-id", response.request_id)]:
                self.send_header(name, value)
            try:
                if not response.streaming:  # an error envelope (its headers carry Content-Length)
                    self.end_headers()
                    self.wfile.write(b"".join(response.body))
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in response.body:
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client went away mid-stream; closing the body abandons the response
                self.close_connection = True
            finally:
                response.close()

        def _send_error_response(self, error) -> None:
            # Chalice's local gateway answers an unknown path with API Gateway's 403 — and echoes the caller's
            # Authorization header in it. Answer as OpenAI does instead: 404, the error envelope, no secrets.
            if isinstance(error, ForbiddenError):
                path = self.path.split("?", 1)[0]
                body = {"error": {"message": f"Invalid URL ({self.command} {path})", "type": "invalid_request_error",
                                  "param": None, "code": None}}
                self._send_http_response(404, {"Content-Type": "application/json"}, json.dumps(body).encode())
                return
            super()._send_error_response(error)

    return RequestHandler


# Seconds a request's read may wait for the client (see the handler's ``timeout``).
READ_TIMEOUT_S = 30.0


def _warm_up(settings: Settings) -> None:
    """Load the local embedding model in a background thread (about 4 s on a laptop), so the first attach or
    search does not spend its request loading it. A failure is left for the first request to report."""

    def load() -> None:
        try:
            deps.embedder(settings).embed(["warm-up"])
        except Exception:  # the first request that needs the model raises it properly
            logging.getLogger("engram.local").debug("embedding model warm-up failed", exc_info=True)

    threading.Thread(target=load, name="engram-warm-up", daemon=True).start()


def start(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, embedder: Embedder | None = None,
          worker_threads: int = 1) -> RunningServer:
    """Serve ``app.py`` on ``host:port`` (0 picks a free port) in a daemon thread. ``settings`` and ``embedder``
    become the process's (see :mod:`chalicelib.deps`). Without a queue (``settings.ingest_queue`` unset),
    ``worker_threads`` background threads process what requests hand off and a local scheduler runs the
    scheduled lanes; ``worker_threads=0`` leaves both to someone else (the event pump).

    Raises:
        OSError: the port is taken.
    """
    from chalice.config import Config
    from chalice.local import CustomLocalChalice, LocalChalice, LocalDevServer

    import app as application

    deps.set_settings(settings)
    if embedder is not None:
        deps.set_embedder(embedder)
    from chalicelib.store.db import pool

    pool(settings)  # start the database and migrate before the first request
    if embedder is None and settings.embedding_provider == "local":
        _warm_up(settings)
    config = Config.create(chalice_stage="dev", app_name="engram")
    app_obj = application.app
    if not isinstance(app_obj, LocalChalice):  # what chalice.local.create_local_server does, done once per process:
        CustomLocalChalice.__bases__ = (LocalChalice, app_obj.__class__)  # a second time makes a class cycle
        app_obj.__class__ = CustomLocalChalice
    server = LocalDevServer(app_obj, config, host, port, handler_cls=_request_handler_cls())
    actual_port = server.server.server_address[1]
    thread = threading.Thread(target=server.server.serve_forever, name="engram-http", daemon=True)
    thread.start()
    scheduler = dispatcher = None
    if worker_threads > 0 and not settings.ingest_queue:
        from chalicelib.dispatch.local import LocalDispatcher

        dispatcher = LocalDispatcher(settings, threads=worker_threads)
        deps.set_dispatcher(dispatcher)
        scheduler = LocalScheduler(settings).start()
    return RunningServer(url=f"http://{host}:{actual_port}/v1", host=host, port=actual_port, _server=server,
                         _thread=thread, _scheduler=scheduler, _dispatcher=dispatcher)
