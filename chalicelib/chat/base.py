"""The chat-backend interface the Responses loop talks to: provider-neutral messages, tool specs and results.

Shapes follow Chat Completions (OpenAI's ``/v1/chat/completions``): a conversation is ``list[ChatMessage]``; the
model answers with text and/or ``tool_calls``. Backends translate to their wire format (Chat Completions JSON,
Bedrock Converse) and raise Engram's own errors for anything that went wrong upstream (rendered in OpenAI's envelope
at the API boundary): ``UpstreamError`` (502, after retries), ``UpstreamTimeoutError`` (504), ``RateLimitError``
(429, upstream still rate-limiting after retries), ``InvalidRequestError`` (400, the backend rejected the request),
With no backend configured, routing raises an error naming ENGRAM_CHAT_BASE_URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for: ``id`` (backend's call id), ``name``, ``arguments`` (a JSON string,
    exactly as the model produced it — possibly invalid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One conversation message. ``content`` is text (None for an assistant turn that only calls tools);
    ``tool_calls`` only on assistant turns; ``tool_call_id`` only on ``tool`` turns (the call it answers)."""

    role: Role
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call: ``parameters`` is a JSON Schema object (dict)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as reported by the backend (tokens of the backend's own tokenizer)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One model call. ``tool_choice``: ``"auto" | "none" | "required"`` or ``{"name": ...}`` for one function;
    ``max_output_tokens``/``temperature``/``top_p`` are passed through when set. ``response_format`` asks for JSON
    in OpenAI's shape — ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` or
    ``{"type": "json_object"}`` (:func:`chalicelib.chat.structured.response_format`); a backend without it uses
    the nearest it has and the answer arrives as ``ChatResult.text`` either way."""

    model: str
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """The model's complete answer: ``text`` (may be empty), ``tool_calls`` (may be empty), ``finish_reason``
    (``stop``, ``tool_calls``, ``length``, ``content_filter``) and ``usage``."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A streamed piece of the answer's text (``stream()`` yields these, then one :class:`ChatResult`)."""

    text: str


class ChatBackend(Protocol):
    """A chat model endpoint. Implementations retry 429/5xx/timeouts themselves (bounded, with backoff)."""

    def complete(self, request: ChatRequest) -> ChatResult:
        """One complete answer. Raises UpstreamError / UpstreamTimeoutError / RateLimitError / InvalidRequestError."""
        ...

    def stream(self, request: ChatRequest) -> Iterator[TextDelta | ChatResult]:
        """Text deltas as they arrive, then exactly one final :class:`ChatResult` (full text, tool calls, usage).
        Raises the same errors as ``complete`` (before or during the stream)."""
        ...
