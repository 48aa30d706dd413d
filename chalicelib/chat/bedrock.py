"""A chat backend over Amazon Bedrock's Converse API (``bedrock-runtime`` ``Converse`` and ``ConverseStream``), via
boto3 — one request shape for every Bedrock chat model (Claude, Llama, Mistral, Nova ...).

Translation from the Chat-Completions-shaped :mod:`chalicelib.chat.base` (Bedrock API reference, "Converse",
``Message``/``ContentBlock``/``ToolConfiguration``):

- ``system`` messages → the top-level ``system`` list of ``{"text"}`` blocks (in order);
- ``user`` → ``{"role": "user", "content": [{"text"}]}``; ``assistant`` → text block plus one
  ``{"toolUse": {"toolUseId", "name", "input"}}`` per call (``input`` is the parsed arguments: a JSON object; other
  or invalid arguments are wrapped as ``{"arguments": <raw string>}``);
- ``tool`` → ``{"toolResult": {"toolUseId", "content": [{"text"}]}}`` in a *user* turn. Converse requires
  alternating roles, so adjacent turns of the same role (e.g. the results of parallel calls, then a user
  message) are merged into one message; empty text blocks (which Converse rejects) are dropped;
- ``tools`` → ``toolConfig.tools[].toolSpec{name, description, inputSchema.json}``; ``tool_choice`` ``auto`` is
  Converse's default (not sent), ``required`` → ``{"any": {}}``, a named function → ``{"tool": {"name"}}``,
  ``none`` → no tools are offered (unless the history holds tool blocks, which Converse only accepts together with
  a ``toolConfig``; the tools are then offered with the default choice). ``parallel_tool_calls`` has no Converse
  equivalent and is ignored; ``max_output_tokens``/``temperature``/``top_p`` → ``inferenceConfig``.
- Answers: text blocks are joined; ``toolUse`` blocks become :class:`ToolCall` (arguments re-encoded as JSON);
  ``stopReason`` ``end_turn``/``stop_sequence`` → ``stop``, ``tool_use`` → ``tool_calls``, ``max_tokens`` and
  ``model_context_window_exceeded`` → ``length``, ``guardrail_intervened``/``content_filtered`` →
  ``content_filter``; ``usage.inputTokens``/``outputTokens``.
- ``response_format`` (JSON answers): Converse has no JSON mode, so the answer is asked for as a forced tool call —
  one tool (:data:`ANSWER_TOOL`) whose ``inputSchema`` is the requested JSON schema (``{"type": "object"}`` for
  ``json_object``), chosen with ``toolChoice.tool`` — the structured-output recipe of the Bedrock user guide ("Use
  a tool to complete an Amazon Bedrock model response"). That call's input becomes the answer's text (JSON) and is
  not reported as a tool call. With function tools offered too, the answer tool is offered beside them and
  ``toolChoice`` is ``{"any": {}}`` (the model calls a function or gives the answer), unless a named function is
  chosen.

:meth:`BedrockBackend.stream` uses ``ConverseStream`` (text deltas as ``contentBlockDelta.delta.text``, tool input
as JSON pieces in ``delta.toolUse.input`` after a ``contentBlockStart.start.toolUse``; ``messageStop.stopReason``;
``metadata.usage``). Retries and timeouts are botocore's: ``standard`` retry mode (throttling, 5xx and transient
connection errors, exponential backoff with jitter) with ``total_max_attempts = max_retries + 1``, and
``connect_timeout``/``read_timeout`` = ``timeout_s`` seconds. boto3 is imported, and the client built, on first use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult, TextDelta, ToolCall, Usage
from chalicelib.errors import InvalidRequestError, RateLimitError, UpstreamError, UpstreamTimeoutError

# The tool a JSON answer is asked for through (module docstring, ``response_format``).
ANSWER_TOOL = "answer"

# AWS error codes (Bedrock Runtime API reference, "Converse" Errors; ConverseStream's in-stream exceptions carry
# the same names with a lower-case first letter, normalised before lookup).
_THROTTLING = frozenset({"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException",
                         "ModelNotReadyException"})
_INVALID = frozenset({"ValidationException", "ResourceNotFoundException"})
_TIMEOUT = frozenset({"ModelTimeoutException"})
_AUTH = frozenset({"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"})

_STOP_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
    "model_context_window_exceeded": "length", "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


class BedrockBackend:
    """:class:`~chalicelib.chat.base.ChatBackend` over Bedrock Converse; ``request.model`` is the Bedrock model id
    or inference profile (e.g. ``anthropic.claude-3-5-haiku-20241022-v1:0``, ``us.amazon.nova-lite-v1:0``).

    Args:
        region: AWS region of the Bedrock Runtime endpoint.
        timeout_s: botocore connect and read timeout, seconds (read: the longest wait for the next bytes).
        max_retries: retries after the first attempt (botocore ``standard`` mode).
        client: a boto3 ``bedrock-runtime`` client (tests pass one with ``endpoint_url`` at a fake server);
            default: built on first use.
        endpoint_url: a non-default Bedrock Runtime endpoint (VPC endpoint, tests) for the lazily built client.
    """

    def __init__(self, *, region: str = "us-east-1", timeout_s: float = 120.0, max_retries: int = 2,
                 client: Any = None, endpoint_url: str | None = None) -> None:
        self._region = region
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._client = client
        self._endpoint_url = endpoint_url

    def _get_client(self) -> Any:
        if self._client is None:
            from chalicelib import aws

            self._client = aws.client("bedrock-runtime", self._region, timeout_s=self._timeout_s,
                                      retries=self._max_retries, endpoint_url=self._endpoint_url)
        return self._client

    def complete(self, request: ChatRequest) -> ChatResult:
        """One complete answer (``Converse``).

        Raises:
            InvalidRequestError: ValidationException / unknown model (400), with Bedrock's message.
            RateLimitError: ThrottlingException after botocore's retries (429).
            UpstreamTimeoutError: ModelTimeoutException or a connect/read timeout (``timeout_s``) (504).
            UpstreamError: denied credentials, 5xx after retries, unreachable endpoint, malformed answer (502).
        """
        kwargs = converse_kwargs(request)
        with _translated(request.model, self._timeout_s, self._region):
            response = self._get_client().converse(**kwargs)
        try:
            blocks = response["output"]["message"]["content"]
            text = "".join(b["text"] for b in blocks if "text" in b)
            calls = tuple(ToolCall(id=b["toolUse"]["toolUseId"], name=b["toolUse"]["name"],
                                   arguments=json.dumps(b["toolUse"].get("input") or {}))
                          for b in blocks if "toolUse" in b)
            usage = _usage(response.get("usage"))
            finish = _STOP_REASONS.get(response.get("stopReason"), "tool_calls" if calls else "stop")
        except (KeyError, TypeError) as exc:
            raise UpstreamError(f"Bedrock returned a malformed answer for {request.model}.") from exc
        return _answered(request, ChatResult(text=text, tool_calls=calls, finish_reason=finish, usage=usage))

    def stream(self, request: ChatRequest) -> Iterator[TextDelta | ChatResult]:
        """Text deltas from ``ConverseStream`` as they arrive, then one :class:`ChatResult`. Raises what
        :meth:`complete` raises, lazily (when iterated), before or during the stream."""
        kwargs = converse_kwargs(request)
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        stop_reason: str | None = None
        usage = Usage()
        with _translated(request.model, self._timeout_s, self._region):
            response = self._get_client().converse_stream(**kwargs)
            for event in response["stream"]:
                if "contentBlockStart" in event:
                    start = event["contentBlockStart"]
                    tool = (start.get("start") or {}).get("toolUse")
                    if tool:
                        calls[start.get("contentBlockIndex", len(calls))] = {
                            "id": tool.get("toolUseId", ""), "name": tool.get("name", ""), "arguments": ""}
                elif "contentBlockDelta" in event:
                    block = event["contentBlockDelta"]
                    delta = block.get("delta") or {}
                    if delta.get("text"):
                        text.append(delta["text"])
                        yield TextDelta(delta["text"])
                    elif "toolUse" in delta:
                        index = block.get("contentBlockIndex", 0)
                        calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                        calls[index]["arguments"] += delta["toolUse"].get("input") or ""
                elif "messageStop" in event:
                    stop_reason = event["messageStop"].get("stopReason")
                elif "metadata" in event:
                    usage = _usage(event["metadata"].get("usage"))
        tool_calls = tuple(ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"] or "{}")
                           for i, c in enumerate(calls[k] for k in sorted(calls)))
        finish = _STOP_REASONS.get(stop_reason or "", "tool_calls" if tool_calls else "stop")
        yield _answered(request, ChatResult(text="".join(text), tool_calls=tool_calls, finish_reason=finish,
                                            usage=usage))


def converse_kwargs(request: ChatRequest) -> dict[str, Any]:
    """The keyword arguments of ``client.converse(...)`` / ``converse_stream(...)`` for ``request`` (see the
    module docstring for the mapping)."""
    system = [{"text": m.content} for m in request.messages if m.role == "system" and m.content]
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    for turn in messages:
        if not turn["content"]:
            turn["content"] = [{"text": " "}]  # Converse rejects empty content lists and blank text blocks
    kwargs: dict[str, Any] = {"modelId": request.model, "messages": messages}
    if system:
        kwargs["system"] = system
    inference = {key: value for key, value in (("maxTokens", request.max_output_tokens),
                                               ("temperature", request.temperature),
                                               ("topP", request.top_p)) if value is not None}
    if inference:
        kwargs["inferenceConfig"] = inference
    history_uses_tools = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
    offered = request.tools if request.tools and (request.tool_choice != "none" or history_uses_tools) else ()
    if request.response_format is not None and not offered:
        kwargs["toolConfig"] = {"tools": [_answer_tool(request.response_format)],
                                "toolChoice": {"tool": {"name": ANSWER_TOOL}}}
        return kwargs
    if offered:
        tool_config: dict[str, Any] = {"tools": [
            {"toolSpec": {"name": t.name, "description": t.description or t.name,
                          "inputSchema": {"json": t.parameters or {"type": "object", "properties": {}}}}}
            for t in offered]}
        choice = request.tool_choice
        if isinstance(choice, dict):
            name = choice.get("name") or (choice.get("function") or {}).get("name")
            tool_config["toolChoice"] = {"tool": {"name": name}}
        elif request.response_format is not None:  # a function or the answer: either way, a tool call
            tool_config["tools"].append(_answer_tool(request.response_format))
            tool_config["toolChoice"] = {"any": {}}
        elif choice == "required":
            tool_config["toolChoice"] = {"any": {}}
        kwargs["toolConfig"] = tool_config
    return kwargs


def _answer_tool(response_format: dict[str, Any]) -> dict[str, Any]:
    """The forced tool a JSON answer is asked through: the json_schema's schema, or any object."""
    schema = (response_format.get("json_schema") or {}).get("schema") if response_format.get("type") == "json_schema" \
        else None
    return {"toolSpec": {"name": ANSWER_TOOL, "description": "Give the answer as this JSON object.",
                         "inputSchema": {"json": schema or {"type": "object"}}}}


