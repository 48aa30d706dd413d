"""JSON answers: the prompts registry, ``response_format`` on both chat backends (and their fallbacks), and the
structured ask — validation, one retry with the problem named, a typed failure — against the scripted fake model
server over real HTTP (Chat Completions, and Bedrock Converse through real boto3)."""

from __future__ import annotations

import json

import pytest

from chalicelib.chat import prompts, structured
from chalicelib.chat.base import ChatMessage, ChatRequest, TextDelta, ToolSpec
from chalicelib.chat.bedrock import ANSWER_TOOL, BedrockBackend
from chalicelib.chat.openai_compat import OpenAICompatBackend
from tests.fakes.chat_server import FakeChatServer, call, error, text, tool_calls

BEDROCK_MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with FakeChatServer() as server:
        yield server


def openai_backend(fake: FakeChatServer) -> OpenAICompatBackend:
    return OpenAICompatBackend(base_url=fake.base_url, api_key="sk-test", max_retries=0, sleep=lambda _: None)


def test_every_prompt_is_registered_once_with_a_version():
    tags = [p.tag for p in prompts.PROMPTS]
    assert len(set(tags)) == len(tags) == 7
    assert all(p.version >= 1 and p.system.strip() for p in prompts.PROMPTS)
    assert prompts.MEMORY_EXTRACTION.tag == "memory.extraction@1"


def test_response_format_is_a_strict_schema_of_the_answer_model():
    shape = structured.response_format(prompts.MEMORY_EXTRACTION)
    assert shape is not None and shape["type"] == "json_schema" and shape["json_schema"]["strict"] is True
    schema = json.dumps(shape["json_schema"]["schema"])
    assert '"default"' not in schema and "maxLength" not in schema

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    found = list(objects(shape["json_schema"]["schema"]))
    assert found and all(set(o["required"]) == set(o["properties"]) and o["additionalProperties"] is False
                         for o in found)
    assert structured.response_format(prompts.PERSONA) is None


def test_ask_sends_the_schema_validates_and_retries_once_with_the_problem(fake):
    fake.push(text('{"facts": [{"fact": "", "confidence": 0.9}]}'),
              text('```json\n{"facts": ["Likes tea", {"fact": "Lives in Oslo", "type": "nonsense"}]}\n```'))
    answer = structured.ask(openai_backend(fake), "m", prompts.MEMORY_EXTRACTION, "User: hi")
    assert [(f.fact, f.type) for f in answer.value.facts] == [("Likes tea", "fact"), ("Lives in Oslo", "fact")]
    assert answer.calls == 2 and answer.prompt == "memory.extraction@1"
    first, second = fake.requests
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "memory_extraction"
    assert "facts.0.fact" in second["messages"][-1]["content"]  # the problem was sent back


def test_two_malformed_answers_raise_with_what_they_cost(fake):
    fake.push(text("not json", usage=(10, 3)), text('{"facts": "no"}', usage=(12, 4)))
    with pytest.raises(structured.MalformedAnswer) as raised:
        structured.ask(openai_backend(fake), "m", prompts.MEMORY_EXTRACTION, "User: hi")
    assert raised.value.calls == 2 and raised.value.usage.input_tokens == 22
    assert "facts" in raised.value.problem


def test_check_refusals_are_sent_back_like_malformed_json(fake):
    fake.push(text('{"memory": "x"}'), text('{"memory": "merged"}'))

    def check(answer):
        if answer.memory == "x":
            raise ValueError("too short")
        return answer.memory

    answer = structured.ask(openai_backend(fake), "m", prompts.MEMORY_MERGE, "- a\n- b", check=check)
    assert answer.value == "merged" and "too short" in fake.requests[1]["messages"][-1]["content"]


def test_a_server_without_json_schema_gets_json_mode_from_then_on(fake):
    backend = openai_backend(fake)
    fake.push(error(400, "Unsupported value: 'response_format.type' json_schema is not supported"),
              text('{"memory": "merged"}'), text('{"memory": "again"}'))
    assert structured.ask(backend, "m", prompts.MEMORY_MERGE, "- a").value.memory == "merged"
    assert structured.ask(backend, "m", prompts.MEMORY_MERGE, "- a").value.memory == "again"
    kinds = [r["response_format"]["type"] for r in fake.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]


def test_other_rejections_are_not_retried_as_json_mode(fake):
    fake.push(error(400, "model not allowed"))
    from chalicelib.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError):
        structured.ask(openai_backend(fake), "m", prompts.MEMORY_MERGE, "- a")
    assert len(fake.requests) == 1


def test_bedrock_asks_for_json_through_a_forced_tool(fake):
    backend = BedrockBackend(region="us-east-1", endpoint_url=fake.url)
    fake.push(tool_calls(call(ANSWER_TOOL, {"memory": "Lives in Oslo and likes tea"}, id="tu_1")))
    answer = structured.ask(backend, BEDROCK_MODEL, prompts.MEMORY_MERGE, "- Lives in Oslo\n- Likes tea")
    assert answer.value.memory == "Lives in Oslo and likes tea"
    sent = fake.requests[0]
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": ANSWER_TOOL}}
    schema = sent["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert schema["required"] == ["memory"]


def test_bedrock_json_object_and_plain_text_answers(fake):
    backend = BedrockBackend(region="us-east-1", endpoint_url=fake.url)
    fake.push(text('{"a": 1}'))
    result = backend.complete(ChatRequest(model=BEDROCK_MODEL, messages=[ChatMessage("user", "x")],
                                          response_format={"type": "json_object"}))
    assert result.text == '{"a": 1}' and result.tool_calls == ()
    assert fake.requests[0]["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == {"type": "object"}


def test_bedrock_offers_the_answer_tool_beside_function_tools(fake):
    """A JSON answer asked for with function tools offered: the answer tool joins them and the model must call
    one of them; its answer-tool call becomes the text, a function call stays a call (streamed alike)."""
    backend = BedrockBackend(region="us-east-1", endpoint_url=fake.url)
    weather = ToolSpec("weather", "The weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}})
    schema = {"type": "json_schema", "json_schema": {"name": "forecast", "strict": True, "schema": {
        "type": "object", "properties": {"sky": {"type": "string"}}, "required": ["sky"]}}}
    request = ChatRequest(model=BEDROCK_MODEL, messages=[ChatMessage("user", "Weather in Oslo?")],
                          tools=(weather,), response_format=schema)
    fake.push(tool_calls(call("weather", {"city": "Oslo"}, id="tu_1")),
              tool_calls(call(ANSWER_TOOL, {"sky": "grey"}, id="tu_2")))
    first = backend.complete(request)
    assert [c.name for c in first.tool_calls] == ["weather"] and first.finish_reason == "tool_calls"
    pieces = list(backend.stream(request))
    assert not [p for p in pieces if isinstance(p, TextDelta) and p.text]
    final = pieces[-1]
    assert json.loads(final.text) == {"sky": "grey"} and final.tool_calls == () and final.finish_reason == "stop"
    for sent in fake.requests:
        config = sent["toolConfig"]
        assert [t["toolSpec"]["name"] for t in config["tools"]] == ["weather", ANSWER_TOOL]
        assert config["toolChoice"] == {"any": {}}
        assert config["tools"][1]["toolSpec"]["inputSchema"]["json"]["required"] == ["sky"]
