"""Conversation summarization over real HTTP: it kicks in exactly when the history exceeds the threshold, the
summary is computed once (by the summary model), stored with the response and reused on the next turn; the
eager pass precomputes summaries for long chains; token counts and summary model calls show in ``usage``."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib.chat import prompts
from chalicelib.jobs import runner
from chalicelib.responses import chain as chains
from chalicelib.responses import history, store, summarize
from chalicelib.store.db import connect
from tests.fakes.chat_server import text

SUMMARY = "SUMMARY: the user is Ada, a lighthouse keeper on Skerry Rock."


def _is_summary_request(body: dict) -> bool:
    return body["messages"][0]["content"] == prompts.CONVERSATION_SUMMARY.system


@pytest.fixture()
def summarizer(fake):
    """The fake answers summarization requests with SUMMARY; everything else comes from its queue."""
    fake.responder = lambda body: text(SUMMARY, usage=(50, 12)) if _is_summary_request(body) else None
    yield
    fake.responder = None


def _history_tokens(api_settings, response_id: str) -> int:
    with connect(api_settings) as conn:
        return store.get(conn, "acme", response_id).history_tokens


def test_summary_kicks_in_exactly_above_the_threshold_and_is_reused(client, fake, api_settings, configure,
                                                                     summarizer):
    fake.push(text("Noted, Ada."), text("Storms, mostly."))
    long_intro = "I am Ada and I keep the lighthouse on Skerry Rock. " * 12
    first = client.responses.create(model="fake-model", input=long_intro)
    second = client.responses.create(model="fake-model", input="What do I fear?", previous_response_id=first.id)
    threshold = _history_tokens(api_settings, second.id)  # the history a third turn would carry

    configure(summary_threshold_tokens=threshold, summary_model="small-model")
    fake.push(text("At the threshold: no summary."))
    at = client.responses.create(model="fake-model", input="Hello again", previous_response_id=second.id)
    assert at.usage.model_dump()["summary"] is None
    assert not any(_is_summary_request(r) for r in fake.requests[2:])

    configure(summary_threshold_tokens=threshold - 1, summary_model="small-model")
    fake.clear()
    fake.push(text("Above it: summarized.", usage=(30, 5)))
    above = client.responses.create(model="fake-model", input="Who am I?", previous_response_id=second.id,
                                    instructions="Be kind.")
    summary_call, answer_call = fake.requests
    assert _is_summary_request(summary_call) and summary_call["model"] == "small-model"
    assert long_intro.strip()[:40] in summary_call["messages"][1]["content"]
    assert answer_call["model"] == "fake-model"
    assert answer_call["messages"][0]["role"] == "system"
    assert answer_call["messages"][0]["content"] == "Be kind.\n\n" + history.SUMMARY_HEADER + SUMMARY
    # keep_turns=1: only the second turn is verbatim; the long first turn is gone.
    assert [m["content"] for m in answer_call["messages"][1:]] == ["What do I fear?", "Storms, mostly.", "Who am I?"]
    usage = above.usage.model_dump()
    assert usage["summary"] == {"model": "small-model", "model_calls": 1, "input_tokens": 50, "output_tokens": 12,
                                "reused": False, "summarized_turns": 1, "history_tokens": threshold,
                                "summary_tokens": usage["summary"]["summary_tokens"]}
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (50 + 30, 12 + 5, 97)
    assert usage["model_calls"] == 1
    with connect(api_settings) as conn:
        cached = store.get(conn, "acme", above.id).summary
    assert cached["text"] == SUMMARY and cached["through"] == first.id and cached["model"] == "small-model"

    fake.clear()
    fake.push(text("Still Ada."))
    after = client.responses.create(model="fake-model", input="And now?", previous_response_id=above.id)
    (only_call,) = fake.requests  # no new summarization call: the cached summary is reused
    assert only_call["messages"][0]["content"] == history.SUMMARY_HEADER + SUMMARY
    assert [m["content"] for m in only_call["messages"][1:]] == [
        "What do I fear?", "Storms, mostly.", "Who am I?", "Above it: summarized.", "And now?"]
    reused = after.usage.model_dump()["summary"]
    assert reused["reused"] is True and reused["model_calls"] == 0 and reused["input_tokens"] == 0


def test_eager_pass_precomputes_summaries_for_long_chains(client, fake, api_settings, summarizer):
    fake.push(*(text(f"Answer {i}: " + "lorem ipsum " * 20) for i in range(3)))
    previous = None
    for i in range(3):
        previous = client.responses.create(model="fake-model", input=f"Question {i}: " + "dolor sit " * 20,
                                           previous_response_id=previous).id
    eager = dataclasses.replace(api_settings, summary_threshold_tokens=60, summary_keep_turns=1)
    fake.clear()
    # The memory lane runs the eager pass: ours, and any long chain an earlier test left.
    computed = runner.run_lane(eager, "memory_jobs")["summarize_conversations"].counts["summaries"]
    assert computed >= 1 and [_is_summary_request(r) for r in fake.requests] == [True] * computed
    assert summarize.precompute_summaries(eager, limit=10) == 0  # nothing left to do
    with connect(api_settings) as conn:
        head = store.get(conn, "acme", previous)
        chain = chains.load(conn, "acme", previous)
    assert head.summary["text"] == SUMMARY and head.summary["turns"] == 2
    assert [t.id for t in chain.turns] == [previous] and chain.summary == head.summary
    assert head.history_tokens == chain.tokens < 60 * 3
