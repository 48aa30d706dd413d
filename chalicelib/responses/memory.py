"""Memory around a response (seed 000, "Data Flow: Complete Request with Memory and RAG"; seed 004, "Context
Retrieval", "Graceful Degradation"). Opt-in (seed 000, open question 3): on when the request's ``memory`` extension,
its agent profile or the tenant's defaults turn it on (:func:`resolve`, field by field: request → agent → tenant).

- **Recall**, before the first model call: the user's message is searched against the scope's memories and its
  earlier exchanges (a request sending none, such as a tool loop's function outputs chained by
  ``previous_response_id``, searches for the last user message it continues, and its exchange keeps that
  question); the hits are put into the instructions in one delimited block (:data:`BLOCK_START` …
  :data:`BLOCK_END`). What recall did is always reported in the response's ``usage.memory`` (:func:`usage_of`:
  status, counts, ids, cost, the remember job's id); the whole ``memory_search_call`` item (queries, scope,
  results) is an Engram extension shown only to a request that asks for it with
  ``include=["memory_search_call.results"]`` — then as output item 0, streamed like OpenAI's tool calls — so
  clients that know only OpenAI's item types never see it, and a client can still audit what the model was told.
  The item may be sent back as input or as a conversation item: it is accepted and dropped (each response recalls
  afresh). A failing recall is logged and counted, and the response goes on without memories.
- **Remember**, after the response is stored: one job (:func:`chalicelib.memory.remember`) stores the exchange and
  extracts facts from it with the memory model (when one is configured) in the background; the response never
  waits for the model, a redelivered job changes nothing, and a failure to dispatch is logged and counted but
  never fails the response.

Both go through the memory service (:mod:`chalicelib.memory`) on the request's connections: recall reads on the
connection of the request's other reads and embeds the user's message once for memories and exchanges alike.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from chalicelib import ids, memory, observability
from chalicelib.config import Settings
from chalicelib.errors import InvalidRequestError
from chalicelib.memory import MemoryScope
from chalicelib.responses.schemas import MemoryOptions
from chalicelib.validation import validate

__all__ = ["BLOCK_END", "BLOCK_START", "MemoryPlan", "Recalled", "failure_reason", "recall_for", "remember",
           "remembered", "resolve", "usage_of"]

logger = logging.getLogger("engram.responses")

BLOCK_START = "<memory>"
BLOCK_END = "</memory>"
DEFAULT_TOP_K = 5
# Recalled memories scoring below this are left out (a memory's score: its match scaled by freshness and
# importance, times its decay; chalicelib.memory.recall). Set so a fresh memory of importance 0.5 passes at the same
# match as under the additive score it replaced (0.8 · match + 0.15 ≥ 0.3 ⟺ match ≥ 0.1875, the balanced
# strategy; now 0.95 · match ≥ 0.18); an unused old memory now passes at match ≥ 0.24 instead of 0.35.
DEFAULT_SCORE_THRESHOLD = 0.18
# Characters of an earlier exchange shown in the block (each side).
EXCHANGE_SNIPPET_CHARS = 400
RECALL_FAILURES = "MemoryRecallFailures"
REMEMBER_FAILURES = "MemoryRememberFailures"
RECALL_LATENCY = "MemoryRecallLatency"


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Memory settings of one response, resolved: the ``scope`` and what to do."""

    scope: MemoryScope
    recall: bool
    remember: bool
    top_k: int
    score_threshold: float
    exchanges: bool
    exchange_threshold: float
    summarization: bool


@dataclass(slots=True)
class Recalled:
    """What recall found: the ``memory_search_call`` ``item`` (results included, its ``usage``: embedding and
    injected tokens, milliseconds; output only when included), the instructions ``block`` (None when nothing was
    found) and the ids of what was shown (``prior_ids``)."""

    item: dict[str, Any]
    block: str | None
    prior_ids: list[str] = field(default_factory=list)


