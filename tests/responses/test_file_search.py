"""The agentic loop with ``file_search``: searches run by the server over the request's stores only (with
filters), results fed back labelled with citation markers, ``file_citation`` annotations for what the model cited,
``include`` semantics, an empty store, ``max_tool_calls``, ``parallel_tool_calls`` and forced tool choice."""

from __future__ import annotations

import json

import pytest

from tests.fakes.broken import BrokenEmbedder
from tests.fakes.chat_server import call, text, tool_calls

RED = b"Crimson ledger: the quarterly octarine budget is forty-two thousand florins."
BLUE = b"Cobalt notes: the octarine harpsichord is tuned every third Thursday."


@pytest.fixture(scope="module")
def library(client):
    """A store with two files (attributes team=red / team=blue) and an empty store."""
    red = client.files.create(file=("red.txt", RED), purpose="assistants")
    blue = client.files.create(file=("blue.txt", BLUE), purpose="assistants")
    store = client.vector_stores.create(name="library")
    for f, team in ((red, "red"), (blue, "blue")):
        attached = client.vector_stores.files.create_and_poll(f.id, vector_store_id=store.id,
                                                              attributes={"team": team})
        assert attached.status == "completed"
    empty = client.vector_stores.create(name="empty")
    return {"store": store.id, "empty": empty.id, "red": red.id, "blue": blue.id}


def _tool_message(request: dict) -> str:
    return next(m for m in reversed(request["messages"]) if m["role"] == "tool")["content"]


def test_search_filters_results_and_citations(client, fake, library):
    fake.push(tool_calls(call("file_search", {"queries": ["octarine budget"]})),
              text(f"The budget is forty-two thousand florins <|{library['red']}|>. "
                   f"Invented <|file-madeup123|> sources are dropped."))
    r = client.responses.create(
        model="fake-model", input="What is the octarine budget?",
        tools=[{"type": "file_search", "vector_store_ids": [library["store"]], "max_num_results": 5,
                "filters": {"type": "eq", "key": "team", "value": "red"}}],
        include=["file_search_call.results"])
    search, message = r.output
    assert search.type == "file_search_call" and search.id.startswith("fs_") and search.status == "completed"
    assert search.queries == ["octarine budget"]
    assert [res.file_id for res in search.results] == [library["red"]]  # the filter kept blue out
    assert search.results[0].filename == "red.txt" and search.results[0].attributes == {"team": "red"}
    assert 0.0 <= search.results[0].score <= 1.0 and "forty-two" in search.results[0].text
    assert r.output_text == "The budget is forty-two thousand florins. Invented sources are dropped."
    (citation,) = message.content[0].annotations
    assert citation.model_dump() == {"type": "file_citation", "file_id": library["red"], "filename": "red.txt",
                                     "index": len("The budget is forty-two thousand florins")}
    # What the model saw: the tool offered with queries only, results labelled with markers, the guide.
    first, second = fake.requests
    (tool,) = first["tools"]
    assert tool["function"]["name"] == "file_search"
    assert set(tool["function"]["parameters"]["properties"]) == {"queries"}
    assert "<|file-" in first["messages"][0]["content"]  # the citation guide in the system prompt
    assert f"<|{library['red']}|>" in _tool_message(second) and library["blue"] not in _tool_message(second)
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "file_search"
    # Stored with results; retrieved without them unless included (OpenAI returns null).
    assert client.responses.retrieve(r.id).output[0].results is None
    assert client.responses.retrieve(r.id, include=["file_search_call.results"]).output[0].results[0].file_id \
        == library["red"]


