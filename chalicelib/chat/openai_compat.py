"""A chat backend over any OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint (OpenAI, vLLM, Ollama,
LiteLLM ...), with httpx.

Wire format (OpenAI API reference, "Create chat completion" and "The chat completion chunk object"): messages with
``role`` system/user/assistant/tool, assistant ``tool_calls`` ``[{"id", "type": "function", "function": {"name",
"arguments"}}]``, tool turns with ``tool_call_id``; ``tools`` as ``[{"type": "function", "function": {"name",
"description", "parameters"}}]``. Streaming is Server-Sent Events: ``data: <chat.completion.chunk JSON>`` lines
ending with ``data: [DONE]``; tool calls arrive as deltas keyed by ``index`` (the first carrying ``id`` and
``function.name``, later ones pieces of ``function.arguments``); with ``stream_options.include_usage`` a last chunk
with ``"choices": []`` carries ``usage``.

Retries: 408/429/5xx, timeouts and connection errors are retried up to ``max_retries`` times with the embedding
client's timing — the official ``openai`` SDK's (``Retry-After``/``retry-after-ms`` honoured when in (0, 60] s, else
``min(0.5 · 2^attempt, 8)`` s × jitter in (0.75, 1]). A stream is retried only until its first delta has been
handed to the caller; after that a failure is raised as is.

Structured answers: a request's ``response_format`` is sent as is (``json_schema``, OpenAI's Structured Outputs).
A server that rejects it with a 400 naming ``response_format`` or ``json_schema`` (many OpenAI-compatible servers
only have JSON mode) is asked again with ``{"type": "json_object"}``, and this backend keeps using JSON mode.

Timeouts: ``timeout_s`` is httpx's connect/write/pool timeout and its *read* timeout — the longest wait for the
next bytes. A non-streaming answer arrives in one piece, so it bounds the whole call; a stream may run longer as
long as chunks keep coming.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult, TextDelta, ToolCall, Usage
from chalicelib.errors import InvalidRequestError, RateLimitError, UpstreamError, UpstreamTimeoutError
from chalicelib.http_retry import RETRYABLE_STATUS, backoff_s, retry_after_s, server_message

ENV_API_KEY = "ENGRAM_CHAT_API_KEY"

# Statuses meaning "the backend rejected this request": passed through as 400 with the backend's message.
_REJECTED_STATUS = frozenset({400, 404, 413, 422})
# OpenAI's own API rejects ``max_tokens`` for its reasoning models and documents ``max_completion_tokens`` as the
# replacement (API reference, "Create chat completion"); most other servers (Ollama, older vLLM) read ``max_tokens``.
_OPENAI_HOSTS = ("api.openai.com",)
_FINISH_REASONS = frozenset({"stop", "tool_calls", "length", "content_filter"})


class OpenAICompatBackend:
    """:class:`~chalicelib.chat.base.ChatBackend` over Chat Completions.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or ``http://localhost:11434/v1`` (Ollama).
        api_key: sent as ``Authorization: Bearer``; None sends no header (local servers).
        timeout_s: httpx timeout, seconds (see the module docstring for what it bounds).
        max_retries: retries after the first attempt (408/429/5xx, timeouts, connection errors).
        client: an ``httpx.Client`` to send with; default: built on first use and kept (thread-safe, pooled).
        sleep: called with the wait in seconds between retries (tests inject a recorder).
    """

    def __init__(self, *, base_url: str, api_key: str | None = None, timeout_s: float = 120.0, max_retries: int = 2,
                 client: httpx.Client | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout_s)
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._client = client
        self._lock = threading.Lock()
        self._sleep = sleep
        self._max_tokens_field = ("max_completion_tokens" if any(h in base_url for h in _OPENAI_HOSTS)
                                  else "max_tokens")
        self._json_schema = True  # False once the server refused a json_schema response_format

    def _http(self) -> httpx.Client:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = httpx.Client(timeout=self._timeout)
        return self._client

    # --- public API ---
    def complete(self, request: ChatRequest) -> ChatResult:
        """One complete answer (``stream: false``).

        Raises:
            InvalidRequestError: the backend rejected the request (HTTP 400/404/413/422), with its message.
            RateLimitError: still 429 after the retries.
            UpstreamTimeoutError: the last attempt timed out (``timeout_s``) or answered 408.
            UpstreamError: 5xx / connection failure after retries, a rejected API key, a malformed answer.
        """
        try:
            return self._complete(request)
        except InvalidRequestError as exc:
            if not self._json_schema or not _schema_refused(request, exc):
                raise
            self._json_schema = False  # JSON mode from now on (module docstring)
            return self._complete(request)

    def _complete(self, request: ChatRequest) -> ChatResult:
        body = self._body(request, stream=False)
        attempt = 0
        while True:
            try:
                response = self._http().post(self._url, json=body, headers=self._headers(), timeout=self._timeout)
            except httpx.TransportError as exc:
                attempt = self._retry_or_raise(self._transport_error(exc, request, attempt + 1), attempt, None)
                continue
            if not response.is_success:
                attempt = self._retry_or_raise(self._status_error(response, request, attempt + 1), attempt, response)
                continue
            return self._parse(response, request)

    def stream(self, request: ChatRequest) -> Iterator[TextDelta | ChatResult]:
        """Text deltas as they arrive, then one :class:`ChatResult` with the whole text, the assembled tool calls,
        the finish reason and usage (zeros when the server ignores ``stream_options.include_usage``).

        Raises the same errors as :meth:`complete`, lazily (when iterated), before or during the stream.
        """
        body = self._body(request, stream=True)
        attempt = 0
        while True:
            assembler = _StreamAssembler()
            yielded = False
            try:
                with self._http().stream("POST", self._url, json=body, headers=self._headers(),
                                         timeout=self._timeout) as response:
                    if not response.is_success:
                        response.read()
                        attempt = self._retry_or_raise(self._status_error(response, request, attempt + 1), attempt,
                                                       response)
                        continue
                    for data in _sse_data(response.iter_lines()):
                        piece = assembler.feed(_decode_chunk(data, request.model))
                        if piece:
                            yielded = True
                            yield TextDelta(piece)
                    if assembler.finish is None:
                        raise UpstreamError(f"The chat backend's stream for model {request.model!r} ended before "
                                            "its finish_reason.")
            except httpx.TransportError as exc:
                error = self._transport_error(exc, request, attempt + 1)
                if yielded:
                    raise error from exc
                attempt = self._retry_or_raise(error, attempt, None)
                continue
            yield assembler.result()
            return

    # --- request ---
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model, "messages": [_message(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                               "parameters": t.parameters}} for t in request.tools]
            body["tool_choice"] = _tool_choice(request.tool_choice)
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_output_tokens is not None:
            body[self._max_tokens_field] = request.max_output_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.response_format is not None:
            body["response_format"] = (request.response_format if self._json_schema
                                       or request.response_format.get("type") != "json_schema"
                                       else {"type": "json_object"})
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    # --- errors and retries ---
    def _retry_or_raise(self, error: Exception, attempt: int, response: httpx.Response | None) -> int:
        """Sleep and return the next attempt number when ``error`` is retryable and retries remain; else raise."""
        retryable = response is None or response.status_code in RETRYABLE_STATUS
        if not retryable or attempt >= self._max_retries:
            raise error
        wait = retry_after_s(response.headers) if response is not None else None
        self._sleep(wait if wait is not None else backoff_s(attempt))
        return attempt + 1

    def _transport_error(self, exc: httpx.TransportError, request: ChatRequest, attempts: int) -> Exception:
        if isinstance(exc, httpx.TimeoutException):
            return UpstreamTimeoutError(f"The chat backend did not answer for model {request.model!r} within "
                                        f"{self._timeout_s:g} s ({attempts} attempts).")
        return UpstreamError(f"Could not reach the chat backend for model {request.model!r} ({attempts} attempts): "
                             f"{type(exc).__name__}: {exc}")

    def _status_error(self, response: httpx.Response, request: ChatRequest, attempts: int) -> Exception:
        status = response.status_code
        message, code = server_message(response)
        if status in _REJECTED_STATUS:
            param = "model" if status == 404 else None
            return InvalidRequestError(f"The chat backend rejected the request (HTTP {status}): {message}",
                                       param=param, code=code or ("model_not_found" if status == 404 else None))
        if status in (401, 403):
            return UpstreamError(f"The chat backend rejected Engram's credentials (HTTP {status}): {message}. "
                                 f"Set {ENV_API_KEY} to a valid key for this service.")
        if status == 429:
            return RateLimitError(f"The chat backend is rate limiting model {request.model!r} after {attempts} "
                                  f"attempts: {message}")
        if status == 408:
            return UpstreamTimeoutError(f"The chat backend timed out (HTTP 408) after {attempts} attempts.")
        return UpstreamError(f"The chat backend failed for model {request.model!r} (HTTP {status}) after "
                             f"{attempts} attempts: {message}")

    # --- response ---
    def _parse(self, response: httpx.Response, request: ChatRequest) -> ChatResult:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            message = choice["message"]
            calls = tuple(ToolCall(id=c.get("id") or f"call_{i}", name=c["function"]["name"],
                                   arguments=c["function"].get("arguments") or "")
                          for i, c in enumerate(message.get("tool_calls") or []))
            text = message.get("content") or ""
            usage = _usage(payload.get("usage"))
            finish = choice.get("finish_reason")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise UpstreamError(f"The chat backend returned a malformed answer for model {request.model!r}.") from exc
        if not isinstance(text, str):
            raise UpstreamError(f"The chat backend returned non-text content for model {request.model!r}.")
        return ChatResult(text=text, tool_calls=calls, finish_reason=_finish(finish, calls), usage=usage)


class _StreamAssembler:
    """Accumulates ``chat.completion.chunk`` payloads into the final :class:`ChatResult`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, str]] = []
        self._slot: dict[int, int] = {}  # delta index → position in self.calls
        self.finish: str | None = None
        self.usage = Usage()

    def feed(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; return its text delta ('' when none)."""
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        piece = ""
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                piece += content
            for position, call in enumerate(delta.get("tool_calls") or []):
                self._feed_call(call, position)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        if piece:
            self.text.append(piece)
        return piece

    def _feed_call(self, call: dict[str, Any], position: int) -> None:
        index = call.get("index", position)
        function = call.get("function") or {}
        slot = self._slot.get(index)
        # A new id at a known index starts a new call (some servers send every parallel call with index 0).
        if slot is None or (call.get("id") and self.calls[slot]["id"] and call["id"] != self.calls[slot]["id"]):
            self.calls.append({"id": "", "name": "", "arguments": ""})
            slot = self._slot[index] = len(self.calls) - 1
        entry = self.calls[slot]
        if call.get("id"):
            entry["id"] = call["id"]
        if function.get("name"):
            entry["name"] = function["name"]
        if function.get("arguments"):
            entry["arguments"] += function["arguments"]

    def result(self) -> ChatResult:
        calls = tuple(ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
                      for i, c in enumerate(self.calls))
        return ChatResult(text="".join(self.text), tool_calls=calls, finish_reason=_finish(self.finish, calls),
                          usage=self.usage)


def _message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["content"] = message.content or ""
    elif out["content"] is None and message.role != "assistant":
        out["content"] = ""
    return out


def _schema_refused(request: ChatRequest, error: InvalidRequestError) -> bool:
    """Whether the backend refused the request's ``json_schema`` response format (a 400 naming it)."""
    if request.response_format is None or request.response_format.get("type") != "json_schema":
        return False
    message = error.message.lower()
    return "response_format" in message or "json_schema" in message


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """Chat Completions' ``tool_choice``: the strings pass through; ``{"name": n}`` (or Responses'
    ``{"type": "function", "name": n}``) becomes ``{"type": "function", "function": {"name": n}}``."""
    if isinstance(choice, dict):
        name = choice.get("name") or (choice.get("function") or {}).get("name")
        return {"type": "function", "function": {"name": name}}
    return choice


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(input_tokens=int(raw.get("prompt_tokens") or 0), output_tokens=int(raw.get("completion_tokens") or 0))


def _finish(reason: str | None, calls: tuple[ToolCall, ...]) -> str:
    """Normalised finish reason: servers that call tools but report ``stop`` (Ollama does) → ``tool_calls``;
    missing or unknown reasons → ``stop`` (``tool_calls`` when there are calls)."""
    if calls and reason in (None, "stop", "function_call"):
        return "tool_calls"
    return reason if reason in _FINISH_REASONS else ("tool_calls" if calls else "stop")


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The ``data`` payloads of an SSE stream (multi-line data joined with newlines), up to ``[DONE]``."""
    buffer: list[str] = []
    for line in lines:
        if not line:
            if buffer:
                data = "\n".join(buffer)
                buffer = []
                if data.strip() == "[DONE]":
                    return
                yield data
            continue
        if line.startswith(":"):
            continue
        field_name, _, value = line.partition(":")
        if field_name == "data":
            buffer.append(value[1:] if value.startswith(" ") else value)
    if buffer and "\n".join(buffer).strip() != "[DONE]":
        yield "\n".join(buffer)


def _decode_chunk(data: str, model: str) -> dict[str, Any]:
    """One chunk's JSON; an in-stream ``{"error": ...}`` (vLLM, LiteLLM send these) raises UpstreamError."""
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise UpstreamError(f"The chat backend sent a malformed stream chunk for model {model!r}.") from exc
    if not isinstance(chunk, dict):
        raise UpstreamError(f"The chat backend sent a malformed stream chunk for model {model!r}.")
    if chunk.get("error"):
        err = chunk["error"]
        message = err.get("message") if isinstance(err, dict) else str(err)
        raise UpstreamError(f"The chat backend failed mid-stream for model {model!r}: {message}")
    return chunk