def resolve(requested: dict[str, Any] | bool | None, *, agent_memory: dict[str, Any] | None, agent_id: str | None,
            tenant_defaults: dict[str, Any] | None, user: str | None) -> MemoryPlan | None:
    """The response's memory plan, or None when memory is off: ``memory: false`` turns it off whatever the
    agent or tenant say; otherwise any layer that gives memory settings turns it on, and each field comes from the
    first layer that sets it.

    Raises:
        InvalidRequestError: a malformed ``memory`` object (``param`` ``memory.<field>``); memory is on but no
            scope can be named (no ``memory.user_id``, request ``user``, ``agent_id`` or agent profile).
    """
    if requested is False:
        return None
    layers: list[MemoryOptions] = []
    if isinstance(requested, dict):
        layers.append(validate(MemoryOptions, requested, prefix="memory"))
    for stored in (agent_memory, tenant_defaults):
        if stored is not None:
            layers.append(validate(MemoryOptions, stored))
    if not layers and requested is not True:
        return None

    def pick(name: str, default: Any) -> Any:
        return next((getattr(layer, name) for layer in layers if getattr(layer, name) is not None), default)

    scope_ids = {"user_id": pick("user_id", user), "agent_id": pick("agent_id", agent_id),
                 "run_id": pick("run_id", None)}
    if not any(scope_ids.values()):
        raise InvalidRequestError("Memory is on for this response but names no scope: set 'memory.user_id' (or the "
                                  "request's 'user'), 'memory.agent_id' or use an agent profile.",
                                  param="memory.user_id", code="missing_required_parameter")
    plan = MemoryPlan(scope=MemoryScope(**scope_ids), recall=pick("recall", True), remember=pick("remember", True),
                      top_k=pick("top_k", DEFAULT_TOP_K), score_threshold=pick("score_threshold",
                                                                                DEFAULT_SCORE_THRESHOLD),
                      exchanges=pick("exchanges", True),
                      exchange_threshold=pick("exchange_threshold", memory.EXCHANGE_SIMILARITY),
                      summarization=pick("summarization", True))
    return plan if plan.recall or plan.remember or not plan.summarization else None


def recall_for(conn: psycopg.Connection, settings: Settings, tenant_id: str, plan: MemoryPlan,
               query: str) -> Recalled:
    """Recall for ``query`` (the user's message), on the request's tenant connection ``conn``: the scope's best
    memories and, when enabled, its most similar earlier exchanges (seed 004: similarity ≥ 0.65), one embedding
    of the query for both. Never raises: a failure gives a ``failed`` item and no block (logged, counted as
    ``MemoryRecallFailures``)."""
    started = time.perf_counter()
    # "content": [] because the openai SDK parses an output item of a type it does not know as a
    # ResponseOutputMessage, whose content the agents SDK's helpers iterate (ItemHelpers.text_message_outputs raised
    # "'NoneType' object is not iterable" on the included item): an empty list reads as a message with no text.
    item: dict[str, Any] = {"id": ids.new_id(ids.MEMORY_SEARCH_CALL), "type": "memory_search_call",
                            "status": "completed", "queries": [query], "results": [], **plan.scope.as_dict(),
                            "content": []}
    if not query.strip():
        return Recalled(item, None)
    try:
        ctx = memory.context(settings, tenant_id)
        found = memory.recall_context(conn, ctx, plan.scope, query, top_k=plan.top_k,
                                      score_threshold=plan.score_threshold, with_exchanges=plan.exchanges,
                                      exchange_threshold=plan.exchange_threshold)
    except Exception as exc:
        logger.exception("memory recall failed; the response goes on without memories")
        observability.record(RECALL_FAILURES, 1, "Count")
        item["status"] = "failed"
        item["reason"] = failure_reason(exc)
        item["usage"] = {"embedding_tokens": 0, "injected_tokens": 0,
                         "latency_ms": round((time.perf_counter() - started) * 1000.0, 3)}
        return Recalled(item, None)
    results: list[dict[str, Any]] = [
        {"type": "memory", "id": h.memory.id, "text": h.memory.memory, "memory_type": h.memory.memory_type,
         "score": h.score, "valid_from": int(h.memory.valid_from.timestamp())} for h in found.memories]
    results += [{"type": "exchange", "id": e.exchange.id, "text": _exchange_line(e.exchange.user_prompt,
                                                                               e.exchange.assistant_response),
                 "score": round(e.similarity, 6), "valid_from": int(e.exchange.created_at.timestamp())}
                for e in found.exchanges]
    item["results"] = results
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    observability.record(RECALL_LATENCY, elapsed_ms)
    block = _block(results) if results else None
    item["usage"] = {"embedding_tokens": found.embedding_tokens,
                     "injected_tokens": ctx.embedder.tokenizer.count(block) if block else 0,
                     "latency_ms": round(elapsed_ms, 3)}
    return Recalled(item, block, [r["id"] for r in results])


