"""The Response object (SDK ``types/responses/response.py``; OPENAI-COMPAT.md §4 "Response object").

:class:`ResponseState` is a response being produced; :meth:`ResponseState.body` renders it. Stored bodies always
carry ``file_search_call.results``; :func:`visible` removes them unless the caller included them (OpenAI returns
``"results": null`` without ``include: ["file_search_call.results"]``).

``usage`` holds the backend-reported tokens summed over every model call made for the response — answer calls and
summarization calls — with OpenAI's required details, plus two Engram fields: ``model_calls`` (calls made for the
answer), ``summary`` (null, or the conversation summary used: model, calls and tokens spent on it now — zero
when a cached summary was reused — and estimated history sizes; see :mod:`chalicelib.responses.summarize`) and
``memory`` (null, or what recall cost: embedding tokens, tokens injected into the instructions, milliseconds; see
:mod:`chalicelib.responses.memory`).
"""

from __future__ import annotations

import copy
import time
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

    def body(self, *, include_results: bool = True, include_memory: bool = True) -> dict[str, Any]:
        """The Response object as JSON-ready dict (a copy); search results hidden unless included."""
        body = {"id": self.id, "object": "response", "created_at": self.created_at, "status": self.status,
                "background": False, "error": self.error, "incomplete_details": self.incomplete_details,
                "completed_at": self.completed_at, "model": self.model, "output": self.output,
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


def visible(body: dict[str, Any], *, include_results: bool, include_memory: bool = False) -> dict[str, Any]:
    """``body`` as a caller sees it: ``file_search_call.results`` set to null unless ``include_results``,
    ``memory_search_call.results`` unless ``include_memory``."""
    if include_results and include_memory:
        return body
    body = dict(body)
    body["output"] = [hide_results(item, include_results=include_results, include_memory=include_memory)
                      for item in body.get("output") or []]
    return body


def hide_results(item: dict[str, Any], *, include_results: bool = False,
                 include_memory: bool = False) -> dict[str, Any]:
    """A ``file_search_call`` item with ``results: null`` unless ``include_results``, a ``memory_search_call``
    item likewise unless ``include_memory`` (other items unchanged)."""
    kind = item.get("type")
    if (kind == "file_search_call" and not include_results) or (kind == "memory_search_call"
                                                                 and not include_memory):
        return {**item, "results": None}
    return item


def deleted(response_id: str) -> dict[str, Any]:
    """The deletion acknowledgement ``{"id", "object": "response", "deleted": true}``."""
    return {"id": response_id, "object": "response", "deleted": True}
