"""Function tools round trip (``function_call`` out, ``function_call_output`` back in the next request) and backend
failures: timeouts, 5xx and rate limits reported in OpenAI's envelope with a fitting status, streamed as
``response.failed``, stored as failed."""

from __future__ import annotations

import openai
import pytest

from tests.fakes.chat_server import call, error, text, tool_calls

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def test_function_tool_round_trip(client, fake):
    fake.push(tool_calls(call("get_weather", {"city": "Paris"}, id="call_w1"), text="Checking."))
    first = client.responses.create(model="fake-model", input="Weather in Paris?", tools=[WEATHER])
    message, fn = first.output
    assert message.type == "message" and first.output_text == "Checking."
    assert fn.type == "function_call" and fn.call_id == "call_w1" and fn.name == "get_weather"
    assert fn.arguments == '{"city": "Paris"}' and fn.status == "completed" and fn.id.startswith("fc_")
    assert first.status == "completed" and first.tools[0].name == "get_weather"
    sent_tool = fake.requests[0]["tools"][0]["function"]
    assert sent_tool["name"] == "get_weather" and sent_tool["parameters"] == WEATHER["parameters"]

    fake.push(text("It is 18°C in Paris."))
    second = client.responses.create(model="fake-model", previous_response_id=first.id, tools=[WEATHER],
                                     input=[{"type": "function_call_output", "call_id": "call_w1", "output": "18C"}])
    assert second.output_text == "It is 18°C in Paris."
    messages = fake.requests[1]["messages"]
    assert messages[-2]["role"] == "assistant" and messages[-2]["content"] == "Checking."
    assert messages[-2]["tool_calls"][0]["id"] == "call_w1"
    assert messages[-1] == {"role": "tool", "content": "18C", "tool_call_id": "call_w1"}
    (listed,) = client.responses.input_items.list(second.id).data
    assert listed.type == "function_call_output" and listed.call_id == "call_w1" and listed.output == "18C"


def test_forgetting_the_function_output_is_400(client, fake):
    fake.push(tool_calls(call("get_weather", {"city": "Oslo"}, id="call_o")))
    first = client.responses.create(model="fake-model", input="Oslo?", tools=[WEATHER],
                                    tool_choice={"type": "function", "name": "get_weather"})
    assert fake.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="and?", previous_response_id=first.id, tools=[WEATHER])
    assert "call_o" in caught.value.message and caught.value.body["param"] == "input"


@pytest.mark.parametrize("reply, exception, status, code", [
    (error(500, "boom"), openai.InternalServerError, 502, "server_error"),
    (error(503, "overloaded"), openai.InternalServerError, 502, "server_error"),
    (text("too late", delay_s=4), openai.InternalServerError, 504, "server_error"),
    (error(429, "slow down"), openai.RateLimitError, 429, "rate_limit_exceeded"),
])
def test_backend_failures_are_enveloped_streamed_and_stored(client, fake, reply, exception, status, code):
    fake.push(reply)
    with pytest.raises(exception) as caught:
        client.responses.create(model="fake-model", input="hi")
    assert caught.value.status_code == status
    assert set(caught.value.body) == {"message", "type", "param", "code"} and caught.value.message

    fake.push(reply)
    events = list(client.responses.create(model="fake-model", input="hi", stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "response.failed"]
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == code and failed.error.message
    stored = client.responses.retrieve(failed.id)
    assert stored.status == "failed" and stored.error.code == code


def test_failure_after_a_search_keeps_the_partial_output(client, fake):
    store = client.vector_stores.create(name="fail-store")
    fake.push(tool_calls(call("file_search", {"queries": ["x"]})), error(500))
    events = list(client.responses.create(model="fake-model", input="hi", stream=True,
                                          tools=[{"type": "file_search", "vector_store_ids": [store.id]}]))
    assert events[-1].type == "response.failed"
    assert [item.type for item in events[-1].response.output] == ["file_search_call"]
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_function_call_output_replays_with_the_previous_output(client, fake):
    """Without ``previous_response_id``: the previous output (an SDK object each, every field of it sent back)
    plus the function's result."""
    fake.push(tool_calls(call("get_weather", {"city": "Rome"}, id="call_r1"), text="Looking."))
    first = client.responses.create(model="fake-model", input="Weather in Rome?", tools=[WEATHER])
    fake.push(text("Sunny in Rome."))
    second = client.responses.create(model="fake-model", tools=[WEATHER], input=[
        {"role": "user", "content": "Weather in Rome?"}, *first.output,
        {"type": "function_call_output", "call_id": "call_r1", "output": [{"type": "input_text", "text": "sunny"}]}])
    assert second.output_text == "Sunny in Rome."
    assert fake.requests[-1]["messages"][-1] == {"role": "tool", "content": "sunny", "tool_call_id": "call_r1"}
    listed = client.responses.input_items.list(second.id, order="asc").data
    assert listed[-1].type == "function_call_output" and listed[-1].output[0].text == "sunny"
