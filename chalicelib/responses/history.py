"""Conversation history: the turns a request continues, as chat messages.

The turns come as a :class:`~chalicelib.responses.turns.Chain` — a ``previous_response_id`` chain walked back from
the named response to its start or to the most recent cached summary's boundary (:mod:`chain`), or a conversation's
items after its cached summary (:mod:`conversations`); this module does not care which. History size is estimated
in tokens (:mod:`tokens`): the summary's tokens plus each verbatim turn's ``turn_tokens``. When it exceeds
``settings.summary_threshold_tokens`` (strictly), older turns are condensed (:mod:`summarize`) and the caller caches
the new summary (on the response being created, or on the conversation), so the next turn reuses it.
``instructions`` are never part of history (OpenAI: they are not carried over through ``previous_response_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.chat.base import ChatMessage
from chalicelib.config import Settings
from chalicelib.responses import citations, items, summarize
from chalicelib.responses.turns import Chain, Summary

SUMMARY_HEADER = "Summary of the earlier conversation (older turns were condensed):\n"


@dataclass(frozen=True)
class History:
    """What a new request gets from its chain: ``messages`` (verbatim turns), ``preamble`` (the summary text for
    the system prompt, or None), ``tokens`` (estimated, after condensing), ``summary`` (the summary in effect),
    ``computed`` (True when the summary was made for this request: cache it on the new response), ``usage``
    (the ``usage.summary`` block, None when no summary is involved) and ``sources`` (citable files seen)."""

    messages: tuple[ChatMessage, ...]
    preamble: str | None
    tokens: int
    summary: Summary | None
    computed: bool
    usage: dict[str, Any] | None
    sources: dict[str, str]


EMPTY = History(messages=(), preamble=None, tokens=0, summary=None, computed=False, usage=None, sources={})


def build(settings: Settings, chain: Chain, *, model: str) -> History:
    """The history a new request sends, condensing older turns first when the chain is over the threshold.

    Raises:
        UpstreamError / UpstreamTimeoutError / RateLimitError / InvalidRequestError: the summarization call
            failed (:func:`chalicelib.responses.summarize.condense`).
    """
    before = chain.tokens
    computed = before > settings.summary_threshold_tokens and len(chain.turns) > 0
    usage = None
    if computed:
        chain, usage = summarize.condense(settings, chain, model=model)
        usage["history_tokens"] = before
    elif chain.summary is not None:
        usage = summarize.reused_usage(chain.summary, history_tokens=before)
    conversation = [item for turn in chain.turns for item in (*turn.input_items, *turn.output)]
    sources: dict[str, str] = {}
    for item in conversation:
        if item.get("type") == "file_search_call":
            sources.update(citations.sources(item.get("results")))
    preamble = SUMMARY_HEADER + chain.summary["text"] if chain.summary else None
    return History(messages=tuple(items.to_messages(conversation)), preamble=preamble, tokens=chain.tokens,
                   summary=chain.summary, computed=computed, usage=usage, sources=sources)
