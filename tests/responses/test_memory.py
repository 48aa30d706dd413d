"""Memory around responses over real HTTP: recall before the model answers (reported in ``usage.memory``, shown
as a memory_search_call item when included), remember after (one background job: the exchange stored and facts
extracted), graceful degradation, agent profiles and tenant defaults. The scripted fake chat server answers both
the conversation and the memory model.

Tests that look at the ``memory_search_call`` item ask for it (``include=["memory_search_call.results"]``) and
use a lenient SDK client: it is an Engram output item the SDK's union does not list (lenient parsing keeps it as a
plain object). The others use strict clients: without the include nothing Engram-specific is in ``output``.
(tests/responses/test_memory_clients.py drives the SDKs themselves with memory on.)"""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from chalicelib import deps, memory
from chalicelib.dispatch.port import Delivery
from chalicelib.store.db import connect
from tests.conftest import BOTH_BACKENDS
from tests.fakes.broken import BrokenEmbedder
from tests.fakes.chat_server import call, text, tool_calls

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

MEMORY_MODEL = "fake-memory-model"


@pytest.fixture(scope="module")
def lenient(server, make_key):
    """``lenient(tenant)`` → a non-strict SDK client and an httpx client for the tenant."""

    def make(tenant: str) -> tuple[openai.OpenAI, httpx.Client]:
        key = make_key(tenant)
        return (openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60),
                httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60))

    return make


@pytest.fixture(scope="module")
def strict(server, make_key):
    """``strict(tenant)`` → a strict SDK client (``_strict_response_validation``) and an httpx client."""

    def make(tenant: str) -> tuple[openai.OpenAI, httpx.Client]:
        key = make_key(tenant)
        return (openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=60,
                              _strict_response_validation=True),
                httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60))

    return make


def _usage(response) -> dict:
    """The response's ``usage.memory`` (an Engram extra key of ``usage``)."""
    return response.usage.model_dump()["memory"]


def _types(response) -> list[str]:
    return [item.type for item in response.output]


def _remember(http: httpx.Client, user: str, *texts: str) -> None:
    response = http.post("/memories", json={"messages": [{"role": "user", "content": t} for t in texts],
                                            "user_id": user, "infer": False})
    assert response.status_code == 200, response.text


