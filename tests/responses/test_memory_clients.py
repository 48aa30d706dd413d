"""The official clients with memory on (``extra_body={"memory": {"user_id": ...}}`` in every test), over real HTTP
against the scripted fake chat model: the ``openai`` SDK in strict mode (create, ``responses.stream``, retrieve,
conversations), an opted-in response's output sent back as the next input, the Conversations API given Engram's
``memory_search_call`` item, and the ``openai-agents`` SDK (``Runner`` turns fed by ``to_input_list()``,
``OpenAIConversationsSession``, ``FileSearchTool`` over a real vector store).

By default memory is invisible: ``output``, stream events and conversation items hold OpenAI's item types only and
``usage.memory`` says what recall did. With ``include=["memory_search_call.results"]`` the item is output 0, in
OpenAI's streaming order, and accepted back anywhere a client may send it (then dropped: the model sees each
memory once, in the fresh ``<memory>`` block). Opted-in responses are read with a lenient client: the item's type
is Engram's own.

No memory model is configured here, so a response's remember job keeps the exchange without calling the fake
model: the FIFO of scripted answers only serves the conversation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import openai
import pytest

from chalicelib.responses.memory import BLOCK_START
from tests.conftest import BOTH_BACKENDS
from tests.fakes.chat_server import call, error, text, tool_calls

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

INCLUDE = ["memory_search_call.results"]
# Recall everything the user has (the hashing embedder's scores are low for unrelated words).
RECALL_ALL = {"score_threshold": 0.0}


def _memory(user: str, **extra) -> dict:
    return {"memory": {"user_id": user, **RECALL_ALL, **extra}}


@pytest.fixture(scope="module")
def tenant(server, make_key, make_client):
    """``tenant(name)`` → ``(strict, lenient, http)`` clients for a tenant: the strict SDK client of
    ``make_client``, a lenient one (for opted-in responses) and httpx."""

    def make(name: str) -> tuple[openai.OpenAI, openai.OpenAI, httpx.Client]:
        key = make_key(name)
        return (make_client(name),
                openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60),
                httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60))

    return make


def _remember(http: httpx.Client, user: str, *texts: str) -> None:
    response = http.post("/memories", json={"messages": [{"role": "user", "content": t} for t in texts],
                                            "user_id": user, "infer": False})
    assert response.status_code == 200, response.text


def _system(request: dict) -> str:
    first = request["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def _types(output) -> list[str]:
    return [item.type if not isinstance(item, dict) else item["type"] for item in output]


def _usage(response) -> dict:
    return response.usage.model_dump()["memory"]


# ---- the openai SDK, strict ----

@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_strict_client_sees_openai_items_and_usage_memory(tenant, fake, configure, stream):
    configure(memory_model=None, chat_model=None)  # the remember job keeps the exchange, asks no model
    strict, _, http = tenant(f"strict-{stream}")
    _remember(http, "alice", "Alice keeps bees on her balcony")
    fake.push(text("You keep bees."))
    kwargs = {"model": "fake-model", "input": "What do I keep on my balcony?", "extra_body": _memory("alice")}
    if stream:
        events = list(strict.responses.create(stream=True, **kwargs))
        assert "memory_search_call" not in json.dumps([e.model_dump() for e in events])
        assert [(e.item.type, e.output_index) for e in events if e.type == "response.output_item.added"] \
            == [("message", 0)]
        r = events[-1].response
    else:
        r = strict.responses.create(**kwargs)
    assert r.status == "completed" and r.output_text == "You keep bees." and _types(r.output) == ["message"]
    memory = _usage(r)
    assert memory["status"] == "completed" and memory["memories"] == 1 and memory["exchanges"] == 0
    assert len(memory["ids"]) == 1 and memory["embedding_tokens"] > 0 and memory["injected_tokens"] > 0
    assert memory["latency_ms"] >= 0 and memory["memory_job_id"].startswith("memjob_")
    assert "Alice keeps bees" in _system(fake.requests[-1])  # recall did reach the model
    # every read of the response is strict-clean too
    again = strict.responses.retrieve(r.id)
    assert _types(again.output) == ["message"] and _usage(again) == memory
    # not included when created: not stored, so not there to include later either
    assert _types(strict.responses.retrieve(r.id, include=INCLUDE).output) == ["message"]
    assert _types(strict.responses.input_items.list(r.id).data) == ["message"]


def test_a_failed_response_with_memory_on(tenant, fake):
    strict, _, http = tenant("failed")
    _remember(http, "alice", "Alice collects stamps")
    fake.push(error(500, "backend down"))
    with pytest.raises(openai.APIStatusError):
        strict.responses.create(model="fake-model", input="What do I collect?", extra_body=_memory("alice"))
    fake.push(error(500, "backend down"))
    events = list(strict.responses.create(model="fake-model", input="What do I collect?", stream=True,
                                          extra_body=_memory("alice")))
    failed = events[-1].response
    assert events[-1].type == "response.failed" and failed.output == [] and failed.error is not None
    assert _usage(failed)["status"] == "completed" and _usage(failed)["memories"] == 1
    assert _usage(failed)["memory_job_id"] is None  # nothing to remember from a failed response
    assert "memory_search_call" not in json.dumps([e.model_dump() for e in events])


@pytest.mark.parametrize("via", ["server", "front"])
def test_stream_helper_with_memory_on(tenant, fake, front, via):
    """``client.responses.stream(...)``: the SDK seeds its state from ``response.created``, so an item in that
    snapshot and then announced at output 0 crashed it ("Duplicate response output index 0")."""
    strict, _, http = tenant(f"helper-{via}")
    _remember(http, "alice", "Alice's favourite tea is oolong")
    client = strict if via == "server" else strict.with_options(base_url=front)
    fake.push(text("Oolong, I believe."))
    with client.responses.stream(model="fake-model", input="Which tea do I like?",
                                 extra_body=_memory("alice", remember=False)) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.output_text == "Oolong, I believe." and _types(final.output) == ["message"]
    assert _usage(final)["memories"] == 1 and _usage(final)["memory_job_id"] is None
    assert events[0].type == "response.created" and events[0].response.output == []
    assert {e.output_index for e in events if hasattr(e, "output_index")} == {0}


# The SDK's lenient parse of the final response builds the unknown item into one of its item classes, which then
# warns when dumped (inside parse_response): the item's type is Engram's own.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("via", ["server", "front"])
def test_stream_helper_opted_in_follows_openais_order(tenant, fake, front, via):
    _, lenient, http = tenant(f"helper-in-{via}")
    _remember(http, "alice", "Alice's bike is a green tandem")
    client = lenient if via == "server" else lenient.with_options(base_url=front)
    fake.push(text("A green tandem."))
    with client.responses.stream(model="fake-model", input="What bike do I ride?", include=INCLUDE,
                                 extra_body=_memory("alice", remember=False)) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[0].response.output == [] and events[1].response.output == []
    items = [(e.type.rsplit(".", 1)[1], e.item.type, e.output_index) for e in events
             if e.type in ("response.output_item.added", "response.output_item.done")]
    assert items == [("added", "memory_search_call", 0), ("done", "memory_search_call", 0),
                     ("added", "message", 1), ("done", "message", 1)]
    assert events[2].type == "response.output_item.added"  # right after in_progress
    assert final.output_text == "A green tandem." and _types(final.output) == ["memory_search_call", "message"]
    item = final.output[0].model_dump()
    assert [r["text"] for r in item["results"]] == ["Alice's bike is a green tandem"]
    assert _usage(final)["ids"] == [r["id"] for r in item["results"]]
    # stored with the item (it was included); shown again only when included again
    assert _types(lenient.responses.retrieve(final.id).output) == ["message"]
    assert _types(lenient.responses.retrieve(final.id, include=INCLUDE).output) == ["memory_search_call", "message"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_conversation_items_stay_openai_items(tenant, fake, stream):
    strict, lenient, http = tenant(f"conversation-{stream}")
    _remember(http, "alice", "Alice is learning the cello")
    conversation = strict.conversations.create()
    for turn, client, include in ((0, strict, []), (1, lenient, INCLUDE), (2, strict, [])):
        fake.push(text(f"answer {turn}"))
        kwargs = {"model": "fake-model", "input": f"question {turn} about my cello", "conversation": conversation.id,
                  "include": include, "extra_body": _memory("alice", remember=False)}
        if stream:
            r = list(client.responses.create(stream=True, **kwargs))[-1].response
        else:
            r = client.responses.create(**kwargs)
        assert r.output_text == f"answer {turn}"
        assert _types(r.output) == (["memory_search_call", "message"] if include else ["message"])
        assert _usage(r)["memories"] == 1
    listed = strict.conversations.items.list(conversation.id, order="asc")
    assert [(i.type, i.role) for i in listed.data] == [("message", "user"), ("message", "assistant")] * 3
    assert [i.type for i in strict.conversations.items.list(conversation.id, include=INCLUDE).data] \
        == ["message"] * 6
    # the history the last turn read: each earlier turn's two messages once, no memory item among them
    last = fake.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 2 + ["user"]
    assert json.dumps(last).count("Alice is learning the cello") == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_opted_in_output_replays_as_the_next_input(tenant, fake, stream):
    strict, lenient, http = tenant(f"replay-{stream}")
    _remember(http, "alice", "Alice's locker code is on a yellow note")

    def create(**kwargs):
        kwargs.update(model="fake-model", include=INCLUDE, extra_body=_memory("alice", remember=False))
        if stream:
            return list(lenient.responses.create(stream=True, **kwargs))[-1].response
        return lenient.responses.create(**kwargs)

    fake.push(text("On a yellow note."))
    first = create(input="Where is my locker code?")
    assert _types(first.output) == ["memory_search_call", "message"]
    fake.push(text("Still the yellow note."))
    replayed = [item.model_dump(exclude_none=True) for item in first.output]
    second = create(input=[{"role": "user", "content": "Where is my locker code?"}, *replayed,
                           {"role": "user", "content": "And where is that note?"}])
    assert second.status == "completed" and second.output_text == "Still the yellow note."
    request = fake.requests[-1]
    # the memory once, in the fresh block; the replayed item (its results hold the same text) shown nowhere
    assert json.dumps(request).count("Alice's locker code is on a yellow note") == 1
    assert json.dumps(request).count(BLOCK_START) == 1 and BLOCK_START in _system(request)
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "user"]
    # the replayed item is not an input item of the new response
    assert _types(strict.responses.input_items.list(second.id, order="asc").data) == ["message"] * 3
    # a lone replayed item is no input at all
    with pytest.raises(openai.BadRequestError) as caught:
        lenient.responses.create(model="fake-model", input=replayed[:1], extra_body=_memory("alice"))
    assert caught.value.body["param"] == "input"


def test_conversations_accept_the_item_and_drop_it(tenant, fake):
    strict, lenient, http = tenant("conversation-items")
    _remember(http, "alice", "Alice plays chess on Sundays")
    fake.push(text("Chess on Sundays."))
    r = lenient.responses.create(model="fake-model", input="What do I do on Sundays?", include=INCLUDE,
                                 extra_body=_memory("alice", remember=False))
    item = r.output[0].model_dump()
    assert item["type"] == "memory_search_call" and item["results"]
    conversation = strict.conversations.create(items=[{"role": "user", "content": "hi"}, item])
    added = strict.conversations.items.create(conversation.id, items=[
        item, {"type": "message", "role": "assistant", "content": "hello"}])
    assert _types(added.data) == ["message"] and added.first_id == added.last_id == added.data[0].id
    only = http.post(f"/conversations/{conversation.id}/items", json={"items": [item]})
    assert only.status_code == 200, only.text
    assert only.json() == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}
    listed = strict.conversations.items.list(conversation.id, order="asc")
    assert [(i.type, i.role) for i in listed.data] == [("message", "user"), ("message", "assistant")]
    assert http.get(f"/conversations/{conversation.id}/items/{item['id']}").status_code == 404
    # the whole output, item included, added at once (what an agents session does with a run's items)
    strict.conversations.items.create(conversation.id, items=[
        {"role": "user", "content": "What do I do on Sundays?"}, *[i.model_dump(exclude_none=True) for i in r.output]])
    assert _types(strict.conversations.items.list(conversation.id).data) == ["message"] * 4
    # and a response in that conversation reads it without the item
    fake.push(text("Still chess."))
    nxt = strict.responses.create(model="fake-model", input="And on Mondays?", conversation=conversation.id,
                                  extra_body=_memory("alice", remember=False))
    assert nxt.output_text == "Still chess." and _types(nxt.output) == ["message"]
    assert json.dumps(fake.requests[-1]).count("Alice plays chess on Sundays") == 1


def test_pre_existing_memory_rows_stay_hidden(tenant, fake, api_settings):
    """Earlier versions recorded the item with a response's turn: such rows are never shown nor read, and paging
    over them stays correct."""
    from chalicelib.store.db import connect

    strict, _, _ = tenant("legacy-rows")
    conversation = strict.conversations.create(items=[{"role": "user", "content": f"m{i}"} for i in range(4)])
    with connect(api_settings) as conn:
        conn.execute("""INSERT INTO conversation_items (conversation_id, tenant_id, id, turn, item)
                        VALUES (%s, 'legacy-rows', 'msc_legacy', 'turn_legacy',
                                '{"id": "msc_legacy", "type": "memory_search_call", "status": "completed",
                                  "queries": ["q"], "results": [{"type": "memory", "text": "SECRET"}]}')""",
                     (conversation.id,))
    strict.conversations.items.create(conversation.id, items=[{"role": "user", "content": "m4"}])
    pages = [strict.conversations.items.list(conversation.id, order="asc", limit=2)]
    while pages[-1].has_more:
        pages.append(strict.conversations.items.list(conversation.id, order="asc", limit=2, after=pages[-1].last_id))
    assert [i.content[0].text for page in pages for i in page.data] == ["m0", "m1", "m2", "m3", "m4"]
    with pytest.raises(openai.NotFoundError):
        strict.conversations.items.retrieve("msc_legacy", conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        strict.conversations.items.delete("msc_legacy", conversation_id=conversation.id)
    fake.push(text("ok"))
    strict.responses.create(model="fake-model", input="next", conversation=conversation.id,
                            extra_body=_memory("alice", remember=False))
    assert "SECRET" not in json.dumps(fake.requests[-1])


# ---- the openai-agents SDK ----

@pytest.fixture(scope="module")
def agents_for(server, make_key):
    """``agents_for(tenant)`` → ``(AsyncOpenAI client, agent factory)``: the factory builds an ``Agent`` on
    Engram's Responses API with memory on for ``alice`` (``**settings`` go to its ``ModelSettings``)."""
    from agents import Agent, ModelSettings, OpenAIResponsesModel, set_tracing_disabled

    set_tracing_disabled(True)

    def make(tenant: str) -> tuple[openai.AsyncOpenAI, Callable[..., Agent]]:
        client = openai.AsyncOpenAI(base_url=server.url, api_key=make_key(tenant), max_retries=0, timeout=60)

        def agent(*, tools: list | None = None, **settings) -> Agent:
            return Agent(name="assistant", instructions="Be brief.", tools=tools or [],
                         model=OpenAIResponsesModel(model="fake-model", openai_client=client),
                         model_settings=ModelSettings(extra_body=_memory("alice", remember=False), **settings))

        return client, agent

    return make


def _run(coroutine):
    return asyncio.run(coroutine)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_agents_runner_three_turns_with_to_input_list(agents_for, tenant, fake, streamed):
    from agents import Runner

    _, _, http = tenant(f"agents-runner-{streamed}")
    _remember(http, "alice", "Alice's dog is called Biscuit")
    client, make_agent = agents_for(f"agents-runner-{streamed}")
    agent = make_agent()

    async def turns() -> list:
        results: list = []
        history: list = []
        for turn in range(3):
            fake.push(text(f"answer {turn}"))
            history = history + [{"role": "user", "content": f"question {turn} about my dog"}]
            if streamed:
                result = Runner.run_streamed(agent, history)
                async for _ in result.stream_events():
                    pass
            else:
                result = await Runner.run(agent, history)
            results.append(result)
            history = result.to_input_list()
        await client.close()
        return results

    results = _run(turns())
    assert [r.final_output for r in results] == ["answer 0", "answer 1", "answer 2"]
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system"] + ["user", "assistant"] * 2 + ["user"]
    assert all(json.dumps(q).count("Alice's dog is called Biscuit") == 1 for q in fake.requests)
    for result in results:
        (response,) = result.raw_responses
        assert _types(response.output) == ["message"]


def test_agents_opted_in_items_replay_through_to_input_list(agents_for, tenant, fake):
    """With the item asked for (``response_include``), the agents SDK keeps it in its history and sends it back:
    Engram accepts and drops it."""
    from agents import ItemHelpers, Runner

    _, _, http = tenant("agents-include")
    _remember(http, "alice", "Alice grows basil")
    client, make_agent = agents_for("agents-include")
    agent = make_agent(response_include=INCLUDE)

    async def turns() -> list:
        results: list = []
        history: list = []
        for turn in range(2):
            fake.push(text(f"answer {turn}"))
            result = await Runner.run(agent, history + [{"role": "user", "content": f"question {turn} on basil"}])
            results.append(result)
            history = result.to_input_list()
        await client.close()
        return results

    results = _run(turns())
    assert [r.final_output for r in results] == ["answer 0", "answer 1"]
    assert _types(results[0].raw_responses[0].output) == ["memory_search_call", "message"]
    # The SDK's helpers read the run's items, the included one too (it parses as a message with no text).
    assert [ItemHelpers.text_message_outputs(r.new_items) for r in results] == ["answer 0", "answer 1"]
    assert all(json.dumps(q).count("Alice grows basil") == 1 for q in fake.requests)


def test_agents_openai_conversations_session(agents_for, tenant, fake):
    from agents import OpenAIConversationsSession, Runner

    strict, _, http = tenant("agents-session")
    _remember(http, "alice", "Alice sails a small dinghy")
    client, make_agent = agents_for("agents-session")
    agent = make_agent()

    async def turns() -> tuple[list, str]:
        session = OpenAIConversationsSession(openai_client=client)
        outputs = []
        for turn in range(3):
            fake.push(text(f"answer {turn}"))
            result = await Runner.run(agent, f"question {turn} about my boat", session=session)
            outputs.append(result.final_output)
        session_id = session.session_id
        await client.close()
        return outputs, session_id

    outputs, conversation_id = _run(turns())
    assert outputs == ["answer 0", "answer 1", "answer 2"]
    listed = strict.conversations.items.list(conversation_id, order="asc")
    assert [(i.type, i.role) for i in listed.data] == [("message", "user"), ("message", "assistant")] * 3
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system"] + ["user", "assistant"] * 2 + ["user"]
    assert all(json.dumps(q).count("Alice sails a small dinghy") == 1 for q in fake.requests)


def test_agents_file_search_tool_on_a_real_vector_store(agents_for, tenant, fake):
    from agents import FileSearchTool, Runner

    strict, _, http = tenant("agents-files")
    _remember(http, "alice", "Alice works in the Oslo office")
    uploaded = strict.files.create(file=("handbook.txt", b"Office hours in Oslo are nine to four, Monday to "
                                                           b"Thursday."), purpose="assistants")
    store = strict.vector_stores.create(name="handbook", file_ids=[uploaded.id])
    for _ in range(600):
        store = strict.vector_stores.retrieve(store.id)
        if store.status == "completed":
            break
        asyncio.run(asyncio.sleep(0.05))
    assert store.status == "completed" and store.file_counts.completed == 1
    client, make_agent = agents_for("agents-files")
    agent = make_agent(tools=[FileSearchTool(vector_store_ids=[store.id], include_search_results=True)])
    fake.push(tool_calls(call("file_search", {"queries": ["office hours Oslo"]})),
              text("Nine to four, Monday to Thursday."))

    async def run():
        result = await Runner.run(agent, "When is my office open?")
        await client.close()
        return result

    result = _run(run())
    assert result.final_output == "Nine to four, Monday to Thursday."
    (response,) = result.raw_responses
    assert _types(response.output) == ["file_search_call", "message"]
    search = response.output[0]
    assert search.results and search.results[0].file_id == uploaded.id
    first, second = fake.requests
    assert "Alice works in the Oslo office" in _system(first)
    assert "nine to four" in next(m for m in second["messages"] if m["role"] == "tool")["content"]


@pytest.mark.parametrize("chained", [False, True], ids=["history", "previous_response_id"])
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_agents_function_tool_loop_with_memory_on(agents_for, tenant, fake, chained, streamed):
    """An agent calling one of its own functions with memory on: the SDK's second request carries the function's
    output, either after the whole history or, chained by ``previous_response_id``, alone. Both are answered, and
    the memory is recalled for the question on both
    requests and reaches the model once in each."""
    from agents import Runner, function_tool

    name = f"agents-tool-{chained}-{streamed}"
    _, _, http = tenant(name)
    _remember(http, "alice", "Alice's flat is in Bergen")
    client, make_agent = agents_for(name)

    @function_tool
    def weather(city: str) -> str:
        """The weather in ``city``."""
        return f"Rain in {city}, 9 degrees."

    agent = make_agent(tools=[weather])
    fake.push(tool_calls(call("weather", {"city": "Bergen"})), text("Rain, 9 degrees."))

    async def run():
        kwargs = {"auto_previous_response_id": True} if chained else {}
        if streamed:
            result = Runner.run_streamed(agent, "What is the weather at home?", **kwargs)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, "What is the weather at home?", **kwargs)
        await client.close()
        return result

    result = _run(run())
    assert result.final_output == "Rain, 9 degrees."
    assert [_types(r.output) for r in result.raw_responses] == [["function_call"], ["message"]]
    first, second = fake.requests
    assert "Alice's flat is in Bergen" in _system(first)
    assert all(json.dumps(q).count("Alice's flat is in Bergen") == 1 for q in fake.requests)
    assert "Rain in Bergen, 9 degrees." in next(m for m in second["messages"] if m["role"] == "tool")["content"]
