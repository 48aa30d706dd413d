"""Response items on the wire (input and output) and the chat messages a conversation of items becomes.

Items are plain dicts in OpenAI's shapes (SDK ``types/responses``): ``message`` (``msg_``), ``file_search_call``
(``fs_``), ``function_call`` (``fc_``; ``call_id`` links it to the client's ``function_call_output``, ``fco_``),
and the ``mcp`` tool's ``mcp_list_tools`` (``mcpl_``), ``mcp_call`` (``mcp_``), ``mcp_approval_request``
(``mcpr_``) and the client's ``mcp_approval_response``.
Stored items always keep ``file_search_call.results``; :mod:`objects` removes them when not included. Engram's
``memory_search_call`` item is never an input item (:func:`input_items` drops one sent back) and never becomes a
chat message (:func:`to_messages` skips it): what recall found reaches the model only through the instructions.

Chat mapping (Chat Completions rules: every assistant ``tool_calls`` entry is answered by a ``tool`` message that
follows it): consecutive call items form one assistant message (joined to the assistant text just before them);
a ``file_search_call`` is answered by its results (formatted by :mod:`tools`), a ``function_call`` by the
client's ``function_call_output``, an ``mcp_call`` by its output or error; ``mcp_list_tools`` and the approval items
stand for no message (the tools are offered, an approved call becomes an ``mcp_call``); ``developer`` messages become
``system`` messages.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from chalicelib import ids
from chalicelib.chat.base import ChatMessage, ToolCall
from chalicelib.errors import InvalidRequestError
from chalicelib.responses import schemas
from chalicelib.wire import FileSearchResult, ItemStatus

FUNCTION_CALL = "fc_"
FUNCTION_CALL_OUTPUT = "fco_"
CALL = "call_"
FILE_SEARCH_TOOL = "file_search"  # the function name the model calls to search


def message(text: str, *, status: ItemStatus = "completed", annotations: list[dict[str, Any]] | None = None,
            item_id: str | None = None) -> dict[str, Any]:
    """An assistant ``message`` output item with one ``output_text`` part."""
    return {"id": item_id or ids.new_id(ids.MESSAGE), "type": "message", "role": "assistant", "status": status,
            "content": [output_text(text, annotations or [])]}


def output_text(text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}


def file_search_call(queries: list[str], *, status: ItemStatus = "in_progress",
                     results: list[FileSearchResult] | None = None, item_id: str | None = None) -> dict[str, Any]:
    """A ``file_search_call`` output item; ``results`` entries are ``{file_id, filename, score, text, attributes}``."""
    return {"id": item_id or ids.new_id(ids.FILE_SEARCH_CALL), "type": "file_search_call", "status": status,
            "queries": queries, "results": results}


def function_call(call_id: str, name: str, arguments: str, *, status: ItemStatus = "completed") -> dict[str, Any]:
    """A ``function_call`` output item the client is to execute."""
    return {"id": ids.new_id(FUNCTION_CALL), "type": "function_call", "status": status,
            "call_id": call_id or ids.new_id(CALL), "name": name, "arguments": arguments}


def mcp_list_tools(server_label: str, tools: list[dict[str, Any]], *, error: str | None = None,
                   item_id: str | None = None) -> dict[str, Any]:
    """An ``mcp_list_tools`` item: the server's (allowed) tools, ``{name, description, input_schema, annotations}``."""
    return {"id": item_id or ids.new_id(ids.MCP_LIST_TOOLS), "type": "mcp_list_tools", "server_label": server_label,
            "tools": tools, "error": error}


def mcp_call(server_label: str, name: str, arguments: str, *, status: str = "in_progress",
             output: str | None = None, error: dict[str, Any] | None = None, approval_request_id: str | None = None,
             item_id: str | None = None) -> dict[str, Any]:
    """An ``mcp_call`` item; ``error`` in OpenAI's ``McpToolCallError`` shapes (``mcp_protocol_error``,
    ``mcp_tool_execution_error``, ``http_error``)."""
    return {"id": item_id or ids.new_id(ids.MCP_CALL), "type": "mcp_call", "server_label": server_label,
            "name": name, "arguments": arguments, "output": output, "error": error, "status": status,
            "approval_request_id": approval_request_id}


def mcp_approval_request(server_label: str, name: str, arguments: str, *,
                         item_id: str | None = None) -> dict[str, Any]:
    """An ``mcp_approval_request`` item: the call the model asked for, waiting for the client's
    ``mcp_approval_response``."""
    return {"id": item_id or ids.new_id(ids.MCP_APPROVAL_REQUEST), "type": "mcp_approval_request",
            "server_label": server_label, "name": name, "arguments": arguments}


