"""The Bedrock Converse backend through real boto3 against the fake server's Converse endpoints (SigV4 unchecked)."""

from __future__ import annotations

import json
import threading

import pytest

from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult, TextDelta, ToolCall, ToolSpec
from chalicelib.chat.bedrock import BedrockBackend, converse_kwargs
from chalicelib.errors import InvalidRequestError, RateLimitError, UpstreamError, UpstreamTimeoutError
from tests.fakes.chat_server import FakeChatServer, call, error, text, tool_calls

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
SEARCH = ToolSpec("file_search", "Search the knowledge base.",
                  {"type": "object", "properties": {"query": {"type": "string"}}})
HELLO = ChatRequest(model=MODEL, messages=[ChatMessage("system", "Be brief."), ChatMessage("user", "Hi there")])


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with FakeChatServer() as server:
        yield server


def backend(fake: FakeChatServer, **kwargs) -> BedrockBackend:
    """The backend with its own lazily built boto3 client, aimed at the fake."""
    return BedrockBackend(region="us-east-1", endpoint_url=fake.url, **kwargs)


def test_text_answer_system_and_usage(fake):
    fake.push(text("Hello back", usage=(9, 2)))
    result = backend(fake).complete(HELLO)
    assert result.text == "Hello back" and result.finish_reason == "stop"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (9, 2)
    assert fake.paths[0] == f"/model/{MODEL}/converse"
    body = fake.requests[0]
    assert body["system"] == [{"text": "Be brief."}]
    assert body["messages"] == [{"role": "user", "content": [{"text": "Hi there"}]}]
    assert "toolConfig" not in body and "inferenceConfig" not in body


def test_parallel_tool_calls_and_results_merged_into_one_user_turn(fake):
    fake.push(tool_calls(call("file_search", {"query": "a"}, id="tu_1"), call("file_search", {"query": "b"}, id="tu_2"),
                         text="Searching."),
              text("Done."))
    chat = backend(fake)
    request = ChatRequest(model=MODEL, messages=HELLO.messages, tools=[SEARCH], tool_choice="required",
                          max_output_tokens=100, temperature=0.1)
    first = chat.complete(request)
    assert first.text == "Searching." and first.finish_reason == "tool_calls"
    assert first.tool_calls == (ToolCall("tu_1", "file_search", '{"query": "a"}'),
                                ToolCall("tu_2", "file_search", '{"query": "b"}'))
    body = fake.requests[0]
    assert body["toolConfig"] == {"tools": [{"toolSpec": {"name": "file_search", "description": SEARCH.description,
                                                          "inputSchema": {"json": SEARCH.parameters}}}],
                                  "toolChoice": {"any": {}}}
    assert body["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.1}

    follow = ChatRequest(model=MODEL, tools=[SEARCH], messages=[
        *request.messages, ChatMessage("assistant", "Searching.", tool_calls=first.tool_calls),
        ChatMessage("tool", "result a", tool_call_id="tu_1"), ChatMessage("tool", "result b", tool_call_id="tu_2"),
        ChatMessage("user", "and?")])
    assert chat.complete(follow).text == "Done."
    messages = fake.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]  # roles alternate
    assert messages[1]["content"] == [
        {"text": "Searching."},
        {"toolUse": {"toolUseId": "tu_1", "name": "file_search", "input": {"query": "a"}}},
        {"toolUse": {"toolUseId": "tu_2", "name": "file_search", "input": {"query": "b"}}}]
    assert messages[2]["content"] == [{"toolResult": {"toolUseId": "tu_1", "content": [{"text": "result a"}]}},
                                      {"toolResult": {"toolUseId": "tu_2", "content": [{"text": "result b"}]}},
                                      {"text": "and?"}]


