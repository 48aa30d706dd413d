"""Adding memories: what ``POST /v1/memories`` does, inline or in the asynchronous add job.

Without inference (``infer: false``) every non-system message becomes a memory as written (exact duplicates in
the scope are ``NOOP``). With inference the cheap checks come first and the model only sees what is new:

1. a single-message add whose text is an exact (normalised-hash) or near duplicate (cosine ≥
   ``Settings.memory_near_duplicate``, documented default 0.95) of a stored memory is ``NOOP`` — no model call;
2. one **extraction** call turns the conversation into facts (:data:`chalicelib.chat.prompts.MEMORY_EXTRACTION`);
3. facts that are exact or near duplicates of stored memories are ``NOOP`` (their memory's confidence rises);
4. one **decision** call, for the whole batch, over the stored memories most similar to the rest: ``ADD``,
   ``UPDATE`` (a new version; the old one gets ``valid_to`` and ``superseded_by``), ``INVALIDATE`` (the
   contradicted memory is closed and kept, the new fact added) or ``NOOP``.

Both calls ask for JSON with ``response_format`` and validate the answer against the prompt's pydantic model
(:mod:`chalicelib.chat.structured`); a malformed answer is sent back once with what is wrong, a second one fails
the add with nothing written. Every memory a model's answer wrote records the prompts' ``name@version`` tags
(``prompt_version``). Every write happens in one transaction after the model calls, under a per-scope advisory
lock (two concurrent adds of one fact store it once); ``usage`` reports the tokens of every call.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from chalicelib import ids
from chalicelib.chat import prompts, structured
from chalicelib.chat.base import ChatBackend, Usage
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.errors import UpstreamError
from chalicelib.memory import exchanges, store
from chalicelib.memory.exchanges import NewExchange
from chalicelib.memory.model import Memory, MemoryScope, normalise, text_hash

__all__ = ["AddRequest", "AddResult", "Change", "InputMessage", "add", "after_write", "apply", "plan"]

logger = logging.getLogger("engram.memory")

# A fact heard again raises its memory's confidence by this much (capped at 1).
CONFIDENCE_STEP = 0.05
# Stored memories shown to the decision call per new fact (seed 004's context retrieval shows 5).
DECISION_NEIGHBOURS = 5
# Categories kept per memory (the request's, then the extracted tags).
MAX_CATEGORIES = 16


@dataclass(frozen=True, slots=True)
class InputMessage:
    """One message of an add: ``role`` (user, assistant, system), ``content``, the speaker's ``name`` if any and
    ``metadata`` of its own (merged over the request's for the memory stored verbatim from it)."""

    role: str
    content: str
    name: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class AddRequest:
    """A validated add. ``timestamp`` is when the conversation happened (``valid_from`` of what it teaches and the
    date extraction resolves relative times against; None: now); ``memory_type`` overrides the extracted types
    (and is every memory's type without inference)."""

    messages: tuple[InputMessage, ...]
    scope: MemoryScope
    infer: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    memory_type: str | None = None
    categories: tuple[str, ...] = ()
    importance: float | None = None
    pinned: bool = False
    expires_at: datetime | None = None
    timestamp: datetime | None = None
    source_kind: str = "api"
    source_id: str | None = None
    source_type: str | None = None
    verified: bool = False
    exchange: NewExchange | None = None
    model: str | None = None  # the memory model chosen when the add was accepted (None: the configured one)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (times as ISO 8601), stored with an asynchronous add's job."""
        out = dataclasses.asdict(self)
        out["exchange"] = self.exchange.to_json() if self.exchange is not None else None
        for name in ("expires_at", "timestamp"):
            value = getattr(self, name)
            out[name] = value.isoformat() if value is not None else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AddRequest:
        """The request :meth:`to_json` wrote."""
        values = dict(data)
        values["messages"] = tuple(InputMessage(**m) for m in data["messages"])
        values["scope"] = MemoryScope(**data["scope"])
        values["categories"] = tuple(data.get("categories") or ())
        values["exchange"] = NewExchange.from_json(data["exchange"]) if data.get("exchange") else None
        for name in ("expires_at", "timestamp"):
            values[name] = datetime.fromisoformat(data[name]) if data.get(name) else None
        return cls(**values)


@dataclass(slots=True)
class Change:
    """One planned or applied change: ``event`` (ADD, UPDATE, INVALIDATE, NOOP), the memory's ``text``, its facts
    (type, confidence, importance, tags), the stored memory it updates, contradicts or repeats (``target``) and,
    once applied, the memory ``id`` (the new memory for ADD and INVALIDATE; for UPDATE the target's, which keeps
    its id while its old version is kept as a closed row)."""

    event: str
    text: str
    memory_type: str = "fact"
    confidence: float = 1.0
    importance: float = 0.5
    tags: list[str] = field(default_factory=list)
    speaker: str | None = None
    role: str | None = None
    target: Memory | None = None
    embedding: Any = None
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    prompt_version: str | None = None  # the prompts whose answers wrote the text (None: the user's own words)

    def result(self) -> dict[str, Any]:
        """The add's result entry: ``{"id", "event", "memory", "memory_type", "previous_memory"?, ...}``."""
        out: dict[str, Any] = {"id": self.id if self.id else (self.target.id if self.target else None),
                               "event": self.event, "memory": self.text, "memory_type": self.memory_type}
        if self.target is not None and self.event in ("UPDATE", "INVALIDATE"):
            out["previous_memory"] = self.target.memory
            out["previous_id"] = self.target.id
        return out


@dataclass(slots=True)
class AddResult:
    """What an add did (``changes``, in order) and what it cost (``usage``: model calls and their tokens)."""

    changes: list[Change]
    model: str | None = None
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    exchange_vector: Any = None  # the embedding of the request's exchange, when it records one
    prompts: list[str] = field(default_factory=list)  # name@version of every prompt asked, in order

    def usage_dict(self) -> dict[str, Any]:
        """``{"model", "model_calls", "input_tokens", "output_tokens", "total_tokens", "prompts"}``."""
        return {"model": self.model, "model_calls": self.model_calls, "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "total_tokens": self.usage.input_tokens + self.usage.output_tokens, "prompts": list(self.prompts)}


def add(conn: psycopg.Connection, settings: Settings, tenant_id: str, request: AddRequest, *, embedder: Embedder,
        backend: ChatBackend | None, model: str | None) -> AddResult:
    """Plan the add (model calls included) and apply it in one transaction.

    Raises:
        UpstreamError / UpstreamTimeoutError / RateLimitError: a model or embedding call failed (nothing written);
            also (502, code ``memory_model_output_invalid``) the model answered malformed JSON twice.
    """
    result = plan(conn, settings, tenant_id, request, embedder=embedder, backend=backend, model=model)
    with conn.transaction():
        apply(conn, tenant_id, request, result, embedder=embedder)
    after_write(conn, settings, tenant_id, request)
    return result


def after_write(conn: psycopg.Connection, settings: Settings, tenant_id: str, request: AddRequest) -> None:
    """After an add committed: its user's history written to a backend that takes writes at once
    (:func:`chalicelib.search.backends.partition_sync.after_add`: Qdrant; pgvector's bodies are the
    ``index_memories`` job's). Never raises."""
    from chalicelib.search.backends import partition_sync
    from chalicelib.search.corpus import EXCHANGES, MEMORIES

    user_id = request.scope.user_id
    if user_id is None:
        return
    partition_sync.after_add(conn, settings, MEMORIES, tenant_id, user_id)
    if request.exchange is not None:
        partition_sync.after_add(conn, settings, EXCHANGES, tenant_id, user_id)


def plan(conn: psycopg.Connection, settings: Settings, tenant_id: str, request: AddRequest, *, embedder: Embedder,
         backend: ChatBackend | None, model: str | None) -> AddResult:
    """Decide what the add changes, reading only: the model calls and the embeddings happen here."""
    result = _plan(conn, settings, tenant_id, request, embedder=embedder, backend=backend, model=model)
    if request.exchange is not None:
        result.exchange_vector = embedder.embed([exchanges.text_of(request.exchange)])[0]
    return result


def _plan(conn: psycopg.Connection, settings: Settings, tenant_id: str, request: AddRequest, *, embedder: Embedder,
          backend: ChatBackend | None, model: str | None) -> AddResult:
    if not request.messages:
        return AddResult([], model=model)
    if not request.infer:
        return AddResult(_verbatim(conn, tenant_id, request, embedder))
    assert backend is not None and model is not None, "inference needs a chat backend and a model"
    result = AddResult([], model=model)
    said = [m for m in request.messages if m.role == "user"] or [m for m in request.messages if m.role != "system"]
    if len(said) == 1 and _known(conn, settings, tenant_id, request.scope, said[0].content, embedder, result):
        return result
    facts = _extract(backend, model, request, result)
    if not facts:
        return result
    fresh: list[Change] = []
    extracted = result.prompts[-1]
    for fact in facts:
        change = Change("ADD", fact.fact, memory_type=request.memory_type or fact.type,
                        confidence=fact.confidence, importance=_importance(request, fact.importance),
                        tags=list(fact.tags), prompt_version=extracted)
        duplicate = store.find_by_hash(conn, tenant_id, request.scope, text_hash(fact.fact))
        if duplicate is not None:
            change.event, change.target = "NOOP", duplicate
            result.changes.append(change)
        else:
            fresh.append(change)
    if not fresh:
        return result
    vectors = embedder.embed([c.text for c in fresh])
    neighbours: dict[str, Memory] = {}
    undecided: list[Change] = []
    for change, vector in zip(fresh, vectors):
        change.embedding = vector
        nearest = store.similar(conn, tenant_id, request.scope, vector, DECISION_NEIGHBOURS)
        if nearest and nearest[0][1] >= settings.memory_near_duplicate:
            change.event, change.target = "NOOP", nearest[0][0]
            result.changes.append(change)
            continue
        undecided.append(change)
        for memory, _ in nearest:
            neighbours.setdefault(memory.id, memory)
    if undecided and neighbours:
        _decide(backend, model, list(neighbours.values()), undecided, result)
    result.changes.extend(undecided)
    return result


def apply(conn: psycopg.Connection, tenant_id: str, request: AddRequest, result: AddResult, *,
          embedder: Embedder) -> None:
    """Write a planned add (call inside a transaction): inserts, closes, confidence bumps and history, in a fixed
    number of statements whatever the add's size (the new memories in one insert, their history in another). A
    change whose text became an exact duplicate meanwhile (a concurrent add), or repeats an earlier change of the
    same add, turns into ``NOOP``."""
    scope = request.scope
    store.lock_scope(conn, tenant_id, scope)
    valid_from = request.timestamp
    if request.expires_at is None and any(c.memory_type == "working" and c.event != "NOOP" for c in result.changes):
        from chalicelib.store import tenants  # working memory's TTL: the tenant's, seed 002's 24 h by default

        ttl = tenants.limits(conn, tenant_id).working_ttl_s
        request = dataclasses.replace(request, expires_at=datetime.now(UTC) + timedelta(seconds=ttl))
    actor = f"model:{result.model}" if result.model else "api"
    bumped = [c.target.id for c in result.changes if c.event == "NOOP" and c.target is not None]
    writes = [c for c in result.changes if c.event != "NOOP"]
    stored = store.find_by_hashes(conn, tenant_id, scope, [text_hash(c.text) for c in writes if c.event == "ADD"])
    seen: set[str] = set()
    for change in writes:
        digest = text_hash(change.text)
        if change.event == "ADD" and (digest in stored or digest in seen):
            change.event = "NOOP"
        seen.add(digest)
    writes = [c for c in writes if c.event != "NOOP"]
    unembedded = [c for c in writes if c.embedding is None]
    if unembedded:
        for change, vector in zip(unembedded, embedder.embed([_index_text(c) for c in unembedded])):
            change.embedding = vector
    events: list[store.HistoryEvent] = []
    for change in writes:
        target = change.target
        if change.event == "UPDATE" and target is not None:
            revised, snapshot = store.revise(
                conn, tenant_id, target.id, text=change.text, hash=text_hash(change.text),
                index_text=_index_text(change), model=embedder.model, embedding=change.embedding,
                valid_from=valid_from, edit=store.Edit(categories=_categories(request, change) or None),
                prompt_version=change.prompt_version)
            change.id = revised.id
            events.append(store.HistoryEvent(revised, scope, "UPDATE", target.memory, revised.memory, actor,
                                      {"previous_version": snapshot}))
    inserts = [c for c in writes if c.event in ("ADD", "INVALIDATE")]
    for change in inserts:
        change.id = ids.new_id(ids.MEMORY)
    store.insert_many(conn, tenant_id, [(c.id, _new_memory(request, c, embedder.model)) for c in inserts if c.id])
    for change in inserts:
        assert change.id is not None
        target = change.target
        invalidates = change.event == "INVALIDATE" and target is not None
        events.append(store.HistoryEvent(change.id, scope, "ADD", None, change.text, actor,
                                  {"invalidates": target.id} if invalidates and target is not None else {}))
        if invalidates and target is not None:
            ends = max(valid_from, target.valid_from) if valid_from else None
            store.close(conn, tenant_id, target.id, valid_to=ends, invalidated_by=change.id)
            events.append(store.HistoryEvent(target, target.scope, "INVALIDATE", target.memory, change.text, actor,
                                      {"invalidated_by": change.id}))
    store.record_many(conn, tenant_id, events)
    store.bump(conn, tenant_id, bumped, confidence_delta=CONFIDENCE_STEP)
    if request.exchange is not None and result.exchange_vector is not None:
        exchanges.insert(conn, tenant_id, request.exchange, model=embedder.model, vector=result.exchange_vector)


def _verbatim(conn: psycopg.Connection, tenant_id: str, request: AddRequest, embedder: Embedder) -> list[Change]:
    changes: list[Change] = []
    for message in request.messages:
        if message.role == "system" or not message.content.strip():
            continue
        changes.append(Change("ADD", message.content.strip(), memory_type=request.memory_type or "fact",
                              importance=_importance(request, 0.5), speaker=message.name, role=message.role,
                              metadata=dict(message.metadata or {})))
    stored = store.find_by_hashes(conn, tenant_id, request.scope, [text_hash(c.text) for c in changes])
    seen: set[str] = set()
    for change in changes:
        digest = text_hash(change.text)
        if digest in stored or digest in seen:
            change.event, change.target = "NOOP", stored.get(digest)
        seen.add(digest)
    todo = [c for c in changes if c.event == "ADD"]
    if todo:
        for change, vector in zip(todo, embedder.embed([_index_text(c) for c in todo])):
            change.embedding = vector
    return changes


def _known(conn: psycopg.Connection, settings: Settings, tenant_id: str, scope: MemoryScope, text: str,
           embedder: Embedder, result: AddResult) -> bool:
    """The cheap check: a single statement already stored (exact or near duplicate) is NOOP without a model call."""
    if not normalise(text):
        return True
    duplicate = store.find_by_hash(conn, tenant_id, scope, text_hash(text))
    if duplicate is None:
        nearest = store.similar(conn, tenant_id, scope, embedder.embed([text])[0], 1)
        if nearest and nearest[0][1] >= settings.memory_near_duplicate:
            duplicate = nearest[0][0]
    if duplicate is None:
        return False
    result.changes.append(Change("NOOP", duplicate.memory, memory_type=duplicate.memory_type, target=duplicate))
    return True


def _extract(backend: ChatBackend, model: str, request: AddRequest,
             result: AddResult) -> list[prompts.ExtractedFact]:
    when = request.timestamp or datetime.now(UTC)
    conversation = "\n".join(f"{m.name or m.role}: {m.content}" for m in request.messages if m.role != "system")
    content = f"Conversation date: {when.strftime('%Y-%m-%d (%A)')}.\n\nConversation:\n{conversation}"
    answer: prompts.ExtractedFacts = _ask(backend, model, prompts.MEMORY_EXTRACTION, content, result)
    return list(answer.facts)


def _decide(backend: ChatBackend, model: str, existing: list[Memory], undecided: list[Change],
            result: AddResult) -> None:
    payload = {"existing": [{"id": str(i), "text": m.memory} for i, m in enumerate(existing)],
               "new": [{"id": f"n{i}", "text": c.text} for i, c in enumerate(undecided)]}
    decisions = _ask(backend, model, prompts.MEMORY_DECISION, json.dumps(payload, ensure_ascii=False), result,
                     check=lambda answer: _resolve(answer, facts=len(undecided), existing=len(existing)))
    tags = " ".join(result.prompts[-2:])  # extraction, then decision
    for fact, event, target, text in decisions:
        change = undecided[fact]
        change.event = event
        change.target = existing[target] if target is not None else None
        change.prompt_version = tags
        if event == "UPDATE" and text:
            change.text = text
            change.embedding = None  # the merged text is embedded when applied


def _resolve(answer: prompts.Decisions, *, facts: int,
             existing: int) -> list[tuple[int, str, int | None, str | None]]:
    """One ``(fact, event, target, text)`` per new fact, in fact order, from a decision answer.

    Raises:
        ValueError: a fact decided twice or not at all, an id that was not shown, an UPDATE without text (sent
            back to the model once).
    """
    seen: dict[int, tuple[int, str, int | None, str | None]] = {}
    for i, decision in enumerate(answer.decisions):
        fact = _index(decision.fact, "n", facts, f"decisions[{i}].fact")
        target = None
        if decision.event in ("UPDATE", "INVALIDATE") or decision.target not in (None, ""):
            target = _index(decision.target, "", existing, f"decisions[{i}].target")
        if decision.event == "UPDATE" and not (decision.text or "").strip():
            raise ValueError(f"decisions[{i}].text is required for UPDATE")
        if fact in seen:
            raise ValueError(f"new fact n{fact} is decided twice")
        seen[fact] = (fact, decision.event, target, (decision.text or "").strip() or None)
    missing = [f"n{i}" for i in range(facts) if i not in seen]
    if missing:
        raise ValueError(f"no decision for {', '.join(missing)}")
    return [seen[i] for i in range(facts)]


def _index(value: str | None, prefix: str, count: int, where: str) -> int:
    text = (value or "").strip()
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    if not text.isdigit() or not 0 <= int(text) < count:
        shown = f"{prefix}0..{prefix}{count - 1}" if count else "none"
        raise ValueError(f"{where} must be one of the ids shown ({shown}), got {value!r}")
    return int(text)


def _ask(backend: ChatBackend, model: str, prompt: prompts.Prompt, content: str, result: AddResult, *,
         check: Any = None) -> Any:
    """Ask the memory model ``prompt`` (JSON answer, one retry); counts calls, tokens and the prompt's tag.

    Raises:
        UpstreamError: (502, code ``memory_model_output_invalid``) malformed twice; nothing is written.
    """
    result.prompts.append(prompt.tag)
    try:
        answer = structured.ask(backend, model, prompt, content, check=check)
    except structured.MalformedAnswer as exc:
        result.model_calls += exc.calls
        result.usage = result.usage + exc.usage
        logger.warning("memory model %s answered malformed output twice: %s", model, exc.problem)
        raise UpstreamError(f"The memory model {model!r} answered malformed output twice ({exc.problem}); nothing "
                            "was stored.", code="memory_model_output_invalid") from None
    result.model_calls += answer.calls
    result.usage = result.usage + answer.usage
    return answer.value


def _importance(request: AddRequest, default: float) -> float:
    return request.importance if request.importance is not None else default


def _index_text(change: Change) -> str:
    """What BM25 indexes and the embedder reads: the text, after its speaker's name when known."""
    return f"{change.speaker}: {change.text}" if change.speaker else change.text


def _categories(request: AddRequest, change: Change) -> list[str]:
    return list(dict.fromkeys([*request.categories, *change.tags]))[:MAX_CATEGORIES]


def _source_type(request: AddRequest, change: Change) -> str | None:
    """Seed 002's provenance: what the caller says, else ``inferred`` (extracted by the model) or
    ``user_stated`` (the user's own words, stored verbatim)."""
    if request.source_type is not None:
        return request.source_type
    if request.infer:
        return "inferred"
    return "user_stated" if change.role == "user" else None


def _new_memory(request: AddRequest, change: Change, model: str) -> store.NewMemory:
    metadata = {**request.metadata, **change.metadata}
    if change.speaker:
        metadata.setdefault("speaker", change.speaker)
    if change.role:
        metadata.setdefault("role", change.role)
    return store.NewMemory(scope=request.scope, memory=change.text, hash=text_hash(change.text),
                           memory_type=change.memory_type, categories=_categories(request, change),
                           confidence=change.confidence, importance=change.importance, metadata=metadata,
                           source_kind=request.source_kind, source_id=request.source_id,
                           valid_from=request.timestamp, pinned=request.pinned, expires_at=request.expires_at,
                           model=model, embedding=change.embedding, index_text=_index_text(change),
                           source_type=_source_type(request, change), verified=request.verified,
                           prompt_version=change.prompt_version)
