"""The Responses API's ``mcp`` tool: a remote MCP server's tools offered to the model, called in the agentic loop
(OPENAI-COMPAT.md; SDK ``types/responses``: ``mcp_list_tools``, ``mcp_call``, ``mcp_approval_request`` output items,
``mcp_approval_response`` input items, ``response.mcp_list_tools.*`` / ``response.mcp_call*`` events).

- **Listing.** Each server's tools are listed once per response chain or conversation: an ``mcp_list_tools`` item
  for the server's label already in the context (the chain's or conversation's items, or the request's input) is
  reused as it is; otherwise the server is listed and the item is the response's output (streamed:
  ``output_item.added``, ``mcp_list_tools.in_progress``, ``.completed`` or ``.failed``, ``output_item.done``).
  ``allowed_tools`` (names, or ``{"tool_names", "read_only"}``) keeps only those tools, in the item and for the model.
- **Calls.** The model sees each allowed tool as a function (its name; ``<label>__<name>`` when two servers or a
  function share it). A call that needs approval (``require_approval``: ``always`` — the default, as OpenAI's —,
  ``never``, or ``{"always": filter, "never": filter}``) becomes an ``mcp_approval_request`` item and the response
  ends there; an ``mcp_approval_response`` in the next request (chained by ``previous_response_id`` or in the
  conversation, with the same ``mcp`` tool) runs the call before the model's next turn (declined: an ``mcp_call``
  whose error says so, which the model sees). Any other call runs at once as an ``mcp_call`` item (``output``, or
  ``error`` in OpenAI's shapes: ``mcp_tool_execution_error``, ``mcp_protocol_error``, ``http_error``), streamed as
  ``output_item.added``, ``mcp_call_arguments.delta`` / ``.done``, ``mcp_call.in_progress``, ``.completed`` or
  ``.failed``, ``output_item.done``. MCP calls count toward ``max_tool_calls``.
- **Outbound calls are a risk.** The request's ``headers`` and ``authorization`` (sent as ``Authorization:
  Bearer``) go to the server only: never stored, echoed or logged. Only public addresses are reached (every
  address the host resolves to is checked, at every request: no private, loopback, link-local — the cloud metadata
  service —, multicast or reserved address) unless ``ENGRAM_MCP_ALLOWED_HOSTS`` lists the host or its range (the
  local stack allows loopback); redirects are not followed. Each listing or call has ``ENGRAM_MCP_TIMEOUT_S``
  (connecting included) and each answer at most ``ENGRAM_MCP_MAX_RESPONSE_BYTES``; a tool's output reaches the item
  and the model cut at :data:`MAX_OUTPUT_CHARS`. A server that is unreachable, refused, failing, too big or hanging
  is an item error the model is told about — never a 5xx or a hang of the response.

Connections use the official ``mcp`` SDK's client (Streamable HTTP; it negotiates the protocol era), one short session
per listing or call, run to completion on a fresh event loop.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import logging
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chalicelib.chat.base import ToolCall, ToolSpec
from chalicelib.config import Settings
from chalicelib.errors import InvalidRequestError
from chalicelib.responses import items
from chalicelib.responses.events import Emitter
from chalicelib.responses.objects import ResponseState
from chalicelib.responses.schemas import McpApprovalFilter, McpTool, McpToolFilter
from chalicelib.validation import param_path

__all__ = ["MAX_OUTPUT_CHARS", "Approved", "McpFailure", "Server", "Setup", "call_tool", "check_address",
           "list_tools", "prepare"]

logger = logging.getLogger("engram.responses.mcp")

# Characters of a tool's output kept in the item and shown to the model.
MAX_OUTPUT_CHARS = 100_000
# Pages of tools/list read from one server (each up to the server's page size).
MAX_LIST_PAGES = 10


class McpFailure(Exception):
    """A listing or call that failed: ``error`` is the ``mcp_call.error`` object (OpenAI's shapes), ``message`` a
    one-line summary (the ``mcp_list_tools.error``)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.message = str(error.get("message") or error.get("content") or error.get("type"))
        super().__init__(self.message)


def _http_error(code: int, message: str) -> McpFailure:
    return McpFailure({"type": "http_error", "code": code, "message": message})


@dataclass(frozen=True)
class Server:
    """One ``mcp`` tool of a request: its ``label``, ``url``, the ``headers`` sent to it (secrets: never stored,
    echoed or logged), which tools are ``allowed`` and which need approval."""

    label: str
    url: str
    headers: dict[str, str] = dataclasses.field(repr=False)
    allowed: list[str] | McpToolFilter | None
    approval: str | McpApprovalFilter

    def allows(self, tool: dict[str, Any]) -> bool:
        """Whether ``tool`` (an ``mcp_list_tools`` entry) passes ``allowed_tools``."""
        if self.allowed is None:
            return True
        if isinstance(self.allowed, list):
            return tool["name"] in self.allowed
        return _matches(self.allowed, tool)

    def needs_approval(self, tool: dict[str, Any]) -> bool:
        """Whether a call of ``tool`` waits for the client's approval."""
        if isinstance(self.approval, str):
            return self.approval != "never"
        # Named in "never": no approval; named in "always", or in neither (OpenAI's default): approval.
        return not (self.approval.never is not None and _matches(self.approval.never, tool))


def _matches(rule: McpToolFilter, tool: dict[str, Any]) -> bool:
    """A filter matches a tool named in ``tool_names`` and/or, with ``read_only``, annotated ``readOnlyHint``."""
    if rule.tool_names is not None and tool["name"] not in rule.tool_names:
        return False
    if rule.read_only is not None:
        return bool((tool.get("annotations") or {}).get("readOnlyHint")) == rule.read_only
    return rule.tool_names is not None


@dataclass(frozen=True)
class Approved:
    """An answered approval: the ``request`` item it answers, whether the client ``approve``\\ d it, its
    ``reason``."""

    request: dict[str, Any]
    approve: bool
    reason: str | None


@dataclass(frozen=True)
class Setup:
    """A request's MCP servers, the listings its context already holds (label → tools) and the approvals it
    answers, with the ``settings`` outbound calls follow."""

    settings: Settings
    servers: tuple[Server, ...]
    listed: dict[str, list[dict[str, Any]]]
    approved: tuple[Approved, ...] = ()


def prepare(settings: Settings, tools: list[tuple[int, McpTool]], context: Iterable[dict[str, Any]],
            new_items: list[dict[str, Any]]) -> Setup | None:
    """The :class:`Setup` of a request's ``mcp`` tools (``(index in tools, tool)``), given the items of its
    context (chain or conversation, oldest first) and its new input items. None without ``mcp`` tools and
    approvals.

    Raises:
        InvalidRequestError: (400) two tools with one ``server_label``, a connector or tunnel (OpenAI's services),
            no ``server_url``, a URL that is not http(s), an approval answering no ``mcp_approval_request`` of the
            context, or one whose server is not among the request's tools.
    """
    servers: list[Server] = []
    for index, tool in tools:
        where = param_path("tools", index)
        for field in ("connector_id", "tunnel_id"):
            if getattr(tool, field) is not None:
                raise InvalidRequestError(f"'{field}' names one of OpenAI's own services; give the MCP server's "
                                          "'server_url'.", param=f"{where}.{field}", code="unsupported_parameter")
        if tool.server_url is None:
            raise InvalidRequestError("Missing required parameter: 'server_url'.", param=f"{where}.server_url",
                                      code="missing_required_parameter")
        parts = urlsplit(tool.server_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequestError("Invalid 'server_url': expected an http(s) URL.", param=f"{where}.server_url",
                                      code="invalid_value")
        if any(s.label == tool.server_label for s in servers):
            raise InvalidRequestError(f"Duplicate server_label {tool.server_label!r}.",
                                      param=f"{where}.server_label", code="invalid_value")
        headers = dict(tool.headers or {})
        if tool.authorization:
            headers["Authorization"] = f"Bearer {tool.authorization}"
        servers.append(Server(tool.server_label, tool.server_url, headers, tool.allowed_tools,
                              tool.require_approval or "always"))
    seen = [*context, *new_items]
    listed = {item["server_label"]: item["tools"] for item in seen
              if item.get("type") == "mcp_list_tools" and not item.get("error")}
    requests = {item["id"]: item for item in seen if item.get("type") == "mcp_approval_request"}
    done = {item.get("approval_request_id") for item in seen if item.get("type") == "mcp_call"}
    approved = []
    for position, item in enumerate(new_items):
        if item.get("type") != "mcp_approval_response":
            continue
        request = requests.get(item["approval_request_id"])
        where = param_path("input", position, "approval_request_id")
        if request is None or item["approval_request_id"] in done:
            raise InvalidRequestError(f"No pending mcp_approval_request with id {item['approval_request_id']!r} in "
                                      "this response's context.", param=where, code="invalid_value")
        if not any(s.label == request["server_label"] for s in servers):
            raise InvalidRequestError(f"The approved call is to MCP server {request['server_label']!r}, which is not "
                                      "among this request's tools: send its mcp tool again.", param=where,
                                      code="invalid_value")
        approved.append(Approved(request, item["approve"], item.get("reason")))
    if not servers and not approved:
        return None
    return Setup(settings, tuple(servers), listed, tuple(approved))


# ---- the loop's side: items and events ----

@dataclass
class Offered:
    """What the model is offered from the MCP servers: exposed function name → ``(server, tool)``."""

    tools: dict[str, tuple[Server, dict[str, Any]]]

    def specs(self) -> list[ToolSpec]:
        """The tools as the chat backend's function specs."""
        return [ToolSpec(name, tool.get("description") or "", _parameters(tool))
                for name, (_, tool) in self.tools.items()]


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("input_schema")
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else \
        {"type": "object", "properties": {}}


def offer(setup: Setup, state: ResponseState, emit: Emitter, taken: set[str]
          ) -> Generator[dict[str, Any], None, tuple[Offered, list[str]]]:
    """List (or reuse) every server's tools; returns what the model is offered and notes for the model about
    servers that could not be listed. ``taken``: the function names already offered (the request's functions)."""
    offered: dict[str, tuple[Server, dict[str, Any]]] = {}
    notes: list[str] = []
    for server in setup.servers:
        tools = setup.listed.get(server.label)
        if tools is None:
            item = items.mcp_list_tools(server.label, [])
            index = len(state.output)
            state.output.append(item)
            yield emit.item_added(index, item)
            yield emit.mcp_list_tools("in_progress", index, item["id"])
            try:
                tools = [t for t in list_tools(server, setup.settings) if server.allows(t)]
                item["tools"] = tools
                yield emit.mcp_list_tools("completed", index, item["id"])
            except McpFailure as failure:
                item["error"] = failure.message
                notes.append(f"The MCP server '{server.label}' could not be reached; its tools are unavailable "
                             f"({failure.message}).")
                yield emit.mcp_list_tools("failed", index, item["id"])
                tools = []
            yield emit.item_done(index, item)
        for tool in tools:
            if not server.allows(tool):
                continue
            name = tool["name"] if tool["name"] not in taken and tool["name"] not in offered \
                else f"{server.label}__{tool['name']}"[:64]
            offered[name] = (server, tool)
    return Offered(offered), notes


def run_approved(setup: Setup, state: ResponseState, emit: Emitter) -> Generator[dict[str, Any], None, list[dict]]:
    """The calls the request's approvals answer: each an ``mcp_call`` item (run when approved; declined, an error
    the model sees). Returns the items."""
    done = []
    for answer in setup.approved:
        request = answer.request
        server = next(s for s in setup.servers if s.label == request["server_label"])
        declined = None if answer.approve else {
            "type": "mcp_tool_execution_error",
            "content": [{"type": "text", "text": "The user declined this tool call"
                         + (f": {answer.reason}" if answer.reason else ".")}]}
        item = yield from _call(setup, server, request["name"], request["arguments"], state, emit,
                                approval_request_id=request["id"], declined=declined)
        done.append(item)
    return done


def handle_call(setup: Setup, offered: Offered, call: ToolCall, state: ResponseState,
                emit: Emitter) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """One model call of an MCP tool: an ``mcp_approval_request`` item when it needs approval, else the call run
    as an ``mcp_call`` item. Returns the item."""
    server, tool = offered.tools[call.name]
    if server.needs_approval(tool):
        item = items.mcp_approval_request(server.label, tool["name"], call.arguments or "{}")
        index = len(state.output)
        state.output.append(item)
        yield emit.item_added(index, item)
        yield emit.item_done(index, item)
        return item
    return (yield from _call(setup, server, tool["name"], call.arguments or "{}", state, emit))


def _call(setup: Setup, server: Server, name: str, arguments: str, state: ResponseState, emit: Emitter, *,
          approval_request_id: str | None = None,
          declined: dict[str, Any] | None = None) -> Generator[dict[str, Any], None, dict[str, Any]]:
    item = items.mcp_call(server.label, name, "", approval_request_id=approval_request_id)
    index = len(state.output)
    state.output.append(item)
    yield emit.item_added(index, item)
    if arguments:
        yield emit.mcp_arguments_delta(index, item["id"], arguments)
    item["arguments"] = arguments
    yield emit.mcp_arguments_done(index, item["id"], arguments)
    yield emit.mcp_call("in_progress", index, item["id"])
    if declined is not None:
        item["error"] = declined
    else:
        try:
            parsed = json.loads(arguments or "{}")
            if not isinstance(parsed, dict):
                raise ValueError
        except ValueError:
            item["error"] = {"type": "mcp_protocol_error", "code": -32602,
                             "message": "The arguments are not a JSON object."}
        else:
            try:
                item["output"] = call_tool(server, name, parsed, setup.settings)
            except McpFailure as failure:
                item["error"] = failure.error
    item["status"] = "failed" if item["error"] else "completed"
    yield emit.mcp_call("failed" if item["error"] else "completed", index, item["id"])
    yield emit.item_done(index, item)
    return item


# ---- the client side: the official SDK, bounded ----

def check_address(host: str, addresses: Iterable[str], allowed: str | None) -> None:
    """Refuse a host none of whose ``addresses`` may be reached: every address must be public (not private,
    loopback, link-local, multicast or reserved) unless ``allowed`` (``ENGRAM_MCP_ALLOWED_HOSTS``: host names,
    addresses, CIDR ranges, ``*``) lists the host or a range holding the address.

    Raises:
        McpFailure: (``http_error`` 403) an address that may not be reached, naming the setting.
    """
    entries = [e.strip().lower() for e in (allowed or "").split(",") if e.strip()]
    if "*" in entries or host.lower().strip("[]") in entries:
        return
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    for raw in addresses:
        address = ipaddress.ip_address(raw.split("%", 1)[0])
        if any(address in net for net in networks):
            continue
        if not address.is_global or address.is_multicast:
            raise _http_error(403, f"The MCP server's host {host} resolves to a non-public address ({address}); "
                                   "list it in ENGRAM_MCP_ALLOWED_HOSTS to allow it.")


def list_tools(server: Server, settings: Settings) -> list[dict[str, Any]]:
    """The server's tools as ``mcp_list_tools`` entries ``{name, description, input_schema, annotations}``.

    Raises:
        McpFailure: the server could not be reached, refused, failed, answered too much or too late.
    """

    async def go(client: Any) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) \
                    if tool.annotations is not None else None
                tools.append({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema,
                              "annotations": annotations})
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return _session(server, settings, go)


def call_tool(server: Server, name: str, arguments: dict[str, Any], settings: Settings) -> str:
    """Call tool ``name`` with ``arguments``; its text output (structured content as JSON when it has no text),
    cut at :data:`MAX_OUTPUT_CHARS`.

    Raises:
        McpFailure: the tool failed (``mcp_tool_execution_error``), or the server could not be reached, refused,
            failed, answered too much or too late.
    """

    async def go(client: Any) -> str:
        result = await client.call_tool(name, arguments)
        blocks = [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in result.content]
        if result.is_error:
            raise McpFailure({"type": "mcp_tool_execution_error", "content": blocks})
        text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if not text and result.structured_content is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)
        return text[:MAX_OUTPUT_CHARS]

    return _session(server, settings, go)


