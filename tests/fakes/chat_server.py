"""A scripted fake chat model: a real HTTP server (stdlib ``ThreadingHTTPServer`` on ``127.0.0.1:<free port>``, in a
background thread) speaking OpenAI Chat Completions and Amazon Bedrock Converse.

Endpoints:

- ``POST /v1/chat/completions``: non-streaming (``chat.completion``) and ``"stream": true`` (SSE
  ``chat.completion.chunk`` lines: a role chunk, content deltas, ``tool_calls`` deltas — the first with ``id``,
  ``type`` and ``function.name``, then ``function.arguments`` pieces —, a finish chunk, a usage chunk with
  ``"choices": []`` when ``stream_options.include_usage`` is true, then ``data: [DONE]``), as OpenAI sends them,
  with chunked transfer encoding (Bedrock's stream too).
- ``GET /v1/models``: the ``models`` given to the constructor.
- ``POST /model/{modelId}/converse`` and ``/model/{modelId}/converse-stream`` (Bedrock Runtime; the stream in AWS's
  binary event-stream framing), for the real ``boto3`` client pointed here with ``endpoint_url=fake.url``
  (SigV4 signatures are accepted unchecked; any dummy credentials do).

Every reply comes from a script: ``responder(request_json)`` is asked first (when given) and may return a reply or
None; otherwise the next reply is taken from the FIFO (``fake.push(...)``); otherwise ``default`` (when given);
otherwise the server answers **HTTP 400** "no scripted reply left for request #n" (a 400 is not retried, so a
test that makes one call too many fails fast with that message). Every request body is recorded in
``fake.requests`` (parsed JSON, in arrival order; Bedrock bodies gain ``"modelId"`` from the path), with
``fake.paths`` (percent-decoded) and ``fake.headers`` (lower-case names) alongside.

Replies (build them with the helpers):

- ``text("Hello world")`` — an answer; streamed word by word (or ``chunks=[...]`` exactly).
- ``tool_calls(call("file_search", {"query": "pricing"}), call("get_weather", '{"city": "Paris"}'))`` — one or more
  (parallel) function calls, optionally with ``text=`` before them; arguments given as a dict are JSON-encoded,
  a string is sent verbatim (so invalid JSON can be scripted). Call ids default to ``call_<n>``.
- ``error(503, "overloaded", retry_after=1)`` — an HTTP error with OpenAI's error envelope (or ``body=`` verbatim,
  dict or str) and an optional ``Retry-After`` header (seconds; a string is sent as is). On the Bedrock paths
  the envelope is AWS's (``x-amzn-ErrorType`` from ``aws_code``, default by status: 400 ValidationException,
  403 AccessDeniedException, 429 ThrottlingException, 500 InternalServerException, 503 ServiceUnavailableException).
- Any reply takes ``delay_s=`` (seconds to wait before answering: use it for timeouts); text/tool replies also take
  ``chunk_delay_s=`` (between stream chunks), ``usage=(prompt_tokens, completion_tokens)`` (default: counted in
  whitespace-separated words), ``finish_reason=`` (default ``stop``, or ``tool_calls`` when there are calls) and
  ``gate=threading.Event()`` with ``gate_after=1``: the stream pauses after that many content chunks until the test
  sets the event (deterministic "arrives incrementally" tests; 30 s limit); ``cut_after=n`` drops the connection
  after n content chunks of a stream (no finish chunk, no terminating HTTP chunk: a backend dying mid-answer).

Examples::

    from tests.fakes.chat_server import FakeChatServer, call, error, text, tool_calls

    with FakeChatServer() as fake:
        fake.push(tool_calls(call("file_search", {"query": "refund policy"})), text("Refunds take 5 days."))
        client = openai.OpenAI(base_url=fake.base_url, api_key="x")   # or settings.chat_base_url = fake.base_url
        ...
        assert fake.requests[1]["messages"][-1]["role"] == "tool"

    # content-dependent answers (e.g. summarization requests get a summary, everything else the FIFO):
    def responder(body):
        if "Summarize" in (body["messages"][0].get("content") or ""):
            return text("SUMMARY: the user asked about refunds.")
        return None
    with FakeChatServer(responder=responder, default=text("ok")) as fake: ...

    # retries and timeouts:
    fake.push(error(429, retry_after=0.01), error(500), text("finally"))
    fake.push(text("too late", delay_s=5))           # with a 1 s client timeout → timeout

    # bedrock: boto3.client("bedrock-runtime", endpoint_url=fake.url, region_name="us-east-1",
    #                       aws_access_key_id="x", aws_secret_access_key="x")
"""

