"""The scripted local model: deterministic, labelled, answering from the memory block; JSON requests get the schema's
empty instance; the model name ``engram-scripted`` reaches it whatever else is configured."""

from __future__ import annotations

import dataclasses
import json

from chalicelib.chat import prompts, routing, structured
from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult, TextDelta
from chalicelib.chat.scripted import LABEL, MODEL, ScriptedBackend
from chalicelib.config import Settings


def test_it_repeats_what_recall_gave_it_and_says_what_it_is():
    system = "Be brief.\n\n<memory>\nWhat you remember:\n- (2025-01-02) I'm vegetarian.\n</memory>"
    request = ChatRequest(model=MODEL, messages=[ChatMessage("system", system), ChatMessage("user", "Dinner?")])
    answer = ScriptedBackend().complete(request)
    assert answer.text.splitlines() == [LABEL, "You asked: Dinner?", "What I remember about you:",
                                        "- (2025-01-02) I'm vegetarian."]
    # The label says what is true however Engram is configured: the name reaches it even beside a chat model.
    assert "engram-scripted" in LABEL and "configured" not in LABEL
    pieces = list(ScriptedBackend().stream(request))
    assert "".join(p.text for p in pieces if isinstance(p, TextDelta)) == answer.text
    assert isinstance(pieces[-1], ChatResult) and pieces[-1].tool_calls == ()
    bare = ScriptedBackend().complete(ChatRequest(model=MODEL, messages=[ChatMessage("user", "Hi")]))
    assert bare.text.endswith("Nothing I remember about you was recalled for this.")


def test_json_requests_get_the_schemas_empty_instance():
    answer = structured.ask(ScriptedBackend(), MODEL, prompts.MEMORY_EXTRACTION, "User: hello")
    assert answer.value.facts == [] and answer.calls == 1
    plain = ScriptedBackend().complete(ChatRequest(model=MODEL, messages=[ChatMessage("user", "x")],
                                                   response_format={"type": "json_object"}))
    assert json.loads(plain.text) == {}


def test_the_model_name_always_reaches_it():
    bedrock = dataclasses.replace(Settings(), chat_provider="bedrock", chat_model_routes="*=bedrock")
    assert routing.provider_for(bedrock, MODEL) == "scripted" and routing.backend_key(bedrock, MODEL) == ("scripted",)
    assert isinstance(routing.build_backend(bedrock, "scripted"), ScriptedBackend)
    assert routing.provider_for(bedrock, "anything-else") == "bedrock"


def test_a_forced_tool_is_called_then_its_results_quoted():
    from chalicelib.chat.base import ToolSpec

    search = ToolSpec("file_search", "Search.", {"type": "object", "properties": {"queries": {"type": "array"}}})
    asked = [ChatMessage("user", "How does BM25 rank?")]
    call = ScriptedBackend().complete(ChatRequest(model=MODEL, messages=asked, tools=[search],
                                                  tool_choice={"name": "file_search"}))
    assert call.finish_reason == "tool_calls" and json.loads(call.tool_calls[0].arguments) == {
        "queries": ["How does BM25 rank?"]}
    assert ScriptedBackend().complete(ChatRequest(model=MODEL, messages=asked, tools=[search])).tool_calls == ()
    after = asked + [ChatMessage("assistant", None, call.tool_calls),
                     ChatMessage("tool", "bm25.txt: rare words count more", tool_call_id=call.tool_calls[0].id)]
    answer = ScriptedBackend().complete(ChatRequest(model=MODEL, messages=after, tools=[search]))
    assert answer.text.endswith("The search found: bm25.txt: rare words count more")
