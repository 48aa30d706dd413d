"""Engram as an MCP server over Streamable HTTP: ``POST /mcp`` (and ``GET`` / ``DELETE``, which a stateless server
refuses or ignores), answered by :mod:`chalicelib.api.mcp_server`. Authenticated like every route (the same API
keys); each tool checks the key's permission and a tool the key may not use is not listed
(``chalicelib.api.permissions`` declares ``/mcp`` open to any valid key)."""

from __future__ import annotations

from chalice import Blueprint
from chalice.app import Response

bp = Blueprint(__name__)

PATH = "/mcp"


@bp.route(PATH, methods=["POST", "GET", "DELETE"], content_types=["application/json"])
def mcp_endpoint() -> Response:
    """One MCP request (JSON-RPC in, JSON out): ``initialize``, ``tools/list``, ``tools/call``, ..."""
    from chalicelib.api import mcp_server, request

    req = bp.current_request
    body = request.raw_body(req) if req.method != "GET" else b""
    status, headers, payload = mcp_server.handle_http(req.method, dict(req.headers), body)
    return Response(body=payload.decode("utf-8"), status_code=status, headers={**headers})