from __future__ import annotations

import binascii
import itertools
import json
import re
import struct
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeChatServer", "Reply", "ErrorReply", "ToolCallReply", "text", "tool_calls", "call", "error"]

GATE_TIMEOUT_S = 30.0


@dataclass
class ToolCallReply:
    """One scripted function call: ``arguments`` is a dict (JSON-encoded) or a string sent verbatim."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string the model 'produced'."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """A successful model answer: ``text`` and/or ``tool_calls``. See the module docstring for the knobs."""

    text: str = ""
    tool_calls: Sequence[ToolCallReply] = ()
    chunks: Sequence[str] | None = None
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    gate: threading.Event | None = None
    gate_after: int = 1
    cut_after: int | None = None
    model: str | None = None

    def text_chunks(self) -> list[str]:
        """The content deltas to stream: ``chunks`` if given, else the text split after each word."""
        if self.chunks is not None:
            return list(self.chunks)
        return re.findall(r"\s*\S+\s*", self.text) or ([self.text] if self.text else [])


@dataclass
class ErrorReply:
    """An HTTP error answer. ``body`` None → OpenAI's envelope (or AWS's on Bedrock paths) with ``message``."""

    status: int
    message: str | None = None
    body: dict[str, Any] | str | None = None
    retry_after: float | str | None = None
    delay_s: float = 0.0
    aws_code: str | None = None


def text(content: str, **kwargs: Any) -> Reply:
    """A text answer (kwargs: see :class:`Reply`)."""
    return Reply(text=content, **kwargs)


def call(name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None) -> ToolCallReply:
    """One function call for :func:`tool_calls`."""
    return ToolCallReply(name=name, arguments=arguments if arguments is not None else {}, id=id)


def tool_calls(*calls: ToolCallReply | tuple[str, dict[str, Any] | str], text: str = "", **kwargs: Any) -> Reply:
    """An answer calling one or more functions (tuples ``(name, args)`` are accepted for brevity)."""
    built = [c if isinstance(c, ToolCallReply) else ToolCallReply(c[0], c[1]) for c in calls]
    return Reply(text=text, tool_calls=built, **kwargs)


def error(status: int, message: str | None = None, *, body: dict[str, Any] | str | None = None,
          retry_after: float | str | None = None, delay_s: float = 0.0, aws_code: str | None = None) -> ErrorReply:
    """An HTTP error reply (see :class:`ErrorReply`)."""
    return ErrorReply(status=status, message=message, body=body, retry_after=retry_after, delay_s=delay_s,
                      aws_code=aws_code)


_AWS_CODES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
              408: "ModelTimeoutException", 429: "ThrottlingException", 500: "InternalServerException",
              503: "ServiceUnavailableException"}


def _words(value: Any) -> int:
    """Whitespace-separated words in every string inside ``value`` (the fake's 'token' count)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeChatServer


class FakeChatServer:
    """The fake (see the module docstring). Use as a context manager, or ``start()``/``stop()``.

    Attributes:
        url: ``http://127.0.0.1:PORT`` (the Bedrock ``endpoint_url``).
        base_url: ``url + "/v1"`` (the OpenAI ``base_url`` / ``ENGRAM_CHAT_BASE_URL``).
        requests / paths / headers: what each request sent, in arrival order (bodies parsed as JSON).
    """

    def __init__(self, replies: Sequence[Reply | ErrorReply] = (), *,
                 responder: Callable[[dict[str, Any]], Reply | ErrorReply | None] | None = None,
                 default: Reply | ErrorReply | None = None, models: Sequence[str] = ("fake-model",)) -> None:
        self._queue: deque[Reply | ErrorReply] = deque(replies)
        self.responder = responder
        self.default = default
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---
    def start(self) -> FakeChatServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-chat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes replies that are waiting (``delay_s``, gates)."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None, "start() the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    # --- script ---
    def push(self, *replies: Reply | ErrorReply) -> None:
        """Append replies to the FIFO."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Replies still queued."""
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.paths.clear()
            self.headers.clear()

    def _next_reply(self, body: dict[str, Any], path: str, headers: dict[str, str]) -> tuple[int, Reply | ErrorReply]:
        with self._lock:
            self.requests.append(body)
            self.paths.append(path)
            self.headers.append(headers)
            number = len(self.requests)
        reply = self.responder(body) if self.responder is not None else None
        if reply is None:
            with self._lock:
                reply = self._queue.popleft() if self._queue else None
        if reply is None:
            reply = self.default
        if reply is None:
            reply = ErrorReply(400, f"fake chat server: no scripted reply left for request #{number}")
        return number, reply

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopping; True when the server is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- plumbing ---
    def _read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        return body if isinstance(body, dict) else {"_raw": body}

    def _send(self, status: int, payload: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", extra)

    def _start_stream(self, content_type: str) -> None:
        """Begin a streamed 200 with chunked transfer encoding (as OpenAI and Bedrock send streams)."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True  # simplest: no keep-alive after a stream (also covers streams cut short)

    def _chunk(self, data: bytes) -> None:
        """One HTTP chunk, flushed (b"" ends the body)."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    # --- routes ---
    def do_GET(self) -> None:
        fake = self.server.fake
        if self.path.rstrip("/") == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route GET {self.path}", "type": "invalid_request_error",
                                            "param": None, "code": None}})

    def do_POST(self) -> None:
        fake = self.server.fake
        path = urllib.parse.urlsplit(self.path).path
        body = self._read_json()
        bedrock = re.fullmatch(r"/model/(?P<model>[^/]+)/(?P<op>converse|converse-stream)", path)
        if path.rstrip("/") != "/v1/chat/completions" and not bedrock:
            self._send_json(404, {"error": {"message": f"no route POST {path}", "type": "invalid_request_error",
                                            "param": None, "code": None}})
            return
        if bedrock:
            body = {**body, "modelId": urllib.parse.unquote(bedrock["model"])}
        headers = {k.lower(): v for k, v in self.headers.items()}
        number, reply = fake._next_reply(body, urllib.parse.unquote(path), headers)
        if fake._wait(reply.delay_s):
            return
        try:
            if isinstance(reply, ErrorReply):
                self._error(reply, aws=bool(bedrock))
            elif bedrock and bedrock["op"] == "converse":
                self._converse(body, reply, number)
            elif bedrock:
                self._converse_stream(body, reply)
            elif body.get("stream"):
                self._chat_stream(body, reply, number)
            else:
                self._chat(body, reply, number)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _error(self, reply: ErrorReply, *, aws: bool) -> None:
        extra = {"Retry-After": str(reply.retry_after)} if reply.retry_after is not None else {}
        message = reply.message or f"fake upstream error {reply.status}"
        if aws:
            code = reply.aws_code or _AWS_CODES.get(reply.status, "InternalServerException")
            extra["x-amzn-ErrorType"] = code
            payload = reply.body if reply.body is not None else {"message": message}
        else:
            payload = reply.body if reply.body is not None else {
                "error": {"message": message, "type": "invalid_request_error" if reply.status < 500 else "server_error",
                          "param": None, "code": None}}
        raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self._send(reply.status, raw, "application/json", extra)

    # --- Chat Completions ---
    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = _words(body.get("messages") or [])
            completion = _words(reply.text) + sum(_words(c.arguments_json()) or 1 for c in reply.tool_calls)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _calls(self, reply: Reply, number: int) -> list[tuple[str, ToolCallReply]]:
        return [(c.id or f"call_{number}_{i}", c) for i, c in enumerate(reply.tool_calls)]

    @staticmethod
    def _finish(reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _chat(self, body: dict[str, Any], reply: Reply, number: int) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments_json()}}
                                     for cid, c in self._calls(reply, number)]
        self._send_json(200, {
            "id": f"chatcmpl-fake{number}", "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or body.get("model") or "fake-model", "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish(reply)}],
            "usage": self._usage(body, reply),
        })

    def _chat_stream(self, body: dict[str, Any], reply: Reply, number: int) -> None:
        fake = self.server.fake
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {"id": f"chatcmpl-fake{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": reply.model or body.get("model") or "fake-model", "system_fingerprint": None}

        def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if include_usage:
                chunk["usage"] = None
            self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        self._start_stream("text/event-stream")
        send({"role": "assistant", "content": "", "refusal": None})
        for i, piece in enumerate(reply.text_chunks(), start=1):
            if fake._wait(reply.chunk_delay_s):
                return
            send({"content": piece})
            if reply.gate is not None and i == reply.gate_after:
                reply.gate.wait(GATE_TIMEOUT_S)
            if reply.cut_after == i:
                return
        for index, (cid, c) in enumerate(self._calls(reply, number)):
            if fake._wait(reply.chunk_delay_s):
                return
            send({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                  "function": {"name": c.name, "arguments": ""}}]})
            args = c.arguments_json()
            for start in range(0, len(args), 8):
                send({"tool_calls": [{"index": index, "function": {"arguments": args[start:start + 8]}}]})
        send({}, self._finish(reply))
        if include_usage:
            self._chunk(b"data: " + json.dumps({**base, "choices": [], "usage": self._usage(body, reply)}).encode()
                        + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    # --- Bedrock Converse ---
    @staticmethod
    def _stop_reason(reply: Reply) -> str:
        finish = reply.finish_reason
        if finish == "length":
            return "max_tokens"
        if finish == "content_filter":
            return "content_filtered"
        return "tool_use" if reply.tool_calls and finish in (None, "tool_calls") else "end_turn"

    def _converse_usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = _words(body.get("messages") or []) + _words(body.get("system") or [])
            completion = _words(reply.text) + sum(_words(c.arguments_json()) or 1 for c in reply.tool_calls)
        return {"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion}

    def _converse(self, body: dict[str, Any], reply: Reply, number: int) -> None:
        content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
        for cid, c in self._calls(reply, number):
            try:
                tool_input = json.loads(c.arguments_json())
            except ValueError:
                tool_input = {"_invalid_json": c.arguments_json()}
            content.append({"toolUse": {"toolUseId": cid, "name": c.name, "input": tool_input}})
        self._send_json(200, {"output": {"message": {"role": "assistant", "content": content}},
                              "stopReason": self._stop_reason(reply), "usage": self._converse_usage(body, reply),
                              "metrics": {"latencyMs": 1}})

    def _converse_stream(self, body: dict[str, Any], reply: Reply) -> None:
        fake = self.server.fake
        self._start_stream("application/vnd.amazon.eventstream")
        self._chunk(_event("messageStart", {"role": "assistant"}))
        block = 0
        pieces = reply.text_chunks()
        for i, piece in enumerate(pieces, start=1):
            if fake._wait(reply.chunk_delay_s):
                return
            self._chunk(_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}))
            if reply.gate is not None and i == reply.gate_after:
                reply.gate.wait(GATE_TIMEOUT_S)
            if reply.cut_after == i:
                return
        if pieces:
            self._chunk(_event("contentBlockStop", {"contentBlockIndex": 0}))
            block = 1
        for cid, c in self._calls(reply, len(fake.requests)):
            self._chunk(_event("contentBlockStart", {"contentBlockIndex": block,
                                                     "start": {"toolUse": {"toolUseId": cid, "name": c.name}}}))
            args = c.arguments_json()
            for start in range(0, len(args), 8):
                self._chunk(_event("contentBlockDelta", {"contentBlockIndex": block,
                                                         "delta": {"toolUse": {"input": args[start:start + 8]}}}))
            self._chunk(_event("contentBlockStop", {"contentBlockIndex": block}))
            block += 1
        self._chunk(_event("messageStop", {"stopReason": self._stop_reason(reply)}))
        self._chunk(_event("metadata", {"usage": self._converse_usage(body, reply), "metrics": {"latencyMs": 1}}))
        self._chunk(b"")


def _event(event_type: str, payload: dict[str, Any]) -> bytes:
    """One message of AWS's binary event-stream framing (``application/vnd.amazon.eventstream``): prelude
    (total length, headers length, CRC32 of both — big-endian uint32s), string headers (name length uint8, name,
    type 7, value length uint16, value), the JSON payload, and a CRC32 of everything before it."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"),
                        (":message-type", "event")):
        headers += struct.pack("!B", len(name)) + name.encode()
        headers += b"\x07" + struct.pack("!H", len(value)) + value.encode()  # 7: the string header type
    data = json.dumps(payload).encode()
    total = 12 + len(headers) + len(data) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + data
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)