def test_stream_deltas_tool_calls_and_usage(fake):
    args = {"query": "a query long enough to arrive in several pieces"}
    fake.push(tool_calls(call("file_search", args, id="tu_9"), text="Let me look.", usage=(20, 6)))
    items = list(backend(fake).stream(ChatRequest(model=MODEL, messages=HELLO.messages, tools=[SEARCH])))
    assert [i.text for i in items[:-1]] == ["Let ", "me ", "look."]
    result = items[-1]
    assert isinstance(result, ChatResult) and result.text == "Let me look." and result.finish_reason == "tool_calls"
    assert result.tool_calls == (ToolCall("tu_9", "file_search", json.dumps(args)),)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (20, 6)
    assert fake.paths[0] == f"/model/{MODEL}/converse-stream"


def test_stream_is_incremental(fake):
    gate = threading.Event()
    fake.push(text("first then more", gate=gate))
    stream = backend(fake).stream(HELLO)
    assert next(stream) == TextDelta("first ") and not gate.is_set()
    gate.set()
    assert list(stream)[-1].text == "first then more"


def test_connection_lost_mid_stream_is_upstream_error(fake):
    fake.push(text("partial answer that dies", cut_after=1))
    stream = backend(fake, max_retries=0).stream(HELLO)
    assert next(stream) == TextDelta("partial ")
    with pytest.raises(UpstreamError):
        list(stream)


def test_throttling_retried_then_rate_limit_error(fake):
    fake.push(error(429, "Too many requests"), error(429, "Too many requests, please wait"))
    with pytest.raises(RateLimitError) as info:
        backend(fake, max_retries=1).complete(HELLO)
    assert info.value.status == 429 and "please wait" in info.value.message and len(fake.requests) == 2


def test_server_error_retried_then_success(fake):
    fake.push(error(500), text("recovered"))
    assert backend(fake, max_retries=1).complete(HELLO).text == "recovered"


def test_persistent_server_error_is_upstream_error(fake):
    fake.push(error(503, "unavailable"), error(503, "unavailable"))
    with pytest.raises(UpstreamError) as info:
        backend(fake, max_retries=1).complete(HELLO)
    assert info.value.status == 502


def test_validation_exception_is_400_with_bedrock_message(fake):
    fake.push(error(400, "messages: roles must alternate between user and assistant"))
    with pytest.raises(InvalidRequestError) as info:
        list(backend(fake).stream(HELLO))
    assert info.value.status == 400 and "roles must alternate" in info.value.message


def test_access_denied_is_upstream_error(fake):
    fake.push(error(403, "You don't have access to the model"))
    with pytest.raises(UpstreamError, match="model access"):
        backend(fake, max_retries=0).complete(HELLO)


def test_timeout_is_upstream_timeout(fake):
    fake.push(text("late", delay_s=3))
    with pytest.raises(UpstreamTimeoutError) as info:
        backend(fake, timeout_s=0.3, max_retries=0).complete(HELLO)
    assert info.value.status == 504


def test_tool_choice_none_offers_no_tools_unless_history_needs_them():
    plain = converse_kwargs(ChatRequest(model=MODEL, messages=HELLO.messages, tools=[SEARCH], tool_choice="none"))
    assert "toolConfig" not in plain
    named = converse_kwargs(ChatRequest(model=MODEL, messages=HELLO.messages, tools=[SEARCH],
                                        tool_choice={"name": "file_search"}))
    assert named["toolConfig"]["toolChoice"] == {"tool": {"name": "file_search"}}
    history = [*HELLO.messages, ChatMessage("assistant", None, tool_calls=(ToolCall("t1", "file_search", "oops"),)),
               ChatMessage("tool", "r", tool_call_id="t1")]
    kwargs = converse_kwargs(ChatRequest(model=MODEL, messages=history, tools=[SEARCH], tool_choice="none"))
    assert "toolChoice" not in kwargs["toolConfig"]
    assert kwargs["messages"][1]["content"] == [{"toolUse": {"toolUseId": "t1", "name": "file_search",
                                                             "input": {"arguments": "oops"}}}]
