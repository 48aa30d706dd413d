"""Remote MCP servers for tests of the Responses API's ``mcp`` tool, on ephemeral loopback ports in daemon threads:

- :class:`ToolServer`: a real MCP server built with the official ``mcp`` SDK (``MCPServer``, Streamable HTTP under
  uvicorn) with a few tools: ``add`` (read-only), ``note`` (writes), ``whoami`` (says whether it received the
  expected ``Authorization`` and ``X-Team`` headers, never echoing them), ``explode`` (fails), ``slow`` (sleeps),
  ``big`` (a large answer); it counts the JSON-RPC methods it receives (``methods``).
- :class:`StatusServer`: answers every request with one HTTP status (a failing server).
- :class:`SilentServer`: accepts connections and never answers (a hanging server).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mcp.server.mcpserver import Context  # module level: the SDK resolves tools' annotations in these globals

EXPECTED_AUTHORIZATION = "Bearer tok-secret-123"
EXPECTED_TEAM = "team-secret-456"


class ToolServer:
    """The SDK-built MCP server (see the module docstring); ``url`` is its ``/mcp`` endpoint."""

    def __init__(self) -> None:
        import uvicorn
        from mcp.server import MCPServer
        from mcp.types import ToolAnnotations

        self.methods: Counter[str] = Counter()
        mcp = MCPServer("test-tools")

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @mcp.tool()
        def note(text: str) -> str:
            """Keep a note."""
            return f"noted: {text}"

        @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
        def whoami(ctx: Context) -> str:
            """Whether the expected credentials arrived."""
            headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
            return (f"authorization ok={headers.get('authorization') == EXPECTED_AUTHORIZATION}, "
                    f"team ok={headers.get('x-team') == EXPECTED_TEAM}")

        @mcp.tool()
        def explode() -> str:
            """Always fails."""
            raise ValueError("the reactor is offline")

        @mcp.tool()
        async def slow(seconds: float) -> str:
            """Sleeps, then answers."""
            import anyio

            await anyio.sleep(seconds)
            return "finally"

        @mcp.tool()
        def big(size: int) -> str:
            """A long answer of ``size`` characters."""
            return "x" * size

        app = mcp.streamable_http_app()
        counter = self.methods

        async def counting(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            chunks = []

            async def replay() -> dict[str, Any]:
                message = await receive()
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    import json

                    try:
                        payload = json.loads(b"".join(chunks) or b"null")
                        if isinstance(payload, dict) and "method" in payload:
                            counter[payload["method"]] += 1
                    except ValueError:
                        pass
                return message

            await app(scope, replay, send)

        self._server = uvicorn.Server(uvicorn.Config(counting, host="127.0.0.1", port=0, log_level="warning",
                                                     lifespan="on", timeout_graceful_shutdown=1))
        self._app = app
        self._thread = threading.Thread(target=self._server.run, name="mcp-tools", daemon=True)

    def __enter__(self) -> ToolServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    @property
    def url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"


class StatusServer:
    """Answers every request with ``status`` (a failing MCP server)."""

    def __init__(self, status: int = 500) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                body = b'{"detail": "down for maintenance"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StatusServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/mcp"


class SilentServer:
    """Accepts connections, reads nothing, answers nothing (a hanging MCP server)."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self._socket.settimeout(0.1)
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                continue
            self._held.append(connection)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for connection in self._held:
            connection.close()
        self._socket.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/mcp"
