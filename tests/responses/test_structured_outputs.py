"""Structured outputs (``text.format``) over real HTTP with the official clients, memory on where it matters: the
``openai`` SDK's ``responses.parse`` and ``responses.stream(text_format=...)`` in strict mode, JSON mode, a function
tool loop answering in a schema, the openai-agents SDK's ``output_type`` over a session, and the 400s of a
malformed format. The scripted fake model answers the JSON; what the tests check is what Engram sends it (the
format as Chat Completions' ``response_format`` on every call) and what it echoes and stores."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pydantic
import pytest

from tests.fakes.chat_server import call, text, tool_calls

MEMORY = {"memory": {"user_id": "pia", "score_threshold": 0.0, "remember": False}}
WEATHER = {"type": "function", "name": "weather", "description": "The weather in a city.", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}


class Pet(pydantic.BaseModel):
    name: str
    kind: str


class Forecast(pydantic.BaseModel):
    city: str
    sky: str


@pytest.fixture(scope="module")
def pia(server, make_key, make_client):
    """A strict SDK client and httpx for tenant ``structured``, whose user ``pia`` remembers her cat."""
    key = make_key("structured")
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    added = http.post("/memories", json={"messages": [{"role": "user", "content": "Pia's cat is called Miso"}],
                                         "user_id": "pia", "infer": False})
    assert added.status_code == 200, added.text
    return make_client("structured"), http, key


def _format(request: dict) -> dict | None:
    return request.get("response_format")


def test_parse_sends_the_schema_and_echoes_it(pia, fake):
    client, _, _ = pia
    fake.push(text(json.dumps({"name": "Miso", "kind": "cat"})))
    response = client.responses.parse(model="fake-model", input="What pet do I have?", text_format=Pet,
                                      extra_body=MEMORY)
    assert response.output_parsed == Pet(name="Miso", kind="cat")
    (request,) = fake.requests
    assert "Pia's cat is called Miso" in request["messages"][0]["content"]
    sent = _format(request)
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Pet"
    assert sent["json_schema"]["strict"] is True and sent["json_schema"]["schema"]["required"] == ["name", "kind"]
    echoed = response.text.format
    assert echoed.type == "json_schema" and echoed.name == "Pet" and echoed.strict is True
    stored = client.responses.retrieve(response.id)
    assert stored.text.format.model_dump() == echoed.model_dump()


def test_the_stream_helper_parses_too(pia, fake):
    client, _, _ = pia
    fake.push(text(json.dumps({"name": "Miso", "kind": "cat"})))
    with client.responses.stream(model="fake-model", input="My pet?", text_format=Pet, extra_body=MEMORY) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert json.loads("".join(deltas)) == {"name": "Miso", "kind": "cat"}
    assert final.output_parsed == Pet(name="Miso", kind="cat")
    assert _format(fake.requests[0])["json_schema"]["name"] == "Pet"


def test_json_mode_and_plain_text(pia, fake):
    client, _, _ = pia
    fake.push(text('{"ok": true}'), text("plain"))
    json_mode = client.responses.create(model="fake-model", input="Answer in JSON", text={"format": {"type": "json_object"}})
    plain = client.responses.create(model="fake-model", input="Answer", text={"format": {"type": "text"}})
    assert json.loads(json_mode.output_text) == {"ok": True} and json_mode.text.format.type == "json_object"
    assert plain.output_text == "plain" and plain.text.format.type == "text"
    assert [_format(r) for r in fake.requests] == [{"type": "json_object"}, None]


def test_a_tool_loop_answers_in_the_schema_on_every_call(pia, fake):
    """The format goes with every model call of the loop (the function call's and the answer's), chained by
    ``previous_response_id`` with memory on."""
    client, _, _ = pia
    fake.push(tool_calls(call("weather", {"city": "Oslo"})))
    first = client.responses.parse(model="fake-model", input="Weather in Oslo?", tools=[WEATHER],
                                   text_format=Forecast, extra_body=MEMORY)
    (function_call,) = first.output
    assert function_call.type == "function_call" and first.output_parsed is None
    fake.push(text(json.dumps({"city": "Oslo", "sky": "grey"})))
    second = client.responses.parse(model="fake-model", previous_response_id=first.id, tools=[WEATHER],
                                    text_format=Forecast, extra_body=MEMORY,
                                    input=[{"type": "function_call_output", "call_id": function_call.call_id,
                                            "output": "grey, 4 degrees"}])
    assert second.output_parsed == Forecast(city="Oslo", sky="grey")
    assert [_format(r)["json_schema"]["name"] for r in fake.requests] == ["Forecast", "Forecast"]
    assert all("Pia's cat is called Miso" in r["messages"][0]["content"] for r in fake.requests)


def test_agents_output_type_over_a_session_with_memory_on(pia, fake, server):
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, SQLiteSession, set_tracing_disabled

    set_tracing_disabled(True)
    _, _, key = pia

    async def run() -> list:
        client = openai.AsyncOpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60)
        agent = Agent(name="pets", instructions="Answer about pets.", output_type=Pet,
                      model=OpenAIResponsesModel(model="fake-model", openai_client=client),
                      model_settings=ModelSettings(extra_body=MEMORY))
        session = SQLiteSession("pets")
        outputs = []
        for question in ("What pet do I have?", "And its name again?"):
            fake.push(text(json.dumps({"name": "Miso", "kind": "cat"})))
            outputs.append((await Runner.run(agent, question, session=session)).final_output)
        await client.close()
        return outputs

    assert asyncio.run(run()) == [Pet(name="Miso", kind="cat")] * 2
    assert [_format(r)["type"] for r in fake.requests] == ["json_schema", "json_schema"]
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system", "user", "assistant", "user"]


@pytest.mark.parametrize(("fmt", "param", "code"), [
    ({"type": "xml"}, "text.format.type", "invalid_value"),
    ({"type": "json_schema", "schema": {"type": "object"}}, "text.format.name", "missing_required_parameter"),
    ({"type": "json_schema", "name": "has space", "schema": {"type": "object"}}, "text.format.name", None),
    ({"type": "json_schema", "name": "x", "schema": "object"}, "text.format.schema", None),
    ({"type": "json_object", "name": "x"}, "text.format.name", "unknown_parameter"),
    ("json", "text.format", None),
], ids=["type", "no-name", "bad-name", "schema-not-object", "extra-field", "not-an-object"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_malformed_format_is_a_400_naming_it(pia, fake, fmt, param, code, stream):
    _, http, _ = pia
    response = http.post("/responses", json={"model": "fake-model", "input": "x", "text": {"format": fmt},
                                             "stream": stream})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    if code is not None:
        assert error["code"] == code
    assert fake.requests == []