def test_results_are_null_without_include(client, fake, library):
    fake.push(tool_calls(call("file_search", {"query": "harpsichord"})), text("Every third Thursday."))
    r = client.responses.create(model="fake-model", input="When is it tuned?",
                                tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert r.output[0].results is None and r.output[0].queries == ["harpsichord"]
    assert library["blue"] in _tool_message(fake.requests[1])  # the model still got them
    assert r.tools[0].model_dump(exclude_none=True) == {
        "type": "file_search", "vector_store_ids": [library["store"]], "max_num_results": 20,
        "ranking_options": {"ranker": "auto", "score_threshold": 0.0}}


def test_empty_store_returns_nothing_and_the_model_still_answers(client, fake, library):
    fake.push(tool_calls(call("file_search", {"queries": ["anything"]})), text("I found nothing about that."))
    r = client.responses.create(model="fake-model", input="Anything?", include=["file_search_call.results"],
                                tools=[{"type": "file_search", "vector_store_ids": [library["empty"]]}])
    assert r.output[0].results == [] and r.output[0].status == "completed"
    assert r.output_text == "I found nothing about that." and r.status == "completed"
    assert "No results found" in _tool_message(fake.requests[1])


def _searches_while_offered(body: dict):
    offered = any(t["function"]["name"] == "file_search" for t in body.get("tools") or [])
    return tool_calls(call("file_search", {"queries": ["again"]})) if offered else text("Final answer.")


def test_max_tool_calls_stops_a_model_that_keeps_searching(client, fake, library):
    fake.responder = _searches_while_offered
    try:
        r = client.responses.create(model="fake-model", input="Search forever", max_tool_calls=2,
                                    tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    finally:
        fake.responder = None
    assert [item.type for item in r.output] == ["file_search_call", "file_search_call", "message"]
    assert r.status == "completed" and r.incomplete_details is None and r.max_tool_calls == 2  # as OpenAI
    assert len(fake.requests) == 3 and "tools" not in fake.requests[2]
    assert r.usage.model_dump()["model_calls"] == 3


def test_search_calls_beyond_the_budget_are_ignored(client, fake, library):
    # This model ignores the tool list entirely: the call it makes when no longer offered search is dropped.
    fake.default = tool_calls(call("file_search", {"queries": ["x"]}), call("file_search", {"queries": ["y"]}))
    try:
        r = client.responses.create(model="fake-model", input="Search", max_tool_calls=3,
                                    tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    finally:
        fake.default = None
    assert [item.type for item in r.output] == ["file_search_call"] * 3 and r.status == "completed"
    assert len(fake.requests) == 3


def test_parallel_tool_calls_false_runs_only_the_first_call(client, fake, library):
    fake.push(tool_calls(call("file_search", {"queries": ["budget"]}), call("file_search", {"queries": ["tuning"]})),
              text("Done."))
    r = client.responses.create(model="fake-model", input="Both?", parallel_tool_calls=False,
                                tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert [item.type for item in r.output] == ["file_search_call", "message"]
    assert fake.requests[0]["parallel_tool_calls"] is False
    assert len(fake.requests[1]["messages"][-2]["tool_calls"]) == 1  # the dropped call is not in the history


def test_forced_file_search_applies_to_the_first_call_only(client, fake, library):
    fake.push(tool_calls(call("file_search", {"queries": ["budget"]})), text("Forty-two."))
    client.responses.create(model="fake-model", input="Budget?", tool_choice={"type": "file_search"},
                            tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert fake.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "file_search"}}
    assert fake.requests[1]["tool_choice"] == "auto"


def test_garbled_search_arguments_fail_the_call_not_the_response(client, fake, library):
    fake.push(tool_calls(call("file_search", "{not json")), text("Sorry, let me answer directly."))
    r = client.responses.create(model="fake-model", input="?",
                                tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert r.output[0].status == "failed" and r.output[0].queries == []
    assert r.status == "completed" and r.output_text == "Sorry, let me answer directly."


@pytest.mark.parametrize("stream", [False, True])
def test_a_failing_search_fails_the_call_not_the_response(client, fake, library, stream):
    """Seed 003: the embedder (or the vector backend) failing makes a ``failed`` file_search_call the model is told
    about; the model still answers and the response completes (before: the whole response failed)."""
    from chalicelib import deps

    good = deps.embedder()
    deps.set_embedder(BrokenEmbedder())
    fake.push(tool_calls(call("file_search", {"queries": ["budget"]})), text("I could not search your files."))
    kwargs = {"model": "fake-model", "input": "What is the octarine budget?",
              "tools": [{"type": "file_search", "vector_store_ids": [library["store"]]}]}
    try:
        if stream:
            with client.responses.stream(**kwargs) as events:
                types = [event.type for event in events]
                r = events.get_final_response()
            assert types[-1] == "response.completed" and "response.file_search_call.completed" not in types
        else:
            r = client.responses.create(**kwargs)
    finally:
        deps.set_embedder(good)
    assert r.status == "completed" and r.output_text == "I could not search your files."
    assert r.output[0].type == "file_search_call" and r.output[0].status == "failed"
    assert "The search failed" in _tool_message(fake.requests[-1])
    assert client.responses.retrieve(r.id).status == "completed"


def test_citations_from_an_earlier_turn_still_resolve(client, fake, library):
    fake.push(tool_calls(call("file_search", {"queries": ["tuning"]})), text("Thursdays."))
    first = client.responses.create(model="fake-model", input="Tuning?",
                                    tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    fake.push(text(f"As I said, every third Thursday <|{library['blue']}|>."))
    second = client.responses.create(model="fake-model", input="Source?", previous_response_id=first.id)
    assert second.output[0].content[0].annotations[0].file_id == library["blue"]
    history = fake.requests[2]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert json.loads(history[1]["tool_calls"][0]["function"]["arguments"]) == {"queries": ["tuning"]}


def test_results_carry_relevance_and_the_threshold_drops_nonsense(client, fake, library):
    """A ``file_search`` result's score is the same relevance vector-store search reports, so
    ``score_threshold`` 0.5 keeps the answer and drops what random words find."""
    tool = {"type": "file_search", "vector_store_ids": [library["store"]],
            "ranking_options": {"score_threshold": 0.5}}
    fake.push(tool_calls(call("file_search", {"queries": ["quarterly octarine budget"]})), text("42k florins."),
              tool_calls(call("file_search", {"queries": ["zebra quantum xylophone"]})), text("Nothing found."))
    found = client.responses.create(model="fake-model", input="Budget?", tools=[tool],
                                    include=["file_search_call.results"]).output[0]
    page = client.vector_stores.search(library["store"], query="quarterly octarine budget")
    assert [r.file_id for r in found.results] == [h.file_id for h in page.data if h.score >= 0.5]
    assert found.results[0].file_id == library["red"] and found.results[0].score == page.data[0].score >= 0.5
    nothing = client.responses.create(model="fake-model", input="Zebras?", tools=[tool],
                                      include=["file_search_call.results"]).output[0]
    assert nothing.results == [] and client.vector_stores.search(library["store"], query="zebra quantum xylophone",
                                                                 ranking_options={"score_threshold": 0.5}).data == []


def test_a_previous_output_replays_unchanged_as_input(client, fake, library):
    """``input=[*previous.output, ...]`` — the SDK sends back every field of its output items (``status``,
    ``logprobs``, ``annotations``, ``results`` ...): all accepted, none an unknown parameter."""
    fake.push(tool_calls(call("file_search", {"queries": ["octarine budget"]})),
              text(f"Forty-two thousand florins <|{library['red']}|>."))
    first = client.responses.create(
        model="fake-model", input="What is the octarine budget?", include=["file_search_call.results"],
        tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert [item.type for item in first.output] == ["file_search_call", "message"]
    fake.push(text("Yes, florins."))
    second = client.responses.create(model="fake-model", input=[*first.output, {"role": "user", "content": "Florins?"}],
                                     tools=[{"type": "file_search", "vector_store_ids": [library["store"]]}])
    assert second.output_text == "Yes, florins."
    listed = client.responses.input_items.list(second.id, order="asc").data
    assert [item.type for item in listed] == ["file_search_call", "message", "message"]
    # The replayed search reaches the model as the call and its results.
    assert "forty-two" in _tool_message(fake.requests[-1])
