"""The agentic loop: model → server-side ``file_search`` calls → results back to the model → … → final answer.

Each model call streams; its text becomes an assistant ``message`` item (citation markers stripped into
``file_citation`` annotations as the text arrives), its ``file_search`` calls become ``file_search_call`` items
run here against the request's stores only, its function calls become ``function_call`` items for the client.
The loop ends when a model call runs no search: it answered, asked the client to run functions (their outputs
come back in the next request, chained by ``previous_response_id``), or was cut off (``length`` /
``content_filter`` → ``incomplete``).

Tool budget, as OpenAI's ``max_tool_calls`` (built-in tool calls only; reaching it changes neither ``status`` nor
``incomplete_details``): once spent, ``file_search`` is no longer offered and any further search call the model
makes is ignored, so its next answer is final. Without ``max_tool_calls`` the budget is
:data:`DEFAULT_MAX_TOOL_CALLS`. A forced ``tool_choice`` (``required``, a function, ``file_search``) applies to the
first model call only; later calls use ``auto`` (otherwise a forced search would never end).
``parallel_tool_calls: false`` keeps only the first call of a model turn.

Remote MCP servers (the ``mcp`` tool, :mod:`mcp_tool`): before the first model call their tools are listed (or
reused from the context) and the calls the request's approvals answer are run; their tools are offered beside the
functions, their calls run in the loop like searches (and count toward the budget), and a call that needs approval
ends the response after that model turn with an ``mcp_approval_request`` item.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from chalicelib import observability
from chalicelib.chat.base import ChatBackend, ChatMessage, ChatRequest, ChatResult, TextDelta, ToolCall, ToolSpec
from chalicelib.errors import InvalidRequestError, UpstreamError
from chalicelib.responses import citations, items, tools
from chalicelib.responses.citations import CitationStripper
from chalicelib.responses.events import Emitter
from chalicelib.responses.objects import ResponseState, hide_results

# Built-in tool calls per response when the request sets no max_tool_calls (Engram's cap; OpenAI's is unstated).
logger = logging.getLogger("engram.responses")

# The metric a failed file_search counts (the response goes on: _search).
SEARCH_FAILURES = "FileSearchFailures"
DEFAULT_MAX_TOOL_CALLS = 10


@dataclass(frozen=True)
class LoopConfig:
    """Everything one response's loop needs. ``messages`` is the conversation so far (system prompt, history,
    the new input); ``sources`` the citable files already seen (file id → filename); ``tool_choice`` applies to
    the first model call; ``response_format`` (the request's ``text.format`` in Chat Completions' shape, None for
    plain text) to every call."""

    backend: ChatBackend
    model: str
    messages: tuple[ChatMessage, ...]
    function_tools: tuple[ToolSpec, ...] = ()
    file_search: tools.FileSearch | None = None
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    include_results: bool = False
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    response_format: dict[str, Any] | None = None
    mcp: Any = None  # the request's MCP servers (mcp_tool.Setup), None without mcp tools


def run(config: LoopConfig, state: ResponseState, emit: Emitter) -> Iterator[dict[str, Any]]:
    """Run the loop, appending output items to ``state`` (and adding to its usage), yielding stream events.

    Raises:
        UpstreamError / UpstreamTimeoutError / RateLimitError / InvalidRequestError: from the backend or the
            search (the caller turns them into ``response.failed``).
    """
    messages = list(config.messages)
    sources = dict(config.sources)
    budget = config.max_tool_calls
    choice: str | dict[str, Any] = config.tool_choice
    function_names = {spec.name for spec in config.function_tools}
    remote = None
    if config.mcp is not None:
        from chalicelib.responses import mcp_tool

        remote, notes = yield from mcp_tool.offer(config.mcp, state, emit, function_names)
        if notes:
            messages = _with_system_note(messages, "\n".join(notes))
        messages.extend(items.to_messages((yield from mcp_tool.run_approved(config.mcp, state, emit))))
    while True:
        searchable = config.file_search is not None and budget > 0 and choice != "none"
        offered = ([tools.SPEC] if searchable else []) + list(config.function_tools)
        if remote is not None and budget > 0 and choice != "none":
            offered += remote.specs()
        if not offered or (choice == {"name": items.FILE_SEARCH_TOOL} and not searchable):
            choice = "none" if not offered else "auto"
        request = ChatRequest(model=config.model, messages=tuple(messages), tools=tuple(offered),
                              tool_choice=choice, parallel_tool_calls=config.parallel_tool_calls,
                              max_output_tokens=config.max_output_tokens, temperature=config.temperature,
                              top_p=config.top_p, response_format=config.response_format)
        result, message = yield from _model_call(config.backend, request, state, emit, sources)
        calls = [c for c in result.tool_calls
                 if (c.name == items.FILE_SEARCH_TOOL and searchable) or c.name in function_names
                 or (remote is not None and c.name in remote.tools)]
        if not config.parallel_tool_calls:
            calls = calls[:1]
        step = [message] if message is not None else []
        searched = called = 0
        pending = False
        for call in calls:
            if remote is not None and call.name in remote.tools and call.name not in function_names:
                if searched >= budget:
                    continue  # over max_tool_calls: ignored, as a search is
                searched += 1
                item = yield from mcp_tool.handle_call(config.mcp, remote, call, state, emit)
                pending = pending or item["type"] == "mcp_approval_request"
            elif call.name == items.FILE_SEARCH_TOOL:
                if searched >= budget:
                    continue  # over max_tool_calls: ignored, as OpenAI does
                searched += 1
                item = yield from _search(config, call, state, emit)
                sources.update(citations.sources(item["results"]))
            else:
                called += 1
                item = yield from _function_call(call, state, emit)
            step.append(item)
        budget -= searched
        messages.extend(items.to_messages(step))
        if result.finish_reason in ("length", "content_filter"):
            reason = "max_output_tokens" if result.finish_reason == "length" else "content_filter"
            state.incomplete_details = {"reason": reason}
            return
        if called or pending or not searched:
            return
        choice = "auto"


def _with_system_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """``messages`` with ``note`` added to the system prompt (one is made when there is none)."""
    if messages and messages[0].role == "system":
        return [ChatMessage("system", f"{messages[0].content}\n\n{note}"), *messages[1:]]
    return [ChatMessage("system", note), *messages]


def _model_call(backend: ChatBackend, request: ChatRequest, state: ResponseState, emit: Emitter,
                sources: dict[str, str]) -> Generator[dict[str, Any], None, tuple[ChatResult, dict[str, Any] | None]]:
    """Stream one model call; its text becomes a message item (opened at the first visible character).
    Returns ``(ChatResult, message item or None)``."""
    stripper = CitationStripper(sources)
    message: dict[str, Any] | None = None
    index = -1
    result: ChatResult | None = None

    def handle(pieces: list[tuple[str, Any]]) -> Iterator[dict[str, Any]]:
        nonlocal message, index
        for kind, value in pieces:
            if message is None:
                message = items.message("", status="in_progress")
                message["content"] = []
                index = len(state.output)
                state.output.append(message)
                yield emit.item_added(index, message)
                message["content"] = [items.output_text("", [])]
                yield emit.part_added(index, message["id"], message["content"][0])
            if kind == "delta":
                message["content"][0]["text"] += value
                yield emit.text_delta(index, message["id"], value)
            else:
                annotations = message["content"][0]["annotations"]
                annotations.append(value)
                yield emit.annotation(index, message["id"], len(annotations) - 1, value)

    streamed = False
    for piece in backend.stream(request):
        if isinstance(piece, TextDelta):
            streamed = streamed or bool(piece.text)
            yield from handle(stripper.feed(piece.text))
        else:
            result = piece
    if result is None:
        raise UpstreamError(f"The chat backend's answer for model {request.model!r} ended without a result.")
    if not streamed and result.text:  # an answer only the result holds (Bedrock's forced JSON answer tool)
        yield from handle(stripper.feed(result.text))
    yield from handle(stripper.close())
    state.model_calls += 1
    state.usage = state.usage + result.usage
    if message is not None:
        part = message["content"][0]
        message["status"] = "incomplete" if result.finish_reason in ("length", "content_filter") else "completed"
        yield emit.text_done(index, message["id"], part["text"])
        yield emit.part_done(index, message["id"], part)
        yield emit.item_done(index, message)
    return result, message


def _search(config: LoopConfig, call: ToolCall, state: ResponseState,
            emit: Emitter) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """Run one ``file_search`` call as a ``file_search_call`` item; returns the item (results kept; hidden in
    events unless included). Arguments the model garbled, or a search that fails (the vector backend or the
    embedder down, a timeout: seed 003, "the model gets an error result and still answers"), make a ``failed`` item
    (``results`` null) the model is told about; the response goes on (logged, counted as ``FileSearchFailures``)."""
    try:
        queries, problem = tools.parse_queries(call.arguments), None
    except InvalidRequestError as exc:
        queries, problem = [], exc.message
    item = items.file_search_call(queries, status="in_progress")
    index = len(state.output)
    state.output.append(item)
    shown = (lambda i: i) if config.include_results else hide_results
    yield emit.item_added(index, shown(item))
    yield emit.file_search("in_progress", index, item["id"])
    if problem is None:
        yield emit.file_search("searching", index, item["id"])
        assert config.file_search is not None
        try:
            item["results"] = config.file_search.run(queries)
        except Exception:  # any failure of the search: the model answers without it
            logger.exception("file_search failed; the model is told and the response goes on")
            observability.record(SEARCH_FAILURES, 1, "Count")
            item["status"] = "failed"
        else:
            item["status"] = "completed"
            yield emit.file_search("completed", index, item["id"])
    else:
        item["status"] = "failed"
    yield emit.item_done(index, shown(item))
    return item


def _function_call(call: ToolCall, state: ResponseState,
                   emit: Emitter) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """A function call the client runs: ``function_call`` item with the model's call id and arguments."""
    item = items.function_call(call.id, call.name, "", status="in_progress")
    index = len(state.output)
    state.output.append(item)
    yield emit.item_added(index, item)
    if call.arguments:
        yield emit.arguments_delta(index, item["id"], call.arguments)
    item["arguments"] = call.arguments
    item["status"] = "completed"
    yield emit.arguments_done(index, item["id"], call.name, call.arguments)
    yield emit.item_done(index, item)
    return item