def input_items(parsed: Iterable[schemas.InputItem]) -> list[dict[str, Any]]:
    """The request's input items in their stored/listed shape, each with an id (the client's when given);
    ``memory_search_call`` items are dropped (see :class:`schemas.MemorySearchCallItem`), so the list may be
    shorter than ``parsed``, even empty."""
    out: list[dict[str, Any]] = []
    for item in parsed:
        if isinstance(item, schemas.MessageItem):
            out.append(_input_message(item))
        elif isinstance(item, schemas.FunctionCallItem):
            out.append({"id": item.id or ids.new_id(FUNCTION_CALL), "type": "function_call", "status": "completed",
                        "call_id": item.call_id, "name": item.name, "arguments": item.arguments})
        elif isinstance(item, schemas.FunctionCallOutputItem):
            output = item.output if isinstance(item.output, str) else [{"type": p.type, "text": p.text}
                                                                       for p in item.output]
            out.append({"id": item.id or ids.new_id(FUNCTION_CALL_OUTPUT), "type": "function_call_output",
                        "status": "completed", "call_id": item.call_id, "output": output})
        elif isinstance(item, schemas.FileSearchCallItem):
            results = None if item.results is None else [
                FileSearchResult(file_id=r.file_id, filename=r.filename, score=r.score, text=r.text,
                                 attributes=r.attributes) for r in item.results]
            out.append(file_search_call(list(item.queries), status="completed", results=results, item_id=item.id))
        elif isinstance(item, schemas.McpListToolsItem):
            out.append(mcp_list_tools(item.server_label, list(item.tools), error=item.error, item_id=item.id))
        elif isinstance(item, schemas.McpCallItem):
            error = {"type": "mcp_tool_execution_error", "content": item.error} if isinstance(item.error, str) \
                else item.error
            out.append(mcp_call(item.server_label, item.name, item.arguments, status=item.status or "completed",
                                output=item.output, error=error, approval_request_id=item.approval_request_id,
                                item_id=item.id))
        elif isinstance(item, schemas.McpApprovalRequestItem):
            out.append(mcp_approval_request(item.server_label, item.name, item.arguments, item_id=item.id))
        elif isinstance(item, schemas.McpApprovalResponseItem):
            out.append({"id": item.id or ids.new_id(ids.MCP_APPROVAL_RESPONSE), "type": "mcp_approval_response",
                        "approval_request_id": item.approval_request_id, "approve": item.approve,
                        "reason": item.reason})
    return out


def _input_message(item: schemas.MessageItem) -> dict[str, Any]:
    item_id = item.id or ids.new_id(ids.MESSAGE)
    parts = [schemas.InputText(type="input_text", text=item.content)] if isinstance(item.content, str) else item.content
    if item.role == "assistant":
        content = [output_text(_part_text(p), []) if p.type != "refusal" else p.model_dump() for p in parts]
        return {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": content}
    content = [{"type": "input_text", "text": _part_text(p)} for p in parts]
    return {"id": item_id, "type": "message", "role": item.role, "status": "completed", "content": content}


def _part_text(part: Any) -> str:
    return part.refusal if part.type == "refusal" else part.text


def text_of(item: dict[str, Any]) -> str:
    """The text of a ``message`` item (its text parts joined by newlines; refusals included)."""
    texts = []
    for part in item.get("content") or []:
        if part.get("type") in ("input_text", "output_text"):
            texts.append(part.get("text") or "")
        elif part.get("type") == "refusal":
            texts.append(part.get("refusal") or "")
    return "\n".join(texts)


def _output_of(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    return "\n".join(p.get("text", "") for p in output or [] if isinstance(p, dict))


def to_messages(items: Iterable[dict[str, Any]]) -> list[ChatMessage]:
    """The chat messages a sequence of items (inputs and outputs, in conversation order) stands for;
    ``memory_search_call`` items stand for none (recall's block is in the instructions)."""
    from chalicelib.responses.citations import format_results

    out: list[ChatMessage] = []
    answers: list[ChatMessage] = []  # tool messages answering the open group's file_search calls
    group_open = False
    for item in items:
        kind = item.get("type")
        if kind in ("memory_search_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"):
            continue
        if kind in ("function_call", "file_search_call", "mcp_call"):
            if kind == "mcp_call":
                call = ToolCall(id=item["id"], name=item["name"], arguments=item.get("arguments") or "")
                answers.append(ChatMessage("tool", mcp_answer(item), tool_call_id=item["id"]))
            elif kind == "file_search_call":
                call = ToolCall(id=item["id"], name=FILE_SEARCH_TOOL,
                                arguments=json.dumps({"queries": item.get("queries") or []}))
                answers.append(ChatMessage("tool", format_results(item.get("queries") or [], item.get("results")),
                                           tool_call_id=item["id"]))
            else:
                call = ToolCall(id=item["call_id"], name=item["name"], arguments=item.get("arguments") or "")
            if out and out[-1].role == "assistant" and (group_open or not out[-1].tool_calls):
                out[-1] = dataclasses.replace(out[-1], tool_calls=out[-1].tool_calls + (call,))
            else:
                out.append(ChatMessage("assistant", None, (call,)))
            group_open = True
            continue
        if group_open:
            out.extend(answers)
            answers, group_open = [], False
        if kind == "function_call_output":
            out.append(ChatMessage("tool", _output_of(item), tool_call_id=item["call_id"]))
        elif kind == "message":
            role = item.get("role", "user")
            out.append(ChatMessage("system" if role == "developer" else role, text_of(item)))
    out.extend(answers)
    return out


def mcp_answer(item: dict[str, Any]) -> str:
    """What the model is told an ``mcp_call`` returned: its output, or its error."""
    if item.get("error"):
        error = item["error"]
        detail = error.get("message") or json.dumps(error.get("content"))[:4000] if isinstance(error, dict) \
            else str(error)
        return f"The MCP tool call failed: {detail}"
    return item.get("output") or ""


def check_tool_outputs(messages: list[ChatMessage], *, param: str = "input") -> None:
    """Refuse a conversation a chat backend would refuse: a function call never answered, or an output that
    answers no call (OpenAI's messages).

    Raises:
        InvalidRequestError: (400, ``param``) an unanswered call or an orphan output.
    """
    pending: dict[str, str] = {}
    for msg in messages:
        for call in msg.tool_calls:
            pending[call.id] = call.name
        if msg.role == "tool":
            if msg.tool_call_id not in pending:
                raise InvalidRequestError(
                    f"No tool call found for function call output with call_id {msg.tool_call_id}.", param=param)
            del pending[msg.tool_call_id]
        elif pending and not msg.tool_calls:
            break
    if pending:
        raise InvalidRequestError(f"No tool output found for function call {next(iter(pending))}.", param=param)
