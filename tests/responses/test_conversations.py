"""The Conversations API over real HTTP with the official SDK (strict validation): create / retrieve / update /
delete, items (create up to 20, list with cursors and ``include``, retrieve, delete), conversations as the history of
``responses.create(conversation=…)`` — streamed or not, summarized when long —, the refusal of ``conversation`` with
``previous_response_id``, and the wall between tenants on every route."""

from __future__ import annotations

import threading

import httpx
import openai
import psycopg
import pytest

from chalicelib.chat import prompts
from chalicelib.responses import conversations, history, summarize
from chalicelib.responses import conversations_store as cstore
from chalicelib.responses.turns import Turn
from chalicelib.store.db import connect, tenant_connection
from tests.fakes.chat_server import call, error, text, tool_calls

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SUMMARY = "SUMMARY: the user is Ada, who keeps the lighthouse."


def user(content: str, **extra) -> dict:
    return {"type": "message", "role": "user", "content": content, **extra}


def _texts(listed) -> list[tuple[str, str]]:
    """(role, text) of the message items of a page or list, in order."""
    out = []
    for item in listed:
        if item.type == "message":
            out.append((item.role, "".join(part.text for part in item.content)))
    return out


def _all_items(client, conversation_id: str, **params) -> list:
    return list(client.conversations.items.list(conversation_id, **params))


# ---- CRUD ----

def test_create_retrieve_update_delete(client):
    conv = client.conversations.create(items=[user("Hello"), {"role": "assistant", "content": "Hi! How can I help?"}],
                                       metadata={"topic": "greeting"})
    assert conv.id.startswith("conv_") and conv.object == "conversation" and conv.metadata == {"topic": "greeting"}
    assert isinstance(conv.created_at, int)
    got = client.conversations.retrieve(conv.id)
    assert got == conv

    updated = client.conversations.update(conv.id, metadata={"topic": "help", "lang": "en"})
    assert updated.metadata == {"topic": "help", "lang": "en"} and updated.id == conv.id
    assert client.conversations.update(conv.id, metadata=None).metadata == {}

    items = _all_items(client, conv.id, order="asc")
    assert _texts(items) == [("user", "Hello"), ("assistant", "Hi! How can I help?")]
    first, second = items
    assert first.id.startswith("msg_") and first.status == "completed" and first.content[0].type == "input_text"
    assert second.content[0].type == "output_text" and second.content[0].annotations == []
    assert client.conversations.items.retrieve(first.id, conversation_id=conv.id) == first

    after_delete = client.conversations.items.delete(first.id, conversation_id=conv.id)
    assert after_delete.object == "conversation" and after_delete.id == conv.id
    assert [i.id for i in _all_items(client, conv.id)] == [second.id]
    with pytest.raises(openai.NotFoundError) as caught:
        client.conversations.items.retrieve(first.id, conversation_id=conv.id)
    assert caught.value.body["param"] == "item_id"

    deleted = client.conversations.delete(conv.id)
    assert deleted.id == conv.id and deleted.deleted is True and deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError) as caught:
        client.conversations.retrieve(conv.id)
    assert caught.value.body["param"] == "conversation_id" and conv.id in caught.value.message
    with pytest.raises(openai.NotFoundError):
        client.conversations.delete(conv.id)


