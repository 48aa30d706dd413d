"""The Responses endpoints over real HTTP with the official SDK (strict validation) and a fake chat model:
create, multi-turn chains, stored responses (retrieve, input items, delete, cancel), store=false, tenancy,
validation and configuration errors."""

from __future__ import annotations

import openai
import psycopg
import pytest

from chalicelib.store import db
from tests.fakes.chat_server import text


def test_create_answers_with_the_models_text_and_usage(client, fake):
    fake.push(text("Hello there, friend.", usage=(7, 4)))
    r = client.responses.create(model="fake-model", input="Hi", metadata={"session": "s1"}, temperature=0.2)
    assert r.status == "completed" and r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == "Hello there, friend."
    (message,) = r.output
    assert message.type == "message" and message.id.startswith("msg_") and message.status == "completed"
    assert message.content[0].annotations == []
    assert r.usage.input_tokens == 7 and r.usage.output_tokens == 4 and r.usage.total_tokens == 11
    assert r.usage.model_dump()["model_calls"] == 1 and r.usage.model_dump()["summary"] is None
    assert r.metadata == {"session": "s1"} and r.temperature == 0.2 and r.model == "fake-model"
    assert r.tool_choice == "auto" and r.tools == [] and r.parallel_tool_calls is True
    assert isinstance(r.created_at, float) and r.completed_at >= r.created_at
    sent = fake.requests[0]
    assert sent["model"] == "fake-model" and sent["temperature"] == 0.2
    assert sent["messages"] == [{"role": "user", "content": "Hi"}]


def test_multi_turn_with_previous_response_id_carries_history_but_not_instructions(client, fake):
    fake.push(text("Nice to meet you, Ada."), text("Your name is Ada."))
    first = client.responses.create(model="fake-model", input="My name is Ada.", instructions="Be terse.")
    second = client.responses.create(model="fake-model", input="What is my name?",
                                     previous_response_id=first.id, instructions="Answer in English.")
    assert second.previous_response_id == first.id and second.instructions == "Answer in English."
    assert fake.requests[0]["messages"][0] == {"role": "system", "content": "Be terse."}
    assert fake.requests[1]["messages"] == [
        {"role": "system", "content": "Answer in English."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "What is my name?"},
    ]


def test_a_cut_off_answer_is_incomplete_streamed_or_not(client, fake):
    fake.push(text("It all began", finish_reason="length"))
    r = client.responses.create(model="fake-model", input="Tell me a long story", max_output_tokens=16)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete" and r.output_text == "It all began" and r.completed_at is None
    assert fake.requests[0]["max_tokens" if "max_tokens" in fake.requests[0] else "max_completion_tokens"] == 16
    fake.push(text("It all began", finish_reason="length"))
    events = list(client.responses.create(model="fake-model", input="Again", stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"


def test_item_inputs_with_roles_and_parts(client, fake):
    fake.push(text("ok"))
    client.responses.create(model="fake-model", input=[
        {"role": "developer", "content": "Speak like a pirate."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Part one."},
                                                         {"type": "input_text", "text": "Part two."}]},
        {"role": "assistant", "content": "Arr."},
        {"role": "user", "content": "Again"},
    ])
    assert fake.requests[0]["messages"] == [
        {"role": "system", "content": "Speak like a pirate."},
        {"role": "user", "content": "Part one.\nPart two."},
        {"role": "assistant", "content": "Arr."},
        {"role": "user", "content": "Again"},
    ]


def test_stored_response_is_retrieved_listed_and_deleted(client, fake):
    fake.push(text("Stored answer."))
    created = client.responses.create(model="fake-model", input=[{"role": "user", "content": f"q{i}"}
                                                                 for i in range(3)])
    fetched = client.responses.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()
    items = list(client.responses.input_items.list(created.id, limit=1))  # auto-paginates, default order desc
    assert [i.content[0].text for i in items] == ["q2", "q1", "q0"]
    ascending = client.responses.input_items.list(created.id, order="asc", limit=2)
    assert [i.content[0].text for i in ascending.data] == ["q0", "q1"] and ascending.has_more
    with pytest.raises(openai.BadRequestError) as cancel:
        client.responses.cancel(created.id)
    assert "background" in cancel.value.message
    client.responses.delete(created.id)
    for call in (lambda: client.responses.retrieve(created.id), lambda: client.responses.delete(created.id),
                 lambda: client.responses.input_items.list(created.id),
                 lambda: client.responses.create(model="fake-model", input="x", previous_response_id=created.id)):
        with pytest.raises(openai.NotFoundError):
            call()


def test_store_false_is_neither_retrievable_nor_chainable(client, fake):
    fake.push(text("Ephemeral."))
    r = client.responses.create(model="fake-model", input="hi", store=False)
    assert r.output_text == "Ephemeral." and r.model_dump()["store"] is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="fake-model", input="x", previous_response_id=r.id)
    assert caught.value.body["param"] == "previous_response_id"
    assert len(fake.requests) == 1