class _TooLarge(Exception):
    pass


def _session(server: Server, settings: Settings, work: Any) -> Any:
    """Run ``work(client)`` on one MCP session with ``server``, bounded by the settings (see the module docstring).

    Raises:
        McpFailure: whatever went wrong, in ``mcp_call.error``'s shapes.
    """
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    statuses: list[int] = []
    limit = settings.mcp_max_response_bytes

    class Counted(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> Any:
            total = 0
            async for chunk in self.inner:
                total += len(chunk)
                if total > limit:
                    raise _TooLarge
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Guarded(httpx2.AsyncBaseTransport):
        """Checks every request's host against the outbound policy and bounds every answer's size."""

        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            host = request.url.host
            port = request.url.port or (443 if request.url.scheme == "https" else 80)
            try:
                found = await anyio.getaddrinfo(host, port)
            except OSError as exc:
                raise _http_error(502, f"The MCP server's host {host} could not be resolved.") from exc
            check_address(host, [info[4][0] for info in found], settings.mcp_allowed_hosts)
            response = await self.inner.handle_async_request(request)
            statuses.append(response.status_code)
            length = response.headers.get("content-length")
            if length and length.isdigit() and int(length) > limit:
                await response.aclose()
                raise _TooLarge
            return httpx2.Response(response.status_code, headers=response.headers, stream=Counted(response.stream),
                                   extensions=response.extensions, request=request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def go() -> Any:
        with anyio.fail_after(settings.mcp_timeout_s):
            async with httpx2.AsyncClient(transport=Guarded(), headers=server.headers, follow_redirects=False,
                                          timeout=settings.mcp_timeout_s) as http, \
                    Client(streamable_http_client(server.url, http_client=http),
                           read_timeout_seconds=settings.mcp_timeout_s) as client:
                return await work(client)

    try:
        return anyio.run(go)
    except BaseException as exc:  # every failure of a remote server becomes an item error
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        leaf = _leaf(exc)
        if isinstance(leaf, McpFailure):
            raise leaf from None
        if isinstance(leaf, TimeoutError):
            raise _http_error(504, f"The MCP server did not answer within {settings.mcp_timeout_s:g} s.") from None
        if isinstance(leaf, _TooLarge):
            raise _http_error(502, f"The MCP server's answer is over {limit:,} bytes.") from None
        failed = [s for s in statuses if s >= 400]
        if failed:
            raise _http_error(failed[-1], f"The MCP server answered HTTP {failed[-1]}.") from None
        if isinstance(leaf, MCPError):
            raise McpFailure({"type": "mcp_protocol_error", "code": leaf.code, "message": leaf.message}) from None
        if isinstance(leaf, httpx2.TransportError | OSError):
            raise _http_error(502, f"The MCP server could not be reached ({type(leaf).__name__}).") from None
        logger.warning("MCP server %s failed: %s", server.label, type(leaf).__name__)
        raise _http_error(502, f"The MCP server failed ({type(leaf).__name__}).") from None


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (anyio wraps task failures in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