def test_created_items_keep_their_ids_and_every_item_type(client):
    given = [
        user("What is the weather in Oslo?", id="msg_client_1"),
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "3C, rain"},
        {"type": "file_search_call", "id": "fs_client", "queries": ["oslo climate"], "status": "completed",
         "results": [{"file_id": "file-x", "filename": "oslo.txt", "score": 0.5, "text": "Oslo is rainy."}]},
        {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
    ]
    conv = client.conversations.create(items=given)
    added = client.conversations.items.create(conv.id, items=[user("Thanks")])
    assert added.object == "list" and added.has_more is False and added.first_id == added.last_id
    items = _all_items(client, conv.id, order="asc")
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "file_search_call",
                                       "message", "message"]
    assert items[0].id == "msg_client_1" and items[3].id == "fs_client" and added.data[0].id == items[-1].id
    assert items[1].id.startswith("fc_") and items[1].call_id == "call_1" and items[1].status == "completed"
    assert items[2].id.startswith("fco_") and items[2].output == "3C, rain"
    assert items[3].results is None  # results only when included
    shown = client.conversations.items.retrieve("fs_client", conversation_id=conv.id,
                                                include=["file_search_call.results"])
    assert shown.results[0].text == "Oslo is rainy."
    included = _all_items(client, conv.id, include=["file_search_call.results"])
    assert next(i for i in included if i.type == "file_search_call").results[0].filename == "oslo.txt"
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.items.list(conv.id, include=["nonsense"])
    assert caught.value.body["param"] == "include[0]"


# ---- items: pagination, the 20-item limit, duplicates ----

def test_items_paginate_in_both_orders_and_survive_deleting_the_cursor(client):
    conv = client.conversations.create()
    texts = [f"note {i:02d}" for i in range(45)]
    for start in range(0, 45, 20):
        client.conversations.items.create(conv.id, items=[user(t) for t in texts[start:start + 20]])

    ascending = client.conversations.items.list(conv.id, order="asc", limit=10)
    assert len(ascending.data) == 10 and ascending.has_more is True
    assert ascending.first_id == ascending.data[0].id and ascending.last_id == ascending.data[-1].id
    assert [t for _, t in _texts(_all_items(client, conv.id, order="asc", limit=10))] == texts
    assert [t for _, t in _texts(_all_items(client, conv.id, limit=7))] == texts[::-1]  # default order: desc
    assert client.conversations.items.list(conv.id, limit=100).has_more is False

    page = client.conversations.items.list(conv.id, order="asc", limit=5)
    client.conversations.items.delete(page.last_id, conversation_id=conv.id)  # the cursor itself goes
    rest = client.conversations.items.list(conv.id, order="asc", limit=100, after=page.last_id)
    assert [t for _, t in _texts(rest.data)] == texts[5:]
    with pytest.raises(openai.BadRequestError) as caught:  # a cursor naming no item of the conversation
        client.conversations.items.list(conv.id, after="msg_never_seen")
    assert caught.value.body["param"] == "after"

    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.items.list(conv.id, limit=101)
    assert caught.value.body["param"] == "limit"