def _system(request: dict) -> str:
    first = request["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def _wait_job(http: httpx.Client, job_id: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = http.get(f"/memories/jobs/{job_id}").json()
        if job["status"] in ("completed", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def _extraction_responder(facts: list[str]):
    def respond(body: dict):
        if "memory extraction system" in _system(body):
            return text(json.dumps({"facts": [{"fact": f, "confidence": 0.9} for f in facts]}))
        return None
    return respond


def test_recall_puts_memories_in_the_instructions_and_shows_them(lenient, fake):
    client, http = lenient("recall")
    _remember(http, "ada", "Ada likes green tea", "Ada's cat is called Pixel", "Ada works on compilers")
    fake.push(text("Green tea."))
    r = client.responses.create(model="fake-model", input="What does Ada like to drink?", instructions="Be terse.",
                                include=["memory_search_call.results"],
                                extra_body={"memory": {"user_id": "ada", "remember": False, "score_threshold": 0.0}})
    assert r.status == "completed" and r.output_text == "Green tea."
    item = r.output[0].model_dump()
    assert item["type"] == "memory_search_call" and item["status"] == "completed" and item["user_id"] == "ada"
    texts = [x["text"] for x in item["results"]]
    assert texts[0] == "Ada likes green tea" and len(texts) == 3
    system = _system(fake.requests[0])
    assert system.startswith("Be terse.") and "<memory>" in system and "- (" in system
    assert "Ada likes green tea" in system and system.index("<memory>") < system.index("</memory>")
    usage = _usage(r)
    assert usage["embedding_tokens"] > 0 and usage["status"] == "completed" and usage["memories"] == 3
    assert usage["exchanges"] == 0 and usage["ids"] == [x["id"] for x in item["results"]]
    hidden = client.responses.retrieve(r.id)  # not included: the item is left out altogether
    assert _types(hidden) == ["message"] and _usage(hidden)["memories"] == 3
    shown = client.responses.retrieve(r.id, include=["memory_search_call.results"])
    assert len(shown.output[0].model_dump()["results"]) == 3


def test_recall_is_scoped_to_the_user(lenient, fake):
    client, http = lenient("recall-scope")
    _remember(http, "bob", "Bob's bank PIN hint is 'blue whale'")
    fake.push(text("I don't know."))
    r = client.responses.create(model="fake-model", input="What is my PIN hint?", user="carol",
                                include=["memory_search_call.results"],
                                extra_body={"memory": {"remember": False, "score_threshold": 0.0}})
    item = r.output[0].model_dump()
    assert item["user_id"] == "carol" and item["results"] == []
    assert "blue whale" not in json.dumps(fake.requests[0])


def test_remember_stores_the_exchange_and_extracts_once(lenient, strict, fake, configure):
    configure(memory_model=MEMORY_MODEL)
    client, http = lenient("remember")
    fake.responder = _extraction_responder(["Dana is allergic to peanuts"])
    fake.push(text("Noted: no peanuts."))
    r = strict("remember")[0].responses.create(model="fake-model", input="I'm allergic to peanuts.",
                                               extra_body={"memory": {"user_id": "dana"}})
    assert r.status == "completed" and _types(r) == ["message"]
    job_id = _usage(r)["memory_job_id"]
    job = _wait_job(http, job_id)
    assert job["status"] == "completed" and job["usage"]["model_calls"] == 1, job["last_error"]
    extractions = [q for q in fake.requests if "memory extraction system" in _system(q)]
    assert len(extractions) == 1 and "peanuts" in extractions[0]["messages"][-1]["content"]
    memories = http.get("/memories", params={"user_id": "dana"}).json()["data"]
    assert [m["memory"] for m in memories] == ["Dana is allergic to peanuts"]
    assert memories[0]["source"] == {"kind": "response", "id": r.id}
    # a redelivered job extracts nothing twice
    delivery = Delivery(settings=deps.current_settings(), dispatcher=deps.dispatcher())
    assert memory.handle_add_job(memory.AddJobMessage(tenant="remember", job_id=job_id), delivery) == "duplicate"
    assert len(http.get("/memories", params={"user_id": "dana"}).json()["data"]) == 1
    # the next turn recalls the memory and the earlier exchange
    fake.responder = None
    fake.push(text("Avoid peanuts."))
    nxt = client.responses.create(model="fake-model", input="Any allergies I should remember? peanuts",
                                  previous_response_id=r.id, include=["memory_search_call.results"],
                                  extra_body={"memory": {"user_id": "dana", "remember": False,
                                                         "score_threshold": 0.0, "exchange_threshold": 0.0}})
    kinds = {x["type"] for x in nxt.output[0].model_dump()["results"]}
    assert kinds == {"memory", "exchange"}
    with connect(deps.current_settings()) as conn:
        thread = conn.execute("SELECT thread_id, response_id FROM exchanges WHERE tenant_id = 'remember'").fetchall()
    assert thread == [(r.id, r.id)]
    fake.responder = None


def test_remember_without_a_memory_model_keeps_the_exchange_only(strict, fake):
    client, http = strict("exchange-only")
    fake.push(text("Paris is lovely in May."))
    r = client.responses.create(model="fake-model", input="Planning a trip to Paris in May",
                                include=["memory_search_call.results"],
                                extra_body={"memory": {"user_id": "eve", "recall": False}})
    assert _types(r) == ["message"]  # no recall: no item, even included
    usage = _usage(r)
    assert usage["status"] == "off" and usage["memories"] == 0 and usage["ids"] == []
    assert usage["memory_job_id"].startswith("memjob_")  # what remembering dispatched, to wait on
    assert _wait_job(http, usage["memory_job_id"])["status"] == "completed"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with connect(deps.current_settings()) as conn:
            rows = conn.execute("SELECT user_prompt, assistant_response FROM exchanges "
                                "WHERE tenant_id = 'exchange-only'").fetchall()
        if rows:
            break
        time.sleep(0.05)
    assert rows == [("Planning a trip to Paris in May", "Paris is lovely in May.")]
    assert http.get("/memories", params={"user_id": "eve"}).json()["data"] == []
    assert len(fake.requests) == 1


def test_a_chained_tool_loop_recalls_and_remembers_its_question(strict, fake):
    """A function-tool loop chained by ``previous_response_id``: the second request sends only the function's
    output, yet recalls for the question it answers (the model sees the memory on both calls) and the exchange
    is remembered as that question with the final answer (the first response, a function call, leaves none)."""
    client, http = strict("tool-loop")
    _remember(http, "ida", "Ida lives in Bergen")
    weather = {"type": "function", "name": "weather", "description": "The weather in a city.", "strict": True,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                              "additionalProperties": False}}
    options = {"memory": {"user_id": "ida", "score_threshold": 0.0}}
    fake.push(tool_calls(call("weather", {"city": "Bergen"})), text("Rain in Bergen today."))
    first = client.responses.create(model="fake-model", input="What is the weather where I live?",
                                    tools=[weather], extra_body=options)
    (function_call,) = first.output
    assert function_call.type == "function_call" and _usage(first)["memory_job_id"] is None
    second = client.responses.create(model="fake-model", previous_response_id=first.id, tools=[weather],
                                     input=[{"type": "function_call_output", "call_id": function_call.call_id,
                                             "output": "Rain, 9 degrees"}], extra_body=options)
    assert second.output_text == "Rain in Bergen today."
    assert all("Ida lives in Bergen" in _system(request) for request in fake.requests)
    assert _wait_job(http, _usage(second)["memory_job_id"])["status"] == "completed"
    with connect(deps.current_settings()) as conn:
        rows = conn.execute("SELECT user_prompt, assistant_response FROM exchanges "
                            "WHERE tenant_id = 'tool-loop'").fetchall()
    assert rows == [("What is the weather where I live?", "Rain in Bergen today.")]


def test_memory_failures_never_fail_the_response(lenient, strict, fake, configure):
    client, http = lenient("degrade")
    strict_client = strict("degrade")[0]

    good = deps.embedder()
    deps.set_embedder(BrokenEmbedder())
    try:
        fake.push(text("Still here."))
        r = client.responses.create(model="fake-model", input="Hello?", include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": "fay", "remember": False}})
    finally:
        deps.set_embedder(good)
    assert r.status == "completed" and r.output_text == "Still here."
    assert r.output[0].model_dump()["status"] == "failed"
    assert _usage(r)["status"] == "failed" and _usage(r)["memories"] == 0 and _usage(r)["ids"] == []
    assert _usage(r)["reason"] == "internal error (RuntimeError)"  # why, never the exception's text
    assert _usage(r)["remember"] == "off" and _usage(r)["remember_reason"] == "remember=false"
    assert "<memory>" not in json.dumps(fake.requests[0])

    class NoQueue:
        durable = True

        def send(self, messages):
            raise RuntimeError("queue down")

    deps.set_dispatcher(NoQueue())
    try:
        fake.push(text("Answered anyway."))
        r = strict_client.responses.create(model="fake-model", input="Remember this please",
                                           extra_body={"memory": {"user_id": "fay"}})
    finally:
        deps.set_dispatcher(None)
    assert r.status == "completed" and _types(r) == ["message"] and _usage(r)["memory_job_id"] is None
    assert _usage(r)["remember"] == "failed" and _usage(r)["remember_reason"] == "internal error (RuntimeError)"

    configure(memory_model=MEMORY_MODEL)
    fake.responder = lambda body: text("not json") if "memory extraction system" in _system(body) else None
    fake.push(text("Fine."))
    r = strict_client.responses.create(model="fake-model", input="I moved to Oslo",
                                       extra_body={"memory": {"user_id": "fay"}})
    assert r.status == "completed"
    job = _wait_job(http, _usage(r)["memory_job_id"])
    fake.responder = None
    assert job["status"] == "failed" and job["last_error"]["code"] == "memory_model_output_invalid"


def test_store_false_recalls_but_remembers_nothing_and_says_so(strict, fake):
    """``store: false`` is a zero-retention request: recall reads (the model gets the user's memories), but nothing
    of the exchange is kept, and ``usage.memory`` says so and why."""
    client, http = strict("no-store")
    _remember(http, "gus", "Gus plays the cello")
    fake.push(text("The cello."))
    r = client.responses.create(model="fake-model", input="Which instrument does Gus play?", store=False,
                                extra_body={"memory": {"user_id": "gus", "score_threshold": 0.0}})
    usage = _usage(r)
    assert usage["status"] == "completed" and usage["memories"] == 1 and usage["reason"] is None
    assert "Gus plays the cello" in _system(fake.requests[0])
    assert (usage["remember"], usage["remember_reason"], usage["memory_job_id"]) == ("skipped", "store=false", None)
    fake.push(text("Stored."))
    kept = client.responses.create(model="fake-model", input="Which instrument does Gus play?",
                                   extra_body={"memory": {"user_id": "gus"}})
    assert _usage(kept)["remember"] == "queued" and _usage(kept)["remember_reason"] is None
    assert _wait_job(http, _usage(kept)["memory_job_id"])["status"] == "completed"
    with connect(deps.current_settings()) as conn:
        rows = conn.execute("SELECT assistant_response FROM exchanges WHERE tenant_id = 'no-store'").fetchall()
    assert rows == [("Stored.",)]  # the store=false exchange left no trace


def test_memory_needs_a_scope_and_can_be_turned_off(strict, fake):
    client, _ = strict("scope-needed")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="hi", extra_body={"memory": {"recall": True}})
    assert caught.value.body["param"] == "memory.user_id"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="fake-model", input="hi", extra_body={"memory": {"user_id": "x", "top_k": 0}})
    assert caught.value.body["param"] == "memory.top_k"
    fake.push(text("plain"))
    r = client.responses.create(model="fake-model", input="hi", user="u", extra_body={"memory": False})
    assert _types(r) == ["message"] and _usage(r) is None