def test_another_tenants_responses_are_not_found(make_client, fake, api_settings):
    red, blue = make_client("red-r"), make_client("blue-r")
    fake.push(text("Red secret: octarine."))
    secret = red.responses.create(model="fake-model", input="remember octarine")
    attempts = {
        "retrieve": lambda: blue.responses.retrieve(secret.id),
        "delete": lambda: blue.responses.delete(secret.id),
        "input_items": lambda: blue.responses.input_items.list(secret.id),
        "cancel": lambda: blue.responses.cancel(secret.id),
        "chain": lambda: blue.responses.create(model="fake-model", input="what was it?",
                                               previous_response_id=secret.id),
    }
    for attempt in attempts.values():
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert len(fake.requests) == 1  # blue's chained request never reached the model
    assert red.responses.retrieve(secret.id).output_text == "Red secret: octarine."
    # The database wall: blue's row-level-security connection sees none of red's responses, whatever the query.
    with db.tenant_connection(api_settings, "blue-r") as conn:
        assert conn.execute("SELECT count(*) FROM responses").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO responses (id, tenant_id, status, response, input_items, turn_tokens, "
                         "history_tokens) VALUES ('resp_x', 'red-r', 'completed', '{}', '[]', 0, 0)")


@pytest.mark.parametrize("extra, param", [
    ({"previous_response_id": "msg_123"}, "previous_response_id"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["nope"]}]}, "tools[0].vector_store_ids[0]"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_x"], "max_num_results": 51}]},
     "tools[0].max_num_results"),
    ({"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}},
     "tool_choice.name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"include": ["bogus"]}, "include[0]"),
    ({"background": True}, "background"),
    ({"max_tool_calls": 0}, "max_tool_calls"),
    ({"text": {"format": {"type": "json_schema", "name": "f"}}}, "text.format.schema"),
    ({"extra_body": {"top_k": 5}}, "top_k"),
    ({"tools": [{"type": "function", "name": "f", "frobnicate": True}]}, "tools[0].frobnicate"),
    ({"input": [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "input_text", "text": 5}]}]},
     "input[1].content[0].text"),
    ({"input": [{"type": "function_call_output", "call_id": "call_1", "output": "x"}]}, "input"),
])
def test_invalid_requests_are_400_naming_the_field(client, fake, extra, param):
    body = {"model": "fake-model", "input": "hi", **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**body)
    assert caught.value.body["param"] == param
    assert caught.value.body["type"] == "invalid_request_error"
    assert fake.requests == []


def test_unknown_vector_store_is_404_naming_the_tool(client, fake):
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="fake-model", input="hi",
                                tools=[{"type": "file_search", "vector_store_ids": ["vs_0000000000unknownstore1"]}])
    assert caught.value.body["param"] == "tools[0].vector_store_ids[0]"


def test_without_a_backend_the_error_names_the_setting(client, configure):
    configure(chat_base_url=None)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="hi")
    assert caught.value.body["param"] == "model" and "ENGRAM_CHAT_BASE_URL" in caught.value.message
    assert client.vector_stores.list().data is not None  # everything else keeps working


def test_malformed_path_ids_are_400(client):
    for call in (lambda: client.responses.retrieve("msg_1"), lambda: client.responses.delete("x"),
                 lambda: client.responses.input_items.list("vs_1")):
        with pytest.raises(openai.BadRequestError):
            call()