def test_at_most_twenty_items_at_a_time(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.create(items=[user(f"m{i}") for i in range(21)])
    assert caught.value.body["param"] == "items" and caught.value.body["code"] == "array_above_max_length"
    assert "maximum length 20" in caught.value.message

    conv = client.conversations.create(items=[user(f"m{i}") for i in range(20)])
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.items.create(conv.id, items=[user(f"n{i}") for i in range(21)])
    assert caught.value.body["code"] == "array_above_max_length"
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.items.create(conv.id, items=[])
    assert caught.value.body["param"] == "items" and caught.value.body["code"] == "empty_array"
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.items.create(conv.id, items=[user("ok"), {"type": "reasoning", "summary": []}])
    assert caught.value.body["param"] == "items[1].type"
    assert len(_all_items(client, conv.id, limit=100)) == 20  # nothing of the refused calls was added


def test_item_ids_are_unique_in_a_conversation(client, fake):
    conv = client.conversations.create(items=[user("first", id="msg_dup")])
    for attempt in ([user("again", id="msg_dup")], [user("a", id="msg_x"), user("b", id="msg_x")]):
        with pytest.raises(openai.BadRequestError) as caught:
            client.conversations.items.create(conv.id, items=attempt)
        assert caught.value.body["message"].startswith("Duplicate item found with id msg_")
        assert caught.value.body["param"] == "items"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", conversation=conv.id, input=[user("replayed", id="msg_dup")])
    assert caught.value.body["param"] == "input" and "msg_dup" in caught.value.message
    assert fake.requests == []

    client.conversations.items.delete("msg_dup", conversation_id=conv.id)
    client.conversations.items.create(conv.id, items=[user("back", id="msg_dup"), user("later")])
    assert _texts(_all_items(client, conv.id, order="asc")) == [("user", "back"), ("user", "later")]


def test_bad_ids_and_bodies_are_4xx(client):
    conv = client.conversations.create()
    for bad in ("vs_123", "conv_a%2Fb"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.conversations.retrieve(bad)
        assert caught.value.body["param"] == "conversation_id"
    for bad_item in ("x" * 200, "a.b", "a b"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.conversations.items.retrieve(bad_item, conversation_id=conv.id)
        assert caught.value.body["param"] == "item_id"
    with pytest.raises(openai.BadRequestError) as caught:  # item ids are OpenAI's charset, so cursors always work
        client.conversations.items.create(conv.id, items=[user("x", id="note.1")])
    assert caught.value.body["param"] == "items[0].id" and "underscores, or dashes" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.conversations.update(conv.id, metadata={"k": "v" * 513})
    assert caught.value.body["param"] == "metadata"
    with pytest.raises(openai.BadRequestError) as caught:
        client.post(f"/conversations/{conv.id}", body={}, cast_to=httpx.Response)
    assert caught.value.body["param"] == "metadata" and "Missing required parameter" in caught.value.message
    with pytest.raises(openai.BadRequestError):
        client.conversations.create(items=[{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])


def test_listing_conversations_is_an_engram_extension(make_client):
    c = make_client("lister")
    made = [c.conversations.create(metadata={"n": str(i)}).id for i in range(3)]
    page = c.get("/conversations", cast_to=httpx.Response, options={"params": {"limit": 2}}).json()
    assert [x["id"] for x in page["data"]] == made[::-1][:2] and page["has_more"] is True
    rest = c.get("/conversations", cast_to=httpx.Response,
                 options={"params": {"limit": 2, "after": page["last_id"]}}).json()
    assert [x["id"] for x in rest["data"]] == [made[0]] and rest["has_more"] is False


# ---- conversations as the history of responses ----

def test_thirty_turns_streamed_and_not_carry_the_whole_history(client, fake):
    conv = client.conversations.create(items=[{"role": "developer", "content": "You count sheep."}],
                                       metadata={"game": "sheep"})
    expected = [{"role": "system", "content": "You count sheep."}]
    for turn in range(30):
        question, answer = f"Sheep number {turn}?", f"That is sheep {turn}."
        fake.push(text(answer))
        if turn % 3 == 2:  # every third turn streamed
            events = list(client.responses.create(model="fake-model", input=question, stream=True,
                                                  conversation={"id": conv.id}))
            assert events[-1].type == "response.completed"
            response = events[-1].response
        else:
            response = client.responses.create(model="fake-model", input=question, conversation=conv.id)
        assert response.output_text == answer and response.conversation.id == conv.id
        expected.append({"role": "user", "content": question})
        assert fake.requests[-1]["messages"] == expected  # everything so far, in order
        expected.append({"role": "assistant", "content": answer})
        assert response.previous_response_id is None
    items = _all_items(client, conv.id, order="asc", limit=100)
    assert len(items) == 61 and [m for m in _texts(items)[1:]] == [
        (m["role"], m["content"]) for m in expected[1:]]
    stored = client.responses.retrieve(response.id)
    assert stored.conversation.id == conv.id and len(client.responses.input_items.list(stored.id).data) == 1
    assert client.conversations.retrieve(conv.id).metadata == {"game": "sheep"}


def test_function_calls_round_trip_through_the_conversation(client, fake):
    conv = client.conversations.create()
    fake.push(tool_calls(call("get_weather", {"city": "Paris"}, id="call_p")))
    first = client.responses.create(model="fake-model", input="Weather in Paris?", tools=[WEATHER],
                                    conversation=conv.id)
    assert first.output[0].type == "function_call"
    fake.push(text("18°C in Paris."))
    client.responses.create(model="fake-model", tools=[WEATHER], conversation=conv.id,
                            input=[{"type": "function_call_output", "call_id": "call_p", "output": "18C"}])
    sent = fake.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_p" and sent[-1] == {"role": "tool", "content": "18C",
                                                                         "tool_call_id": "call_p"}
    # a call answered through the items API (another turn) is history as well
    fake.push(tool_calls(call("get_weather", {"city": "Rome"}, id="call_r")))
    client.responses.create(model="fake-model", input="And Rome?", tools=[WEATHER], conversation=conv.id)
    client.conversations.items.create(conv.id, items=[{"type": "function_call_output", "call_id": "call_r",
                                                       "output": "25C"}])
    fake.push(text("Rome is warmer."))
    client.responses.create(model="fake-model", input="Which is warmer?", tools=[WEATHER], conversation=conv.id)
    sent = fake.requests[-1]["messages"]
    assert sent[-3]["tool_calls"][0]["id"] == "call_r" and sent[-2]["tool_call_id"] == "call_r"
    assert sent[-1] == {"role": "user", "content": "Which is warmer?"}
    kinds = [i.type for i in _all_items(client, conv.id, order="asc")]
    assert kinds == ["message", "function_call", "function_call_output", "message", "message", "function_call",
                     "function_call_output", "message", "message"]


def test_failed_responses_add_nothing_and_store_false_still_joins(client, fake):
    conv = client.conversations.create(items=[user("Hello")])
    fake.push(error(500, "boom"))
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="fake-model", input="Will this fail?", conversation=conv.id)
    assert len(_all_items(client, conv.id)) == 1

    fake.push(text("Not stored, but remembered."))
    r = client.responses.create(model="fake-model", input="Remember me", conversation=conv.id, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    assert _texts(_all_items(client, conv.id, order="asc")) == [
        ("user", "Hello"), ("user", "Remember me"), ("assistant", "Not stored, but remembered.")]


def test_a_conversation_deleted_while_its_response_streams_leaves_the_response_whole(client, fake):
    conv = client.conversations.create(items=[user("Hello")])
    gate = threading.Event()
    timer = threading.Timer(20, gate.set)  # never hang the suite
    timer.start()
    fake.push(text("A slow answer, word by word.", gate=gate, gate_after=1))
    try:
        with client.responses.create(model="fake-model", input="Take your time.", conversation=conv.id,
                                     stream=True) as stream:
            events = []
            for event in stream:
                events.append(event)
                if event.type == "response.output_text.delta" and not gate.is_set():
                    client.conversations.delete(conv.id)  # while the model is still answering
                    gate.set()
    finally:
        timer.cancel()
    final = events[-1]
    assert final.type == "response.completed" and final.response.output_text == "A slow answer, word by word."
    assert client.responses.retrieve(final.response.id).status == "completed"
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)


def test_conversation_with_previous_response_id_is_refused(client, fake):
    conv = client.conversations.create()
    fake.push(text("First."))
    first = client.responses.create(model="fake-model", input="Hi")
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="fake-model", input="Hi", conversation=conv.id,
                                    previous_response_id=first.id, stream=stream)
        assert caught.value.body["message"] == conversations.MUTUALLY_EXCLUSIVE
        assert caught.value.body["param"] is None and caught.value.body["code"] == "mutually_exclusive_parameters"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="Hi", conversation="resp_123")
    assert caught.value.body["param"] == "conversation"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="Hi", conversation={"id": 7})
    assert caught.value.body["param"] == "conversation.id"
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="fake-model", input="Hi", conversation="conv_NotAnObject0000000000000")
    assert caught.value.body["param"] == "conversation"
    assert len(fake.requests) == 1 and _all_items(client, conv.id) == []


