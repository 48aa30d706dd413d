"""HTTP edge: Chalice blueprints under ``/v1`` and the one place errors become OpenAI's envelope.

Public modules (``__all__``; imported by name, never here — ``app.py`` imports what it mounts): :mod:`context`
(authentication middleware, the request's tenant and database connection), :mod:`middleware` (the error
renderer), :mod:`routes` (one blueprint per resource), :mod:`request` (reading and validating a request),
:mod:`multipart` (``multipart/form-data`` bodies), :mod:`objects` (store rows → OpenAI wire objects) and
:mod:`streaming_front` (true SSE streaming of ``POST /v1/responses`` outside API Gateway), :mod:`permissions`
(every route's permission), :mod:`mcp_server` and :mod:`mcp_tools` (Engram as an MCP server: ``/mcp`` and
``engram mcp``). :mod:`schemas` and :mod:`upload_schemas` are the request bodies the routes validate.
"""

__all__ = ["context", "mcp_server", "mcp_tools", "middleware", "multipart", "objects", "permissions", "request",
           "routes", "streaming_front"]
