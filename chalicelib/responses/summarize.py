"""Conversation summaries: older turns of a long chain replaced by a summary the model writes (design:
``../shared/seeds/000_3c3086e5f45e4164.txt``, "Conversation Summarization"; sliding window + summary).

Lazy (default): a request whose history exceeds ``settings.summary_threshold_tokens`` condenses it before the
model is called (:func:`condense`); the summary is stored with the new response and reused by the next turns until
the history grows past the threshold again (the old summary is then folded into the new one). Eager:
:func:`precompute_summaries` (a scheduled handler) condenses long chains that have no summary yet, storing the
summary on the chain's latest response, so the next request needs no summarization call.

Turns come from a ``previous_response_id`` chain or from a conversation (:mod:`turns`); the same code condenses
both. Window: the ``settings.summary_keep_turns`` most recent turns stay verbatim, but at least one turn is always
condensed (a few huge turns still shrink), and the window never opens with a function output whose call was
condensed (:func:`window_start`). Model: ``settings.summary_model`` (a smaller one) or the request's.
A summary (stored in ``responses.summary``, or ``conversations.summary``) is::

    {"text": str, "through": "resp_…" (last turn it covers; for a conversation the id of that turn's last item),
     "tokens": int (estimated, as history),
     "turns": int (turns it covers in total), "model": str, "prompt": "responses.conversation_summary@1" (the
     prompt's tag; absent from summaries stored before it was recorded), "input_tokens": int, "output_tokens": int,
     "created_at": int (Unix seconds)}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from chalicelib.chat import prompts
from chalicelib.chat.base import ChatMessage, ChatRequest, ChatResult
from chalicelib.config import Settings
from chalicelib.jobs.model import JobContext, JobResult
from chalicelib.responses import items, store
from chalicelib.responses.tokens import TOKENS_PER_MESSAGE, text_tokens
from chalicelib.responses.turns import Chain, Summary, Turn

logger = logging.getLogger("engram.responses")

# The summarization prompt (chalicelib.chat.prompts.CONVERSATION_SUMMARY) and the summary's length target
# (500 tokens) follow the seed design.
SUMMARY_MAX_TOKENS = 500
# Each message's text in the transcript is cut to this many characters (tool results can be long).
MAX_TRANSCRIPT_MESSAGE_CHARS = 4000


def transcript(earlier: str | None, messages: Sequence[ChatMessage]) -> str:
    """The text the summarizer reads: the earlier summary (if any), then one paragraph per message."""
    lines = [f"Earlier summary: {earlier}"] if earlier else []
    for message in messages:
        text = message.content or ""
        if message.tool_calls:
            text = (text + " " if text else "") + "; ".join(f"[calls {c.name}({c.arguments})]"
                                                             for c in message.tool_calls)
        label = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}[message.role]
        lines.append(f"{label}: {text[:MAX_TRANSCRIPT_MESSAGE_CHARS]}")
    return "\n\n".join(lines)


def summarize(settings: Settings, model: str, earlier: str | None,
              messages: Sequence[ChatMessage]) -> tuple[str, ChatResult, str]:
    """Ask the summary model for a summary of ``earlier`` + ``messages``: ``(text, result, model used)``.

    Raises:
        InvalidRequestError: no chat backend configured for the model (param ``model``).
        UpstreamError / UpstreamTimeoutError / RateLimitError: the call failed.
    """
    from chalicelib import deps

    used = settings.summary_model or model
    request = ChatRequest(model=used, messages=(ChatMessage("system", prompts.CONVERSATION_SUMMARY.system),
                                                ChatMessage("user", transcript(earlier, messages))),
                          tool_choice="none", max_output_tokens=SUMMARY_MAX_TOKENS)
    result = deps.chat_backend(used, settings).complete(request)
    return result.text.strip(), result, used


def condense(settings: Settings, chain: Chain, *, model: str) -> tuple[Chain, dict[str, Any]]:
    """Fold the older turns of ``chain`` (at least one turn) into its summary: ``(shorter chain, usage.summary block)``.

    Raises:
        what :func:`summarize` raises.
    """
    turns = list(chain.turns)
    keep = max(0, min(settings.summary_keep_turns, len(turns) - 1))
    split = window_start(turns, len(turns) - keep)
    older, recent = turns[:split], turns[split:]
    conversation = [item for turn in older for item in (*turn.input_items, *turn.output)]
    earlier = chain.summary["text"] if chain.summary else None
    text, result, used = summarize(settings, model, earlier, items.to_messages(conversation))
    summary: Summary = {
        "text": text, "through": older[-1].id, "tokens": TOKENS_PER_MESSAGE + text_tokens(text),
        "turns": len(older) + (chain.summary["turns"] if chain.summary else 0), "model": used,
        "prompt": prompts.CONVERSATION_SUMMARY.tag, "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "created_at": int(time.time())}
    usage = {"model": used, "model_calls": 1, "input_tokens": result.usage.input_tokens,
             "output_tokens": result.usage.output_tokens, "reused": False, "summarized_turns": summary["turns"],
             "summary_tokens": summary["tokens"]}
    return Chain(tuple(recent), summary), usage


def window_start(turns: Sequence[Turn], split: int) -> int:
    """Where the verbatim window may start (1 ≤ result ≤ ``len(turns)``): ``split``, or the nearest earlier turn —
    else the nearest later one — whose window holds no ``function_call_output`` answering a call folded into the
    summary (a chat backend refuses a tool message without its call; a call and its output added in different
    turns, e.g. a conversation's items call, would otherwise be split)."""

    def whole(start: int) -> bool:
        calls: set[Any] = set()
        for turn in turns[start:]:
            for item in (*turn.input_items, *turn.output):
                if item.get("type") == "function_call":
                    calls.add(item.get("call_id"))
                elif item.get("type") == "function_call_output" and item.get("call_id") not in calls:
                    return False
        return True

    for start in [*range(split, 0, -1), *range(split + 1, len(turns) + 1)]:
        if whole(start):
            return start
    return len(turns)


def reused_usage(summary: Summary, *, history_tokens: int) -> dict[str, Any]:
    """The ``usage.summary`` block when a cached summary is used as is (no model call spent now)."""
    return {"model": summary.get("model"), "model_calls": 0, "input_tokens": 0, "output_tokens": 0, "reused": True,
            "summarized_turns": summary.get("turns"), "summary_tokens": summary.get("tokens"),
            "history_tokens": history_tokens}


def precompute_summaries(settings: Settings, *, limit: int = 50, tenant_id: str | None = None) -> int:
    """Eager summarization: condense up to ``limit`` conversation heads whose history exceeds
    ``settings.summary_threshold_tokens`` and has no summary yet, longest first; returns how many summaries were
    computed. Runs as the table owner across tenants (or for ``tenant_id``); a failure on one chain is logged and
    skipped (it is retried on the next run).
    """
    from chalicelib.errors import EngramError
    from chalicelib.responses import chain as chains
    from chalicelib.store.db import connect

    done = 0
    with connect(settings) as conn:
        heads = store.unsummarized(conn, settings.summary_threshold_tokens, limit, tenant_id)
        for tenant, response_id, model in heads:
            chain = chains.load(conn, tenant, response_id, param="response_id")
            if not chain.turns or chain.tokens <= settings.summary_threshold_tokens:
                continue
            try:
                shorter, _ = condense(settings, chain, model=model)
            except EngramError:
                logger.exception("summarizing conversation ending %s failed", response_id)
                continue
            if shorter.summary is not None:  # condense always leaves one
                store.set_summary(conn, tenant, response_id, shorter.summary, shorter.tokens)
                done += 1
    return done


# Conversation heads one scheduled run summarizes at most (each is one model call).
SUMMARIES_PER_RUN = 50


def summarize_job(ctx: JobContext) -> JobResult:
    """The scheduled eager-summarization job (:mod:`chalicelib.jobs.table`): :func:`precompute_summaries` for the
    run's tenant (or all); a full run leaves a cursor, so the next tick carries on."""
    done = precompute_summaries(ctx.settings, limit=SUMMARIES_PER_RUN, tenant_id=ctx.tenant)
    return JobResult({"summaries": done}, cursor={"more": True} if done >= SUMMARIES_PER_RUN else None)