def usage_of(recalled: Recalled | None, plan: MemoryPlan) -> dict[str, Any]:
    """``usage.memory`` of a response with memory on (a new dict): ``status`` (``completed`` or ``failed``; ``off``
    when recall is off, ``recalled`` None) and ``reason`` (why recall failed or is off; null when it completed),
    ``memories`` and ``exchanges`` (how many of each were recalled), ``ids`` (theirs, in the block's order) and
    ``scores`` (each one's recall score, in the same order: a memory's as ``/v1/memories/search`` scores it, an
    exchange's similarity),
    ``embedding_tokens``, ``injected_tokens`` and ``latency_ms`` (0 when recall did not get that far); then what
    happens to the exchange: ``remember`` (``off`` with ``memory.remember: false``; set by
    :func:`remembered` once the response is done: ``queued``, ``skipped`` or ``failed``), ``remember_reason``
    (why it was skipped or failed) and ``memory_job_id`` (the remember job; null when none was dispatched)."""
    item: dict[str, Any] = recalled.item if recalled is not None else {"status": "off", "reason": "recall=false"}
    results = item.get("results") or []
    score = {r.get("id"): r.get("score") for r in results}
    spent = item.get("usage") or {}
    return {"status": item.get("status", "completed"), "reason": item.get("reason"),
            "memories": sum(1 for r in results if r.get("type") == "memory"),
            "exchanges": sum(1 for r in results if r.get("type") == "exchange"),
            "ids": list(recalled.prior_ids) if recalled is not None else [],
            "scores": [score.get(i) for i in recalled.prior_ids] if recalled is not None else [],
            "embedding_tokens": spent.get("embedding_tokens", 0), "injected_tokens": spent.get("injected_tokens", 0),
            "latency_ms": spent.get("latency_ms", 0.0), "memory_job_id": None,
            "remember": "pending" if plan.remember else "off",
            "remember_reason": None if plan.remember else "remember=false"}


def remembered(usage: dict[str, Any], status: str, reason: str | None = None, job_id: str | None = None) -> None:
    """Record in ``usage`` (a :func:`usage_of` dict) what happened to the exchange: ``status`` ``queued`` (with
    ``job_id``), ``skipped`` or ``failed`` (with ``reason``, e.g. ``store=false``)."""
    usage.update(remember=status, remember_reason=reason, memory_job_id=job_id)


def failure_reason(exc: BaseException) -> str:
    """A client-safe line saying why a memory or file search step failed: an Engram error's own message (e.g.
    "The embedding service did not answer in time"), else only the exception's kind (internals never reach the
    client)."""
    from chalicelib.errors import EngramError

    if isinstance(exc, EngramError):
        return exc.message[:300]
    return f"internal error ({type(exc).__name__})"


def remember(conn: psycopg.Connection, settings: Settings, tenant_id: str, plan: MemoryPlan, *, response_id: str,
             thread_id: str, prompt: str, answer: str, prior_ids: list[str]) -> tuple[str, str | None, str | None]:
    """Dispatch the job that stores this exchange and extracts memories from it (with the memory model when one
    is configured), on the tenant connection ``conn``. Returns ``(status, reason, job_id)`` for :func:`remembered`:
    ``("queued", None, "memjob_…")``, ``("skipped", why, None)`` when there was nothing to remember, or
    ``("failed", why, None)`` when it could not be dispatched (logged, counted as ``MemoryRememberFailures``; the
    response is not affected)."""
    try:
        job = memory.remember(conn, memory.context(settings, tenant_id), plan.scope, response_id=response_id,
                              thread_id=thread_id, session_id=plan.scope.run_id, prompt=prompt, answer=answer,
                              prior_ids=prior_ids)
    except Exception as exc:
        logger.exception("dispatching the memory job of response %s failed", response_id)
        observability.record(REMEMBER_FAILURES, 1, "Count")
        return "failed", failure_reason(exc), None
    if job is None:
        return "skipped", "nothing to remember (no question or no answer)", None
    return "queued", None, job.id


def _exchange_line(prompt: str, answer: str) -> str:
    return f"User: {_clip(prompt)}\nAssistant: {_clip(answer)}"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCHANGE_SNIPPET_CHARS else text[:EXCHANGE_SNIPPET_CHARS - 1] + "…"


def _block(results: list[dict[str, Any]]) -> str:
    """The instructions block: memories first, then earlier exchanges, each dated."""
    lines = [BLOCK_START, "What you remember from earlier conversations with this user (it may be outdated; what the "
             "user says now wins):"]
    for r in results:
        day = time.strftime("%Y-%m-%d", time.gmtime(r["valid_from"]))
        if r["type"] == "memory":
            lines.append(f"- ({day}) {r['text']}")
    earlier = [r for r in results if r["type"] == "exchange"]
    if earlier:
        lines.append("Earlier exchanges that may be relevant:")
        for r in earlier:
            day = time.strftime("%Y-%m-%d", time.gmtime(r["valid_from"]))
            lines.append(f"- ({day}) " + r["text"].replace("\n", " / "))
    lines.append(BLOCK_END)
    return "\n".join(lines)