@pytest.fixture()
def summarizer(fake):
    """The fake answers summarization requests with SUMMARY; everything else comes from its queue."""
    fake.responder = lambda body: (text(SUMMARY, usage=(40, 10))
                                   if body["messages"][0]["content"] == prompts.CONVERSATION_SUMMARY.system else None)
    yield
    fake.responder = None


def _is_summary(body: dict) -> bool:
    return body["messages"][0]["content"] == prompts.CONVERSATION_SUMMARY.system


def test_long_conversations_are_summarized_once_and_the_summary_reused(client, fake, configure, summarizer,
                                                                       api_settings):
    conv = client.conversations.create(items=[user("I am Ada. " + "I keep the lighthouse on Skerry Rock. " * 10)])
    fake.push(text("Noted, Ada."))
    client.responses.create(model="fake-model", input="Remember that.", conversation=conv.id)
    assert not any(_is_summary(r) for r in fake.requests)

    configure(summary_threshold_tokens=60, summary_keep_turns=1, summary_model="small-model")
    fake.clear()
    fake.push(text("You are Ada."))
    third = client.responses.create(model="fake-model", input="Who am I?", conversation=conv.id)
    summary_call, answer_call = fake.requests
    assert _is_summary(summary_call) and summary_call["model"] == "small-model"
    assert "Skerry Rock" in summary_call["messages"][1]["content"]
    # keep_turns=1: the first turn (the created item) is condensed; the response's turn stays verbatim
    assert answer_call["messages"] == [
        {"role": "system", "content": history.SUMMARY_HEADER + SUMMARY},
        {"role": "user", "content": "Remember that."}, {"role": "assistant", "content": "Noted, Ada."},
        {"role": "user", "content": "Who am I?"}]
    used = third.usage.model_dump()["summary"]
    assert used["model"] == "small-model" and used["reused"] is False and used["summarized_turns"] == 1
    with connect(api_settings) as conn:
        cached = cstore.get(conn, "acme", conv.id).summary
    assert cached["text"] == SUMMARY and cached["turns"] == 1

    fake.clear()
    fake.push(text("Still Ada."))
    fourth = client.responses.create(model="fake-model", input="Sure?", conversation=conv.id)
    (only,) = fake.requests  # reused: no summarization call
    assert only["messages"][0]["content"].endswith(SUMMARY)
    assert fourth.usage.model_dump()["summary"]["reused"] is True
    assert len(_all_items(client, conv.id)) == 7  # summarizing hides nothing from the items API

    # deleting an item the summary covers drops the summary: the next turn reads what is left (short now)
    first_item = _all_items(client, conv.id, order="asc")[0]
    client.conversations.items.delete(first_item.id, conversation_id=conv.id)
    with connect(api_settings) as conn:
        assert cstore.get(conn, "acme", conv.id).summary is None
    fake.clear()
    fake.push(text("Fine."))
    client.responses.create(model="fake-model", input="Again?", conversation=conv.id)
    (only,) = fake.requests
    assert [m["content"] for m in only["messages"]] == [
        "Remember that.", "Noted, Ada.", "Who am I?", "You are Ada.", "Sure?", "Still Ada.", "Again?"]