def test_agent_profile_defaults_apply_and_the_request_wins(lenient, fake):
    client, http = lenient("agents")
    created = http.post("/agents", json={"name": "Support", "model": "fake-model",
                                         "instructions": "You are the support bot.",
                                         "memory": {"recall": True, "remember": False, "score_threshold": 0.0},
                                         "metadata": {"team": "support"}})
    assert created.status_code == 200, created.text
    agent = created.json()
    assert agent["id"].startswith("agent_") and agent["object"] == "agent"
    http.post("/memories", json={"messages": "The customer uses plan Pro", "agent_id": agent["id"],
                                 "user_id": "cust", "infer": False})
    fake.push(text("You are on Pro."))
    r = client.responses.create(model="fake-model", input="Which plan am I on?", user="cust",
                                include=["memory_search_call.results"], extra_body={"agent": agent["id"]})
    system = _system(fake.requests[-1])
    assert system.startswith("You are the support bot.") and "plan Pro" in system
    item = r.output[0].model_dump()
    assert item["agent_id"] == agent["id"] and item["user_id"] == "cust"
    fake.push(text("ok"))
    client.responses.create(model="fake-model", input="hi", instructions="Override.",
                            extra_body={"agent": agent["id"], "memory": False})
    assert _system(fake.requests[-1]) == "Override."
    listed = http.get("/agents").json()
    assert [a["id"] for a in listed["data"]] == [agent["id"]]
    updated = http.post(f"/agents/{agent['id']}", json={"instructions": None}).json()
    assert updated["instructions"] is None and updated["name"] == "Support"
    bad = http.post("/agents", json={"tools": [{"type": "web_search"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tools[0].type"
    assert http.post("/agents", json={"memory": {"bogus": 1}}).status_code == 400
    other_client, other = lenient("agents-b")
    assert other.get(f"/agents/{agent['id']}").status_code == 404
    assert other.post(f"/agents/{agent['id']}", json={"name": "x"}).status_code == 404
    assert other.delete(f"/agents/{agent['id']}").status_code == 404
    with pytest.raises(openai.NotFoundError):
        other_client.responses.create(model="fake-model", input="hi", extra_body={"agent": agent["id"]})
    assert http.delete(f"/agents/{agent['id']}").json() == {"id": agent["id"], "object": "agent.deleted",
                                                             "deleted": True}


def test_tenant_defaults_turn_memory_on(strict, fake, api_settings):
    from chalicelib.store import tenants

    client, http = strict("defaults")
    with connect(api_settings) as conn:
        tenants.set_memory_defaults(conn, "defaults", {"remember": False, "score_threshold": 0.0})
    _remember(http, "gus", "Gus prefers metric units")
    fake.push(text("Metric."))
    r = client.responses.create(model="fake-model", input="Which units do I prefer?", user="gus")
    assert _types(r) == ["message"] and _usage(r)["status"] == "completed" and _usage(r)["memories"] == 1
    assert "metric units" in _system(fake.requests[-1])


def test_streaming_with_memory_shows_the_item_first_when_included(lenient, strict, fake):
    client, http = lenient("stream")
    _remember(http, "hal", "Hal's favourite colour is teal")
    fake.push(text("Teal, of course."))
    events = list(client.responses.create(model="fake-model", input="favourite colour?", stream=True,
                                          include=["memory_search_call.results"],
                                          extra_body={"memory": {"user_id": "hal", "remember": False,
                                                                 "score_threshold": 0.0}}))
    assert [e.response.output for e in events[:2]] == [[], []]  # created, in_progress: nothing output yet
    added = [e for e in events if e.type == "response.output_item.added"]
    assert added[0].item.type == "memory_search_call" and added[0].output_index == 0
    assert added[1].item.type == "message" and added[1].output_index == 1
    assert events[-1].type == "response.completed"
    assert "teal" in _system(fake.requests[-1])
    # not included: no item anywhere in the stream, the message is output 0; usage.memory says what recall did
    fake.push(text("Teal."))
    events = list(strict("stream")[0].responses.create(
        model="fake-model", input="favourite colour?", stream=True,
        extra_body={"memory": {"user_id": "hal", "remember": False, "score_threshold": 0.0}}))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [(e.item.type, e.output_index) for e in added] == [("message", 0)]
    assert "memory_search_call" not in json.dumps([e.model_dump() for e in events])
    assert _usage(events[-1].response)["memories"] == 1 and "teal" in _system(fake.requests[-1])


def test_a_conversation_is_the_thread_of_its_exchanges(strict, fake):
    client, http = strict("conversation-memory")
    conversation = client.conversations.create()
    for question, answer in (("I am planning a garden", "Lovely."), ("Tomatoes or peppers?", "Tomatoes.")):
        fake.push(text(answer))
        r = client.responses.create(model="fake-model", input=question, conversation=conversation.id,
                                    extra_body={"memory": {"user_id": "gia", "recall": False}})
        assert r.status == "completed"
    deadline = time.monotonic() + 30
    rows: list = []
    while time.monotonic() < deadline and len(rows) < 2:
        with connect(deps.current_settings()) as conn:
            rows = conn.execute("SELECT thread_id, continuation_seq FROM exchanges WHERE tenant_id = "
                                "'conversation-memory' ORDER BY seq").fetchall()
        time.sleep(0.05)
    assert rows == [(conversation.id, 0), (conversation.id, 0)]


def test_the_readme_three_turn_conversation(lenient, strict, fake, configure):
    """The README's walkthrough: three turns of one conversation with memory on; the first turn's facts are
    extracted in the background, the later turns show them recalled (hashing embedder here, so the threshold is
    lowered to let lexically unrelated questions recall them), and the memories list shows what was extracted."""
    configure(memory_model=MEMORY_MODEL)
    client, http = lenient("readme-walkthrough")
    conversation = client.conversations.create()
    fake.responder = _extraction_responder(["Alice moved to Lisbon last year", "Alice is vegetarian"])
    recalled: list[list[str]] = []
    for turn, question in enumerate(["I'm Alice. I moved to Lisbon last year and I'm vegetarian.",
                                     "Any ideas for dinner tonight?", "Where could I go hiking this weekend?"]):
        fake.push(text(f"answer {turn}"))
        r = client.responses.create(model="fake-model", conversation=conversation.id, input=question,
                                    include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": "alice", "score_threshold": 0.0}})
        assert r.status == "completed" and r.output_text == f"answer {turn}"
        item = r.output[0].model_dump()
        assert item["type"] == "memory_search_call"
        recalled.append([x["text"] for x in item["results"] if x["type"] == "memory"])
        _wait_job(http, item["memory_job_id"])
    assert recalled[0] == []
    assert {"Alice moved to Lisbon last year", "Alice is vegetarian"} <= set(recalled[1]) | set(recalled[2])
    memories = {m["memory"] for m in http.get("/memories", params={"user_id": "alice"}).json()["data"]}
    assert memories == {"Alice moved to Lisbon last year", "Alice is vegetarian"}
    items = strict("readme-walkthrough")[0].conversations.items.list(conversation.id, order="asc")
    assert [(i.type, i.role) for i in items.data] == [("message", "user"), ("message", "assistant")] * 3
    fake.responder = None


def _exchange_of(http: httpx.Client, response) -> None:
    assert _wait_job(http, _usage(response)["memory_job_id"])["status"] == "completed"


def test_stored_exchanges_can_be_listed_read_counted_and_deleted(strict, fake):
    """Seed 004's ``/vget``, ``/vdelete`` and ``/vstats`` over the API, under the scope rules of memories: a list
    names a scope and sees only its exchanges, an id is the tenant's, and a deleted exchange is no longer recalled."""
    client, http = strict("exchanges-api")
    other = strict("exchanges-api-other")[1]
    answers = []
    for user, question, answer in (("hal", "Where is the spare key?", "Under the blue flowerpot."),
                                   ("hal", "When is the bin collected?", "On Tuesday mornings."),
                                   ("ivy", "Where is the spare key?", "With the neighbour.")):
        fake.push(text(answer))
        r = client.responses.create(model="fake-model", input=question, extra_body={"memory": {"user_id": user}})
        _exchange_of(http, r)
        answers.append(r)
    page = http.get("/memories/exchanges", params={"user_id": "hal", "order": "asc"})
    assert page.status_code == 200, page.text
    hal = page.json()["data"]
    assert [e["assistant_response"] for e in hal] == ["Under the blue flowerpot.", "On Tuesday mornings."]
    assert all(e["object"] == "memory.exchange" and e["user_id"] == "hal" and e["id"].startswith("exch_")
               for e in hal)
    assert hal[0]["response_id"] == answers[0].id
    one = http.get(f"/memories/exchanges/{hal[0]['id']}").json()
    assert one == hal[0]
    assert other.get(f"/memories/exchanges/{hal[0]['id']}").status_code == 404  # another tenant's
    assert other.get("/memories/exchanges", params={"user_id": "hal"}).json()["data"] == []
    assert http.get("/memories/exchanges").status_code == 400  # a scope is required
    stats = http.get("/memories/stats", params={"user_id": "hal"}).json()
    assert stats["exchanges"] == 2 and stats["user_id"] == "hal"
    assert http.get("/memories/stats").json()["exchanges"] == 3

    fake.push(text("ok"))
    before = client.responses.create(model="fake-model", input="Where is the spare key?",
                                     extra_body={"memory": {"user_id": "hal", "remember": False}})
    assert hal[0]["id"] in _usage(before)["ids"]
    deleted = http.delete(f"/memories/exchanges/{hal[0]['id']}")
    assert deleted.json() == {"id": hal[0]["id"], "object": "memory.exchange.deleted", "deleted": True}
    assert http.delete(f"/memories/exchanges/{hal[0]['id']}").status_code == 404
    fake.push(text("ok"))
    after = client.responses.create(model="fake-model", input="Where is the spare key?",
                                    extra_body={"memory": {"user_id": "hal", "remember": False}})
    assert hal[0]["id"] not in _usage(after)["ids"]
    assert [e["id"] for e in http.get("/memories/exchanges", params={"user_id": "hal"}).json()["data"]] == \
        [hal[1]["id"]]
    assert http.get("/memories/stats", params={"user_id": "ivy"}).json()["exchanges"] == 1  # ivy's untouched


# A LoCoMo-shaped conversation: two named speakers, sessions on different days, turns that name each other.
_SESSIONS = [
    (1683554160, [("Caroline", "Hey Mel! I went to an LGBTQ support group yesterday and it was powerful."),
                              ("Melanie", "That's great, Caroline! I've been painting a lot lately, mostly sunsets."),
                              ("Caroline", "I'm thinking about a career in counseling after that group."),
                              ("Melanie", "You'd be good at it. My kids and I went camping at the lake last week.")]),
    (1686561000, [("Melanie", "Caroline, I signed up for a pottery class on Saturdays!"),
                              ("Caroline", "Pottery sounds fun, Mel. I've been reading Charlotte's Web again."),
                              ("Melanie", "We took the kids to the beach and built a huge sandcastle."),
                              ("Caroline", "I applied to a counseling master's program last month.")]),
    (1688409000, [("Caroline", "Mel, my adoption agency interview went well today."),
                              ("Melanie", "I'm so happy for you, Caroline! What did they ask?"),
                              ("Caroline", "They asked why I want to adopt, and about my support group."),
                              ("Melanie", "I finished a painting of the lake where we went camping.")])]
_QUESTIONS = ["What did Caroline research?", "When did Melanie go camping?",
              "What is Caroline's career plan?", "What does Melanie paint?",
              "What did Caroline say about the adoption agency?", "Which class did Melanie sign up for?"]


def test_recall_in_a_response_ranks_as_memory_search_does(lenient, fake):
    """Issue 30 §2: a question naming a speaker is asked the same way by recall inside a response and by
    ``POST /v1/memories/search`` (the names leave the text before it is embedded, on both paths), so both return
    the same memories in the same order with the same scores."""
    client, http = lenient("recall-same-path")
    for when, turns in _SESSIONS:
        response = http.post("/memories", json={
            "messages": [{"role": "user" if speaker == "Caroline" else "assistant", "content": said, "name": speaker}
                         for speaker, said in turns],
            "user_id": "conv-26", "infer": False, "timestamp": when})
        assert response.status_code == 200, response.text
    for question in _QUESTIONS:
        fake.push(text("Noted."))
        r = client.responses.create(model="fake-model", input=question, include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": "conv-26", "remember": False, "top_k": 10,
                                                           "score_threshold": 0.0, "exchanges": False}})
        recalled = [(x["id"], x["score"]) for x in r.output[0].model_dump()["results"]]
        found = http.post("/memories/search", json={"query": question, "user_id": "conv-26", "top_k": 10})
        assert found.status_code == 200, found.text
        searched = [(x["id"], x["score"]) for x in found.json()["data"]]
        assert len(recalled) == 10, question
        assert [i for i, _ in recalled] == [i for i, _ in searched], question
        assert [s for _, s in recalled] == pytest.approx([s for _, s in searched], abs=1e-4), question
