"""The Response object (SDK ``types/responses/response.py``; OPENAI-COMPAT.md §4 "Response object").

:class:`ResponseState` is a response being produced; :meth:`ResponseState.body` renders it. Stored bodies always
carry ``file_search_call.results``; :func:`visible` removes them unless the caller included them (OpenAI returns
``"results": null`` without ``include: ["file_search_call.results"]``).

Engram's ``memory_search_call`` item (what memory recall found, :mod:`chalicelib.responses.memory`) is in
``output`` only when the request asked for it with ``include: ["memory_search_call.results"]``, and then with its
results; a reader that does not include it never sees the item at all (:func:`visible`, :func:`visible_items`),
so clients that validate ``output`` against OpenAI's item types strictly are never shown an unknown type.

``usage`` holds the backend-reported tokens summed over every model call made for the response — answer calls and
summarization calls — with OpenAI's required details, plus two Engram fields: ``model_calls`` (calls made for the
answer), ``summary`` (null, or the conversation summary used: model, calls and tokens spent on it now — zero
when a cached summary was reused — and estimated history sizes; see :mod:`chalicelib.responses.summarize`) and
``memory`` (null when recall did not run, else what it did whether or not the item is shown: ``status``
``completed``/``failed``, counts of ``memories`` and ``exchanges`` recalled and their ``ids``, embedding
tokens, tokens injected into the instructions, milliseconds, and the remember job's ``memory_job_id``; see
:func:`chalicelib.responses.memory.usage_of`). ``usage`` is null while the response is in progress."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chalicelib.chat.base import Usage
from chalicelib.wire import ResponseStatus


@dataclass
class ResponseState:
    """A response in the making. ``echo`` holds the request fields the object repeats (instructions, tools,
    tool_choice, metadata, …); ``output`` the items so far; ``usage`` the answer calls' tokens."""

    id: str
    model: str
    echo: dict[str, Any]
    created_at: int = field(default_factory=lambda: int(time.time()))
    status: ResponseStatus = "in_progress"
    output: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    summary_usage: dict[str, Any] | None = None
    memory_usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    completed_at: int | None = None

    def finish(self, status: ResponseStatus) -> None:
        """Mark the response terminal (``completed``, ``incomplete`` or ``failed``) now."""
        self.status = status
        self.completed_at = int(time.time()) if status == "completed" else None

    def body(self, *, include_results: bool = True, include_memory: bool = True,
             with_output: bool = True) -> dict[str, Any]:
        """The Response object as JSON-ready dict (a copy), as :func:`visible` shows it: ``file_search_call``
        results hidden unless ``include_results``, ``memory_search_call`` items left out unless
        ``include_memory``. ``with_output`` false gives ``output: []`` (the ``response.created`` and
        ``response.in_progress`` snapshots, sent before any ``response.output_item.added``)."""
        body = {"id": self.id, "object": "response", "created_at": self.created_at, "status": self.status,
                "background": False, "error": self.error, "incomplete_details": self.incomplete_details,
                "completed_at": self.completed_at, "model": self.model,
                "output": self.output if with_output else [],
                "usage": self._usage() if self.status != "in_progress" else None, **self.echo}
        body = copy.deepcopy(body)
        return visible(body, include_results=include_results, include_memory=include_memory)

    def _usage(self) -> dict[str, Any]:
        spent = self.usage
        if self.summary_usage:
            spent = spent + Usage(self.summary_usage["input_tokens"], self.summary_usage["output_tokens"])
        return {"input_tokens": spent.input_tokens,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": spent.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": spent.input_tokens + spent.output_tokens,
                "model_calls": self.model_calls, "summary": self.summary_usage, "memory": self.memory_usage}


MEMORY_SEARCH_CALL = "memory_search_call"


def visible(body: dict[str, Any], *, include_results: bool, include_memory: bool = False) -> dict[str, Any]:
    """``body`` (a Response object) as a caller sees it: its ``output`` filtered by :func:`visible_items`
    (a shallow copy when anything changes; ``body`` itself is not modified)."""
    if include_results and include_memory:
        return body
    body = dict(body)
    body["output"] = visible_items(body.get("output") or [], include_results=include_results,
                                   include_memory=include_memory)
    return body


def visible_items(items: Iterable[dict[str, Any]], *, include_results: bool,
                  include_memory: bool = False) -> list[dict[str, Any]]:
    """``items`` (output, input or conversation items) as a caller sees them: ``memory_search_call`` items left
    out unless ``include_memory`` (then shown whole, results included); ``file_search_call.results`` null
    unless ``include_results`` (:func:`hide_results`); other items unchanged."""
    return [hide_results(item, include_results=include_results) for item in items
            if include_memory or not is_memory_item(item)]


def is_memory_item(item: dict[str, Any]) -> bool:
    """Whether ``item`` is Engram's ``memory_search_call`` item."""
    return item.get("type") == MEMORY_SEARCH_CALL


def hide_results(item: dict[str, Any], *, include_results: bool = False) -> dict[str, Any]:
    """A ``file_search_call`` item with ``results: null`` unless ``include_results`` (a copy); any other item
    unchanged (the same object)."""
    if item.get("type") == "file_search_call" and not include_results:
        return {**item, "results": None}
    return item


def deleted(response_id: str) -> dict[str, Any]:
    """The deletion acknowledgement ``{"id", "object": "response", "deleted": true}``."""
    return {"id": response_id, "object": "response", "deleted": True}