def _answered(request: ChatRequest, result: ChatResult) -> ChatResult:
    """A JSON answer's forced tool call as the answer's text (``response_format``), else ``result`` unchanged."""
    if request.response_format is None:
        return result
    for call in result.tool_calls:
        if call.name == ANSWER_TOOL:
            return ChatResult(text=call.arguments, tool_calls=(), finish_reason="stop" if result.finish_reason
                              == "tool_calls" else result.finish_reason, usage=result.usage)
    return result


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"toolResult": {"toolUseId": message.tool_call_id or "",
                                "content": [{"text": message.content or " "}]}}]
    blocks: list[dict[str, Any]] = [{"text": message.content}] if message.content and message.content.strip() else []
    for call in message.tool_calls:
        try:
            parsed = json.loads(call.arguments) if call.arguments else {}
        except ValueError:
            parsed = None
        tool_input = parsed if isinstance(parsed, dict) else {"arguments": call.arguments}
        blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": tool_input}})
    return blocks


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(input_tokens=int(raw.get("inputTokens") or 0), output_tokens=int(raw.get("outputTokens") or 0))


class _translated:
    """Context manager turning botocore exceptions into Engram's error tree."""

    def __init__(self, model: str, timeout_s: float, region: str) -> None:
        self.model, self.timeout_s, self.region = model, timeout_s, region

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None or not isinstance(exc, Exception):
            return
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        if isinstance(exc, ClientError):
            raise _client_error(exc, self.model) from exc
        if isinstance(exc, (ConnectTimeoutError, ReadTimeoutError)):
            raise UpstreamTimeoutError(f"Bedrock did not answer within {self.timeout_s:g} s for {self.model}.") from exc
        if isinstance(exc, NoCredentialsError):
            raise UpstreamError("No AWS credentials found for Bedrock chat (set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                                "AWS_SECRET_ACCESS_KEY, or run with an IAM role).") from exc
        if isinstance(exc, BotoCoreError):
            raise UpstreamError(f"Could not reach Bedrock in {self.region}: {exc}") from exc
        # While a ConverseStream body is read, botocore lets urllib3's own errors through.
        from urllib3.exceptions import HTTPError as Urllib3Error
        from urllib3.exceptions import TimeoutError as Urllib3Timeout

        if isinstance(exc, Urllib3Timeout):
            raise UpstreamTimeoutError(
                f"Bedrock's stream for {self.model} stalled for over {self.timeout_s:g} s.") from exc
        if isinstance(exc, Urllib3Error):
            raise UpstreamError(f"Bedrock's stream for {self.model} broke off: {exc}") from exc


def _client_error(exc: Any, model: str) -> Exception:
    """Map a botocore ``ClientError`` (or in-stream ``EventStreamError``) to Engram's error tree by AWS code."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    code = code[:1].upper() + code[1:]
    message = error.get("Message") or str(exc)
    if code in _THROTTLING:
        return RateLimitError(f"Bedrock is throttling {model} ({code}): {message}")
    if code in _INVALID:
        return InvalidRequestError(f"Bedrock rejected the request for {model} ({code}): {message}",
                                   param="model" if code == "ResourceNotFoundException" else None)
    if code in _TIMEOUT:
        return UpstreamTimeoutError(f"Bedrock timed out answering with {model}: {message}")
    if code in _AUTH:
        return UpstreamError(f"Bedrock refused access to {model} ({code}): {message}. Check the AWS credentials and "
                             "that model access is enabled in this region.")
    return UpstreamError(f"Bedrock failed answering with {model} ({code or 'unknown error'}): {message}")
