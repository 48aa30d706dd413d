"""Engram as an MCP server: the tools of :mod:`chalicelib.api.mcp_tools` served with the official ``mcp`` SDK —
over Streamable HTTP at ``/mcp`` (stateless: every request is answered on its own, so it runs as it is in the API
Lambda behind API Gateway, which cannot hold a stream open) and over stdio (``engram mcp``, for desktop clients).

HTTP (:func:`handle_http`): the request Chalice hands the ``/mcp`` route — already authenticated by the API's
middleware (``Authorization: Bearer <key>``, the same keys, tenants and permissions as the HTTP API) — is given to
the SDK's Streamable HTTP transport as one ASGI request, in stateless mode with JSON responses, inside a fresh
event loop; its answer goes back as the Chalice response. Both protocol eras the SDK speaks are served: the
``initialize`` handshake (2025-11-25 and earlier, what today's desktop and coding agents send) and the
handshake-free 2026-07-28 requests. ``GET /mcp`` (a server-to-client stream) is refused with 405, as a stateless
server does. A request the SDK has not answered within :data:`REQUEST_BUDGET_S` gets a JSON-RPC error (never a
hang).

Errors map to MCP's: a tool the key may not use is not listed and calling it is the JSON-RPC error for an unknown
tool; a refused call (bad arguments, not found, a scope outside the key's, a model that failed) is a tool result
with ``isError: true`` whose text is Engram's error envelope (``{"error": {"message", "type", "param", "code"}}``),
so a model can read and correct it; a missing or unknown key is the API's 401 before MCP is reached.

The SDK is imported on the first ``/mcp`` request only (about a second on a cold start), never by ``import app``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, MutableMapping
from functools import lru_cache
from typing import Any

from chalicelib.errors import EngramError

__all__ = ["REQUEST_BUDGET_S", "SERVER_NAME", "build", "handle_http", "serve_stdio"]

logger = logging.getLogger("engram.mcp")

SERVER_NAME = "engram"
INSTRUCTIONS = ("Engram keeps this user's long-term memory and their document collections. Search memories before "
                "answering questions about the user, add what they tell you to remember, and search documents "
                "(then fetch one) for questions about them.")
# Seconds one HTTP request may take inside the SDK (the API function's timeout is 30 s, API Gateway's 29 s).
REQUEST_BUDGET_S = 25.0
_GENERIC = "The server had an error while processing your request."


@lru_cache(maxsize=1)
def build() -> Any:
    """The SDK's low-level ``Server`` with Engram's tools (built once per process): ``tools/list`` lists what the
    current caller's key may use, ``tools/call`` runs one as that caller (:mod:`chalicelib.api.mcp_tools`)."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    from chalicelib.api import mcp_tools
    from chalicelib.api.context import current_access

    async def list_tools(ctx: Any, params: Any) -> Any:
        grants = current_access()
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, title=tool.title, description=tool.description,
                       input_schema=tool.input_schema(grants), output_schema=tool.output.model_json_schema(),
                       annotations=types.ToolAnnotations(title=tool.title, read_only_hint=tool.read_only,
                                                         destructive_hint=tool.destructive,
                                                         idempotent_hint=tool.idempotent, open_world_hint=False))
            for tool in mcp_tools.listed(grants)])

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            result = mcp_tools.run(params.name, params.arguments)
        except KeyError:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:100]}") from None
        except EngramError as exc:
            if exc.status >= 500:
                logger.warning("MCP tool %s failed: %s", params.name, exc.message)
            body = exc.to_dict() if exc.status < 500 or exc.status in (502, 503, 504) else \
                {"error": {"message": _GENERIC, "type": "server_error", "param": None, "code": None}}
            return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))], is_error=True)
        except Exception:  # a bug: logged, reported generically
            logger.exception("MCP tool %s failed", params.name)
            body = {"error": {"message": _GENERIC, "type": "server_error", "param": None, "code": None}}
            return types.CallToolResult(content=[types.TextContent(text=json.dumps(body))], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
                                    structured_content=result)

    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("engram")
    except PackageNotFoundError:  # the Lambda code package carries no distribution metadata
        release = ""
    return Server(SERVER_NAME, version=release, title="Engram", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def handle_http(method: str, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    """Answer one Streamable HTTP request to ``/mcp`` as the current caller (set by the API's middleware):
    ``(status, headers, body)``. Never raises: a request the SDK cannot answer in :data:`REQUEST_BUDGET_S`, or
    that breaks it, is a JSON-RPC error."""
    import anyio

    if method.upper() not in ("POST", "DELETE"):
        return 405, {"Allow": "POST", "Content-Type": "application/json"}, _rpc_error(
            -32600, "This server is stateless: send each request as a POST (no server-to-client stream).")
    status: list[int] = []
    answer_headers: dict[str, str] = {}
    chunks: list[bytes] = []
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method.upper(),
             "scheme": "https", "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
             "client": None, "server": ("engram", 443)}
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}  # pragma: no cover - cancelled before

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
            for name, value in message.get("headers", []):
                answer_headers[name.decode("latin-1")] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async def serve() -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        # One manager per request (a manager runs once); Host checks are API Gateway's and the key's job here.
        manager = StreamableHTTPSessionManager(
            app=build(), json_response=True, stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        with anyio.fail_after(REQUEST_BUDGET_S):
            async with manager.run():
                await manager.handle_request(scope, receive, send)

    try:
        anyio.run(serve)
    except TimeoutError:
        logger.warning("MCP request not answered within %.0f s", REQUEST_BUDGET_S)
        return 504, {"Content-Type": "application/json"}, _rpc_error(-32603, "The request timed out.")
    except Exception:
        logger.exception("MCP request failed")
        return 500, {"Content-Type": "application/json"}, _rpc_error(-32603, _GENERIC)
    if not status:
        return 500, {"Content-Type": "application/json"}, _rpc_error(-32603, _GENERIC)
    answer_headers.pop("content-length", None)
    return status[0], answer_headers, b"".join(chunks)


def _rpc_error(code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()


def serve_stdio() -> None:
    """Serve the tools over stdin/stdout until the client closes them (``engram mcp``), as the current caller
    (set by the command: :func:`chalicelib.api.context.acting_as`)."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build()

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