def test_the_summary_window_never_opens_with_an_orphaned_function_output(client, fake, configure, summarizer):
    conv = client.conversations.create()
    fake.push(tool_calls(call("get_weather", {"city": "Oslo"}, id="call_o")))
    client.responses.create(model="fake-model", input="Weather in Oslo? " + "Please. " * 40, tools=[WEATHER],
                            conversation=conv.id)
    client.conversations.items.create(conv.id, items=[{"type": "function_call_output", "call_id": "call_o",
                                                       "output": "3C"}])
    configure(summary_threshold_tokens=20, summary_keep_turns=1)
    fake.clear()
    fake.push(text("Cold."))
    answered = client.responses.create(model="fake-model", input="So?", tools=[WEATHER], conversation=conv.id)
    assert answered.status == "completed"
    summary_call, answer_call = fake.requests
    # keep_turns=1 would keep the output's turn without its call's (a 400 from any chat backend); the call's turn
    # is the first, so both are condensed
    assert _is_summary(summary_call) and "Tool result: 3C" in summary_call["messages"][1]["content"]
    assert answer_call["messages"] == [{"role": "system", "content": history.SUMMARY_HEADER + SUMMARY},
                                       {"role": "user", "content": "So?"}]


def _turn(name: str, *kinds_and_calls: tuple[str, str]) -> Turn:
    return Turn(id=name, input_items=[{"type": kind, "call_id": call_id} for kind, call_id in kinds_and_calls],
                output=[], turn_tokens=10, summary=None)


