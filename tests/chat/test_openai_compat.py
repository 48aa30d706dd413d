"""The Chat Completions backend against the scripted fake model server (real HTTP): answers, tool calls, streaming,
retries, timeouts and error mapping."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult, TextDelta, ToolCall, ToolSpec
from chalicelib.chat.openai_compat import OpenAICompatBackend
from chalicelib.errors import InvalidRequestError, RateLimitError, UpstreamError, UpstreamTimeoutError
from tests.fakes.chat_server import FakeChatServer, call, error, text, tool_calls

SEARCH = ToolSpec("file_search", "Search the knowledge base.",
                  {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
HELLO = ChatRequest(model="fake-model", messages=[ChatMessage("system", "Be brief."), ChatMessage("user", "Hi there")])


@pytest.fixture()
def fake():
    with FakeChatServer() as server:
        yield server


def backend(fake: FakeChatServer, sleeps: list[float] | None = None, **kwargs) -> OpenAICompatBackend:
    """A backend aimed at ``fake``; waits between retries are recorded in ``sleeps`` instead of slept."""
    record = sleeps if sleeps is not None else []
    return OpenAICompatBackend(base_url=fake.base_url, api_key=kwargs.pop("api_key", "sk-test"),
                               sleep=record.append, **kwargs)


def collect(stream) -> tuple[list[str], ChatResult]:
    items = list(stream)
    assert isinstance(items[-1], ChatResult) and all(isinstance(i, TextDelta) for i in items[:-1])
    return [i.text for i in items[:-1]], items[-1]


def test_text_answer_and_request_shape(fake):
    fake.push(text("Hello back to you", usage=(7, 4)))
    result = backend(fake).complete(HELLO)
    assert result == ChatResult(text="Hello back to you", finish_reason="stop", usage=result.usage)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 4)
    body = fake.requests[0]
    assert body == {"model": "fake-model", "messages": [{"role": "system", "content": "Be brief."},
                                                        {"role": "user", "content": "Hi there"}]}
    assert fake.headers[0]["authorization"] == "Bearer sk-test"


def test_no_api_key_sends_no_authorization(fake):
    fake.push(text("ok"))
    backend(fake, api_key=None).complete(HELLO)
    assert "authorization" not in fake.headers[0]


def test_parallel_tool_calls_and_tool_turns_round_trip(fake):
    fake.push(tool_calls(call("file_search", {"query": "refunds"}, id="call_a"),
                         call("file_search", '{"query": "returns"}', id="call_b")),
              text("Refunds take 5 days."))
    chat = backend(fake)
    request = ChatRequest(model="m", messages=[ChatMessage("user", "refunds?")], tools=[SEARCH],
                          tool_choice={"name": "file_search"}, parallel_tool_calls=False, max_output_tokens=50,
                          temperature=0.2, top_p=0.9)
    first = chat.complete(request)
    assert first.finish_reason == "tool_calls" and first.text == ""
    assert first.tool_calls == (ToolCall("call_a", "file_search", '{"query": "refunds"}'),
                                ToolCall("call_b", "file_search", '{"query": "returns"}'))
    body = fake.requests[0]
    assert body["tools"] == [{"type": "function", "function": {"name": "file_search",
                                                               "description": SEARCH.description,
                                                               "parameters": SEARCH.parameters}}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "file_search"}}
    sampling = (body["parallel_tool_calls"], body["max_tokens"], body["temperature"], body["top_p"])
    assert sampling == (False, 50, 0.2, 0.9)

    follow = ChatRequest(model="m", tools=[SEARCH], messages=[
        *request.messages, ChatMessage("assistant", None, tool_calls=first.tool_calls),
        ChatMessage("tool", "doc 1: five days", tool_call_id="call_a"),
        ChatMessage("tool", "", tool_call_id="call_b")])
    assert chat.complete(follow).text == "Refunds take 5 days."
    sent = fake.requests[1]["messages"]
    assert sent[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "file_search", "arguments": '{"query": "refunds"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "file_search", "arguments": '{"query": "returns"}'}}]}
    assert sent[2:] == [{"role": "tool", "content": "doc 1: five days", "tool_call_id": "call_a"},
                        {"role": "tool", "content": "", "tool_call_id": "call_b"}]


def test_stream_text_deltas_then_final_result_with_usage(fake):
    fake.push(text("One two three four", usage=(11, 4)))
    deltas, result = collect(backend(fake).stream(HELLO))
    assert deltas == ["One ", "two ", "three ", "four"]
    assert result.text == "One two three four" and result.finish_reason == "stop"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (11, 4)
    assert fake.requests[0]["stream"] is True and fake.requests[0]["stream_options"] == {"include_usage": True}


def test_stream_assembles_parallel_tool_call_deltas(fake):
    long_args = {"query": "a fairly long query split over many argument deltas", "k": 3}
    fake.push(tool_calls(call("file_search", long_args), call("lookup", "{not json"), text="Let me check."))
    deltas, result = collect(backend(fake).stream(ChatRequest(model="m", messages=HELLO.messages, tools=[SEARCH])))
    assert "".join(deltas) == "Let me check." == result.text
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("file_search", json.dumps(long_args)),
                                                                  ("lookup", "{not json")]
    assert all(c.id for c in result.tool_calls) and result.finish_reason == "tool_calls"


def test_stream_yields_before_the_model_finishes(fake):
    gate = threading.Event()
    fake.push(text("first then the rest", gate=gate, gate_after=1))
    stream = backend(fake).stream(HELLO)
    first = next(stream)  # would block for 30 s if the backend buffered the whole answer
    assert first == TextDelta("first ") and not gate.is_set()
    gate.set()
    rest, result = collect(stream)
    assert result.text == "first then the rest"


def test_connection_lost_mid_stream_is_upstream_error_without_retry(fake):
    fake.push(text("partial answer that dies", cut_after=2), text("must not be requested"))
    stream = backend(fake).stream(HELLO)
    assert next(stream) == TextDelta("partial ")
    with pytest.raises(UpstreamError):
        list(stream)
    assert len(fake.requests) == 1  # deltas were already handed out: no silent retry


def test_retries_429_and_500_then_succeeds_honouring_retry_after(fake):
    fake.push(error(429, "slow down", retry_after=0.25), error(500), text("finally"))
    sleeps: list[float] = []
    assert backend(fake, sleeps, max_retries=2).complete(HELLO).text == "finally"
    assert len(fake.requests) == 3
    assert sleeps[0] == 0.25  # Retry-After, seconds
    assert 0.75 <= sleeps[1] / (0.5 * 2) <= 1.0  # exponential backoff (attempt 1: 1 s) × jitter in (0.75, 1]


def test_stream_retries_before_the_first_delta(fake):
    fake.push(error(503), text("recovered"))
    sleeps: list[float] = []
    deltas, result = collect(backend(fake, sleeps).stream(HELLO))
    assert result.text == "recovered" and len(sleeps) == 1 and len(fake.requests) == 2


def test_persistent_5xx_is_upstream_error_after_retries(fake):
    fake.push(*[error(502, "bad gateway upstream")] * 3)
    with pytest.raises(UpstreamError) as info:
        backend(fake, max_retries=2).complete(HELLO)
    assert info.value.status == 502 and "bad gateway upstream" in info.value.message
    assert len(fake.requests) == 3


def test_persistent_429_is_rate_limit_error(fake):
    fake.push(*[error(429)] * 2)
    with pytest.raises(RateLimitError) as info:
        backend(fake, max_retries=1).complete(HELLO)
    assert info.value.status == 429 and len(fake.requests) == 2


def test_timeout_is_upstream_timeout_after_retries(fake):
    fake.push(text("too late", delay_s=3), text("too late", delay_s=3))
    with pytest.raises(UpstreamTimeoutError) as info:
        backend(fake, timeout_s=0.3, max_retries=1).complete(HELLO)
    assert info.value.status == 504 and len(fake.requests) == 2


def test_stream_timeout_is_upstream_timeout(fake):
    fake.push(text("too late", delay_s=3))
    with pytest.raises(UpstreamTimeoutError):
        collect(backend(fake, timeout_s=0.3, max_retries=0).stream(HELLO))


@pytest.mark.parametrize("status", [400, 422])
def test_rejected_request_passes_the_backend_message_without_retry(fake, status):
    fake.push(error(status, "This model's maximum context length is 8192 tokens."))
    with pytest.raises(InvalidRequestError) as info:
        backend(fake).complete(HELLO)
    assert info.value.status == 400 and "maximum context length is 8192 tokens" in info.value.message
    assert len(fake.requests) == 1


def test_unknown_model_404_names_the_model_param(fake):
    fake.push(error(404, "model 'llama9' not found"))
    with pytest.raises(InvalidRequestError) as info:
        collect(backend(fake).stream(HELLO))
    assert info.value.param == "model" and "llama9" in info.value.message


def test_rejected_key_is_upstream_error_naming_the_setting(fake):
    fake.push(error(401, "Incorrect API key provided"))
    with pytest.raises(UpstreamError) as info:
        backend(fake).complete(HELLO)
    assert info.value.status == 502 and "ENGRAM_CHAT_API_KEY" in info.value.message


def test_malformed_answer_is_upstream_error(fake):
    fake.push(error(200, body="<html>proxy page</html>"))
    with pytest.raises(UpstreamError, match="malformed"):
        backend(fake).complete(HELLO)


def test_unreachable_backend_is_upstream_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    chat = OpenAICompatBackend(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, sleep=sleeps.append)
    with pytest.raises(UpstreamError, match="Could not reach") as info:
        chat.complete(HELLO)
    assert type(info.value) is UpstreamError and len(sleeps) == 1


def test_openai_hosts_get_max_completion_tokens():
    chat = OpenAICompatBackend(base_url="https://api.openai.com/v1")
    body = chat._body(ChatRequest(model="gpt-4o-mini", messages=HELLO.messages, max_output_tokens=10), stream=False)
    assert body["max_completion_tokens"] == 10 and "max_tokens" not in body