def test_window_start_moves_the_split_off_a_call_and_its_output():
    turns = [_turn("a", ("message", "")), _turn("b", ("function_call", "c1")),
             _turn("c", ("function_call_output", "c1")), _turn("d", ("message", ""))]
    assert summarize.window_start(turns, 3) == 3  # [d] is whole
    assert summarize.window_start(turns, 2) == 1  # [c, d] is not: keep the call's turn too
    assert summarize.window_start(turns, 1) == 1
    first = [_turn("b", ("function_call", "c1")), _turn("c", ("function_call_output", "c1"))]
    assert summarize.window_start(first, 1) == 2  # nothing earlier to keep: condense both


# ---- tenants ----

def test_another_tenant_can_do_nothing_with_a_conversation(client, make_client, fake):
    conv = client.conversations.create(items=[user("secret", id="msg_secret")], metadata={"owner": "acme"})
    other = make_client("intruder")
    attempts = [
        lambda: other.conversations.retrieve(conv.id),
        lambda: other.conversations.update(conv.id, metadata={"owner": "intruder"}),
        lambda: other.conversations.delete(conv.id),
        lambda: other.conversations.items.list(conv.id),
        lambda: other.conversations.items.create(conv.id, items=[user("injected")]),
        lambda: other.conversations.items.retrieve("msg_secret", conversation_id=conv.id),
        lambda: other.conversations.items.delete("msg_secret", conversation_id=conv.id),
        lambda: other.responses.create(model="fake-model", input="tell me", conversation=conv.id),
        lambda: other.responses.create(model="fake-model", input="tell me", conversation=conv.id, stream=True),
    ]
    for attempt in attempts:
        with pytest.raises(openai.NotFoundError):
            attempt()
    listed = other.get("/conversations", cast_to=httpx.Response).json()
    assert conv.id not in [c["id"] for c in listed["data"]]
    assert fake.requests == []
    assert client.conversations.retrieve(conv.id).metadata == {"owner": "acme"}
    assert _texts(_all_items(client, conv.id)) == [("user", "secret")]


def test_the_database_wall_hides_and_guards_conversations(client, make_client, api_settings):
    conv = client.conversations.create(items=[user("for acme only")])
    make_client("intruder").conversations.create()  # the intruder is a tenant with rows of its own
    with tenant_connection(api_settings, "intruder") as conn:
        for table in ("conversations", "conversation_items"):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = 'acme'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] >= 1  # its own are there
        assert conn.execute("UPDATE conversations SET metadata = '{}' WHERE id = %s", (conv.id,)).rowcount == 0
        assert conn.execute("DELETE FROM conversation_items WHERE conversation_id = %s", (conv.id,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO conversation_items (conversation_id, tenant_id, id, turn, item) "
                         "VALUES (%s, 'acme', 'msg_planted', 't', '{}')", (conv.id,))
        # its own tenant id cannot join acme's conversation either (the key names both)
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("INSERT INTO conversation_items (conversation_id, tenant_id, id, turn, item) "
                         "VALUES (%s, 'intruder', 'msg_planted', 't', '{}')", (conv.id,))
    assert _texts(_all_items(client, conv.id)) == [("user", "for acme only")]
