"""The memory service: the one front door to memory for every caller — the native routes (``/v1/memories``), the
mem0 adapter (``/mem0``), the CLI (``engram memory``), the Responses API (recall before an answer, remember
after) and the memory queue's handler. Nothing outside :mod:`chalicelib.memory` imports anything else of it
(``tests/test_structure.py``).

Every function takes a connection (the caller's: an API request's tenant connection, the CLI's, a job's) and a
:class:`Context` — settings, tenant, embedder, the actor recorded in history and, for an API key bound to one
(:mod:`chalicelib.access`), the memory scope every call is held to — and does one use case:

- **add** (:func:`add`): validated messages → memories, inline (model calls, then one transaction) or as a job on
  the memory queue (``async``; by default when inference is on and a queue is configured), with an idempotency
  key stored in the transaction that writes the memories; :func:`add_document` for a file;
- **read**: :func:`search`, :func:`get`, :func:`list_page`, :func:`count`, :func:`history`, :func:`stats`,
  :func:`entities`, :func:`audit_page`, :func:`job`, :func:`profile`;
- **change**: :func:`update`, :func:`update_many`, :func:`delete`, :func:`delete_many`, :func:`purge`,
  :func:`delete_entity`, :func:`restore`, :func:`feedback`, :func:`generate_profile`;
- **around a response**: :func:`recall_context` (memories and earlier exchanges, one embedding of the query, one
  connection) and :func:`remember` (the exchange and what it teaches, in a background job);
- **the queue**: :func:`handle_add_job` and :func:`give_up_add_job` (rows of the message table).

Which model memory asks is decided once (:mod:`chalicelib.memory.llm`), what "active" means once
(:mod:`chalicelib.memory.active`), and every prompt lives in :mod:`chalicelib.chat.prompts`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from chalicelib.config import Settings
from chalicelib.dispatch.port import Delivery
from chalicelib.embed.base import Embedder
from chalicelib.errors import NotFoundError, PermissionDeniedError
from chalicelib.memory import add_jobs, archive, audit, documents, exchanges, llm, manage, persona, store, write
from chalicelib.memory import recall as ranking  # the search module (the service has recall_context)
from chalicelib.memory.exchanges import Exchange
from chalicelib.memory.model import Memory, MemoryScope
from chalicelib.store import idempotency
from chalicelib.store.paging import Page

__all__ = [
    "Added",
    "Context",
    "Idempotency",
    "Recalled",
    "Reindexed",
    "add",
    "add_document",
    "audit_page",
    "context",
    "count",
    "delete",
    "delete_entity",
    "delete_many",
    "entities",
    "feedback",
    "generate_profile",
    "get",
    "give_up_add_job",
    "handle_add_job",
    "history",
    "job",
    "list_page",
    "model_name",
    "profile",
    "purge",
    "recall_context",
    "reindex",
    "remember",
    "restore",
    "search",
    "stats",
    "thread_of",
    "update",
    "update_many",
]

ENTITY_KINDS = ("user", "agent", "run")


@dataclass(frozen=True, slots=True)
class Context:
    """Who acts on memory and with what: the ``settings``, the ``tenant_id``, the ``embedder``, the ``actor``
    recorded in history and audit (``api``, ``cli``, ``job:<name>``) and ``bound``: the ids an API key is bound to
    (``{"user_id": "alice"}``; empty: unbound).

    A bound context holds every call to that scope (:meth:`within`): a scope a call names gets the bound ids it
    leaves out, a different value for a bound id is refused (403), and a memory (or job) outside the scope is not
    found (404), exactly as another tenant's."""

    settings: Settings
    tenant_id: str
    embedder: Embedder
    actor: str = "api"
    bound: dict[str, str] = field(default_factory=dict)

    def within(self, scope: MemoryScope | None) -> MemoryScope:
        """``scope`` held to the bound ids (None: the bound scope itself).

        Raises:
            PermissionDeniedError: (403, ``memory_scope_not_permitted``) ``scope`` names another value for a bound
                id; or no scope at all and the context is unbound (a programming error).
        """
        from chalicelib.access import hold_scope

        named = hold_scope(self.bound, scope.as_dict() if scope is not None else {})
        if not any(named.values()):
            raise PermissionDeniedError("A memory scope is required.", code="memory_scope_not_permitted")
        return MemoryScope(**named)

    def holds(self, ids: Any) -> bool:
        """Whether a row with ``user_id`` / ``agent_id`` / ``run_id`` attributes (a memory, a job) is in the bound
        scope (always, unbound)."""
        return all(getattr(ids, name) == value for name, value in self.bound.items())


def context(settings: Settings, tenant_id: str, *, actor: str = "api", embedder: Embedder | None = None,
            bound: dict[str, str] | None = None) -> Context:
    """The :class:`Context` for ``tenant_id`` with the configured embedder (built once per process; a local model
    loads on first use, so reads that embed nothing never load it), held to ``bound`` (an API key's memory scope)
    when given.

    Raises:
        ConfigurationError: the embedding settings cannot be honoured.
    """
    from chalicelib import deps

    return Context(settings, tenant_id, embedder or deps.embedder(settings), actor, dict(bound or {}))


def _memory_in_scope(conn: psycopg.Connection, ctx: Context, memory_id: str, param: str = "memory_id") -> Memory:
    """The memory ``memory_id`` if the context may see it.

    Raises:
        NotFoundError: no such memory for this tenant, or outside a bound context's scope.
    """
    found = store.get(conn, ctx.tenant_id, memory_id)
    if not ctx.holds(found):
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param=param)
    return found


def model_name(settings: Settings) -> str | None:
    """The memory model an inferring add would use (``ENGRAM_MEMORY_MODEL``, else ``ENGRAM_CHAT_MODEL``), or
    None: whether inference is available."""
    return llm.model_name(settings)


# ---- add ----

@dataclass(frozen=True, slots=True)
class Idempotency:
    """An add's idempotency key (the ``Idempotency-Key`` header): the ``key``, the ``route`` and request ``body``
    it was first used with (a reuse with another body is refused), and ``render``, the wire answer
    (``(HTTP status, JSON body)``) stored for replays."""

    key: str
    route: str
    body: Any
    render: Callable[[Added], tuple[int, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Added:
    """What an add did: ``result`` when it ran inline, ``job`` when it was queued, or ``replay`` — the stored
    answer of an earlier request with the same idempotency key (nothing done now)."""

    result: write.AddResult | None = None
    job: add_jobs.AddJob | None = None
    replay: idempotency.Replay | None = None


def add(conn: psycopg.Connection, ctx: Context, request: write.AddRequest, *, run_async: bool | None = None,
        key: Idempotency | None = None) -> Added:
    """Add memories from ``request`` (:mod:`chalicelib.memory.write`). ``run_async`` None queues an inferring add
    when a memory queue is configured (the model calls run in the background) and runs anything else inline.
    With ``key``, a retried request gets the first one's answer.

    Raises:
        InvalidRequestError: inference asked for and no memory model configured (the message names the setting);
            a malformed or reused idempotency key.
        ConflictError: (409) the first request with ``key`` is still running.
        UpstreamError / UpstreamTimeoutError / RateLimitError: a model or embedding call failed, or the queue
            refused the job (nothing written).
    """
    settings = ctx.settings
    if ctx.bound:
        request = dataclasses.replace(request, scope=ctx.within(request.scope))
    model = llm.required_model(settings) if request.infer and request.messages else None
    backend = llm.backend(settings, model) if model is not None else None  # also checks it is routable: a 400
    queued = run_async if run_async is not None else bool(model and settings.memory_queue)
    if key is not None:
        replay = idempotency.reserve(conn, ctx.tenant_id, key.key, key.route, key.body, request.scope.as_dict())
        if replay is not None:
            return Added(replay=replay)
    try:
        if queued:
            from chalicelib import deps

            added = Added(job=add_jobs.submit(conn, ctx.tenant_id, dataclasses.replace(request, model=model),
                                              dispatcher=deps.dispatcher(settings)))
            if key is not None:
                idempotency.save(conn, ctx.tenant_id, key.key, *key.render(added))
            return added
        result = write.plan(conn, settings, ctx.tenant_id, request, embedder=ctx.embedder, backend=backend,
                            model=model)
        with conn.transaction():
            write.apply(conn, ctx.tenant_id, request, result, embedder=ctx.embedder)
            added = Added(result=result)
            if key is not None:
                idempotency.save(conn, ctx.tenant_id, key.key, *key.render(added))
        write.after_write(conn, settings, ctx.tenant_id, request)
        return added
    except BaseException:
        if key is not None:
            idempotency.release(conn, ctx.tenant_id, key.key)
        raise


def add_document(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, *, filename: str, data: bytes,
                 pinned: bool = False) -> write.AddResult:
    """Store a document's chunks as ``knowledge`` memories of ``scope`` (:mod:`chalicelib.memory.documents`).

    Raises:
        DocumentError / UnsupportedFileError: the file cannot be parsed. UpstreamError: embedding failed (nothing
            written).
    """
    return documents.add_document(conn, ctx.settings, ctx.tenant_id, ctx.within(scope), filename=filename, data=data,
                                  embedder=ctx.embedder, pinned=pinned)


def job(conn: psycopg.Connection, ctx: Context, job_id: str) -> add_jobs.AddJob:
    """An asynchronous add's job.

    Raises:
        NotFoundError: no such job for this tenant (or outside a bound context's scope).
    """
    found = add_jobs.get(conn, ctx.tenant_id, job_id)
    if not ctx.holds(found):
        raise NotFoundError(f"No memory job found with id '{job_id}'.", param="job_id")
    return found


def handle_add_job(message: add_jobs.AddJobMessage, delivery: Delivery) -> str:
    """The ``memory.add`` message's handler (:mod:`chalicelib.dispatch.table`): run the job's add on a tenant
    connection; ``completed``, or ``duplicate`` for a job already done or gone.

    Raises:
        whatever the add raises (the job keeps the error as ``last_error``; the queue retries).
    """
    from chalicelib.store.db import tenant_connection

    ctx = context(delivery.settings, message.tenant, actor="job:memory.add")
    with tenant_connection(delivery.settings, message.tenant) as conn:
        return add_jobs.run(conn, ctx.settings, ctx.tenant_id, message.job_id, embedder=ctx.embedder,
                            backend_for=lambda model: llm.backend(ctx.settings, model),
                            default_model=llm.required_model)


def give_up_add_job(message: add_jobs.AddJobMessage, delivery: Delivery, error: BaseException) -> None:
    """The last delivery of a ``memory.add`` message failed: the job is ``failed`` with ``last_error``."""
    add_jobs.give_up(message, delivery, error)


# ---- read ----

def search(conn: psycopg.Connection, ctx: Context, query: ranking.Query, *, touch: bool = True) -> list[ranking.Hit]:
    """The scope's best memories for ``query``, best first (:mod:`chalicelib.memory.recall`); counts an access of
    each returned memory when ``touch``.

    Raises:
        InvalidRequestError: a malformed filter. UpstreamError: embedding the query failed.
    """
    if ctx.bound:
        query = dataclasses.replace(query, scope=ctx.within(query.scope))
    return ranking.search(conn, ctx.settings, ctx.tenant_id, query, embedder=ctx.embedder, touch=touch)


def get(conn: psycopg.Connection, ctx: Context, memory_id: str) -> Memory:
    """One memory, any status.

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    return _memory_in_scope(conn, ctx, memory_id)


def list_page(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, page: Page, *,
              memory_types: Sequence[str] | None = None, include_inactive: bool = False) -> tuple[list[Memory], bool]:
    """One page of the scope's memories, newest first by default (active ones unless ``include_inactive``):
    ``(rows, has_more)``."""
    return store.list_page(conn, ctx.tenant_id, ctx.within(scope), page, memory_types=memory_types,
                           include_inactive=include_inactive)


def count(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, *, include_inactive: bool = False) -> int:
    """How many memories :func:`list_page` pages through."""
    return store.count(conn, ctx.tenant_id, ctx.within(scope), include_inactive=include_inactive)


def history(conn: psycopg.Connection, ctx: Context, memory_id: str) -> tuple[list[store.HistoryRow],
                                                                          MemoryScope | None]:
    """Every event of a memory, oldest first (also of a deleted one, texts scrubbed), and its scope (None once
    deleted).

    Raises:
        NotFoundError: the memory never existed for this tenant (no history at all).
    """
    rows = store.history(conn, ctx.tenant_id, memory_id)
    if not rows:
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param="memory_id")
    try:
        found: Memory | None = store.get(conn, ctx.tenant_id, memory_id)
    except NotFoundError:
        found = None
    if ctx.bound and (found is None or not ctx.holds(found)):  # a deleted memory's scope is unknown: not shown
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param="memory_id")
    return rows, found.scope if found is not None else None


def stats(conn: psycopg.Connection, ctx: Context, scope: MemoryScope | None) -> dict[str, Any]:
    """Counts of the tenant's (or one scope's; a bound context's: its scope's) memories by status and, for active
    ones, by type, and of its stored ``exchanges`` (:func:`chalicelib.memory.store.stats`'s keys plus
    ``exchanges``)."""
    if ctx.bound:
        scope = ctx.within(scope)
    return {**store.stats(conn, ctx.tenant_id, scope), "exchanges": exchanges.count(conn, ctx.tenant_id, scope)}


def exchanges_page(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, page: Page, *,
                   thread_id: str | None = None, session_id: str | None = None) -> tuple[list[Exchange], bool]:
    """One cursor page of the scope's stored exchanges (seed 004's ``/vget``: optionally one ``thread_id`` or
    ``session_id``), newest first by default: ``(exchanges, has_more)``."""
    return exchanges.list_page(conn, ctx.tenant_id, ctx.within(scope), page, thread_id=thread_id,
                               session_id=session_id)


def exchange(conn: psycopg.Connection, ctx: Context, exchange_id: str) -> Exchange:
    """One stored exchange.

    Raises:
        NotFoundError: no such exchange for this tenant (or outside a bound context's scope).
    """
    found = exchanges.get(conn, ctx.tenant_id, exchange_id)
    if not ctx.holds(found):
        raise NotFoundError(f"No exchange found with id '{exchange_id}'.", param="exchange_id")
    return found


def delete_exchange(conn: psycopg.Connection, ctx: Context, exchange_id: str) -> bool:
    """Delete one stored exchange (seed 004's ``/vdelete``: recall no longer finds it; the conversation or response
    it came from is untouched); False when there was none (or it is outside a bound context's scope)."""
    if ctx.bound:
        try:
            exchange(conn, ctx, exchange_id)
        except NotFoundError:
            return False
    return exchanges.delete(conn, ctx.tenant_id, exchange_id)


def entities(conn: psycopg.Connection, ctx: Context, *, limit: int, offset: int = 0) -> tuple[list[store.Entity],
                                                                                          int]:
    """One page of the tenant's users, agents and runs holding memories, most recently changed first, with their
    memory counts: ``(entities, how many in all)``. A bound context sees only the entities it is bound to."""
    if not ctx.bound:
        return store.entities(conn, ctx.tenant_id, limit=limit, offset=offset)
    mine = {(name.removesuffix("_id"), value) for name, value in ctx.bound.items()}
    rows: list[store.Entity] = []
    step = 0
    while True:  # a tenant's entities, a page at a time, keeping the bound ones (at most three)
        page, total = store.entities(conn, ctx.tenant_id, limit=1000, offset=step)
        rows += [row for row in page if (row.kind, row.name) in mine]
        step += len(page)
        if not page or step >= total or len(rows) == len(mine):
            break
    return rows[offset:offset + limit], len(rows)


def audit_page(conn: psycopg.Connection, ctx: Context, *, limit: int, after: int | None = None, order: str = "desc",
               event: str | None = None, entity_id: str | None = None,
               user_id: str | None = None) -> tuple[list[audit.AuditRow], bool]:
    """One page of the tenant's memory lifecycle audit (ids and counts, never text): ``(rows, has_more)``. A
    context bound to a user sees that user's rows only (of its agent or run too, when bound to them).

    Raises:
        PermissionDeniedError: a bound context naming another user, or one bound to no user (the audit is read
            per user).
    """
    if ctx.bound:
        if "user_id" not in ctx.bound:
            raise PermissionDeniedError("The memory audit is read per user; this API key is bound to no user.",
                                        code="memory_scope_not_permitted")
        user_id = ctx.within(MemoryScope(user_id=user_id) if user_id else None).user_id
    rows, has_more = audit.list_page(conn, ctx.tenant_id, limit=limit, after=after, order=order, event=event,
                                     entity_id=entity_id, user_id=user_id)
    return [row for row in rows if ctx.holds(row)], has_more


def profile(conn: psycopg.Connection, ctx: Context, user_id: str) -> Memory | None:
    """The user's current persona (their profile document, a pinned ``persona`` memory), or None.

    Raises:
        PermissionDeniedError: a bound context that may not read this user's memories as a whole.
    """
    _whole_user(ctx, user_id)
    memory_id = persona.current_persona(conn, ctx.tenant_id, user_id)
    return store.get(conn, ctx.tenant_id, memory_id) if memory_id else None


# ---- change ----

def update(conn: psycopg.Connection, ctx: Context, memory_id: str, *, text: str | None,
           changes: store.Edit = store.Edit(), valid_from: datetime | None = None) -> Memory:
    """Update one memory (:func:`chalicelib.memory.manage.update`): new text is a new version, attributes change
    in place, nothing to change is a no-op (no history).

    Raises:
        NotFoundError, InvalidRequestError (``memory_not_active``), UpstreamError (embedding; nothing written).
    """
    _memory_in_scope(conn, ctx, memory_id)
    return manage.update(conn, ctx.tenant_id, memory_id, text=text, changes=changes, embedder=ctx.embedder,
                         valid_from=valid_from, actor=ctx.actor)


def update_many(conn: psycopg.Connection, ctx: Context, updates: Sequence[manage.MemoryUpdate], *,
                param: str = "memories") -> list[Memory]:
    """Update many memories in one transaction (all or none); the memories after, in order.

    Raises:
        NotFoundError / InvalidRequestError naming ``param[i].memory_id``; UpstreamError (nothing written).
    """
    if ctx.bound:
        for i, item in enumerate(updates):
            _memory_in_scope(conn, ctx, item.memory_id, f"{param}[{i}].memory_id")
    return manage.update_many(conn, ctx.tenant_id, updates, embedder=ctx.embedder, actor=ctx.actor, param=param)


def delete(conn: psycopg.Connection, ctx: Context, memory_id: str) -> bool:
    """Delete a memory and its earlier versions (their history keeps the events, not the text); False when there
    was no such memory (or it is outside a bound context's scope)."""
    if ctx.bound:
        try:
            _memory_in_scope(conn, ctx, memory_id)
        except NotFoundError:
            return False
    return manage.delete(conn, ctx.tenant_id, memory_id, actor=ctx.actor)


def delete_many(conn: psycopg.Connection, ctx: Context, memory_ids: Sequence[str], *, param: str = "memories") -> int:
    """Delete many memories in one transaction (all or none); how many.

    Raises:
        NotFoundError: one of them does not exist (naming ``param[i].memory_id``; nothing deleted).
    """
    if ctx.bound:
        for i, memory_id in enumerate(memory_ids):
            _memory_in_scope(conn, ctx, memory_id, f"{param}[{i}].memory_id")
    return manage.delete_many(conn, ctx.tenant_id, memory_ids, actor=ctx.actor, param=param)


def purge(conn: psycopg.Connection, ctx: Context, scope: MemoryScope | None) -> dict[str, int]:
    """Remove exactly ``scope``'s memories (held to a bound context's scope) and every row holding their text; rows
    removed per kind. ``scope`` None purges every user, agent and run of the tenant (the API asks for ``all=true``
    to say so). A purged user's history is also dropped from its vector backend (:func:`partition_sync.forget`).

    Raises:
        PermissionDeniedError: ``scope`` names another value for a bound id, or a bound context asks for the whole
            tenant.
        UpstreamError: the memories are purged, but a vector backend could not drop the user's index (the
            index_memories job finishes it; Postgres holds none of the text).
    """
    from chalicelib.search.backends import partition_sync

    if ctx.bound and scope is None:
        raise PermissionDeniedError("This API key is bound to a memory scope; it cannot purge every scope of the "
                                    "tenant (name its scope, or leave it out: the key's is used).",
                                    param="all", code="memory_scope_not_permitted")
    scope = ctx.within(scope) if scope is not None else None
    counts = manage.purge(conn, ctx.tenant_id, scope, actor=ctx.actor)
    if scope is None or (scope.user_id is not None and scope.agent_id is None and scope.run_id is None):
        partition_sync.forget(conn, ctx.settings, ctx.tenant_id, scope.user_id if scope is not None else None)
    return counts


def delete_entity(conn: psycopg.Connection, ctx: Context, kind: str, name: str) -> dict[str, int]:
    """Purge one entity: every memory of the user, agent or run ``name`` (``kind`` ∈ :data:`ENTITY_KINDS`)."""
    return purge(conn, ctx, MemoryScope(**{f"{kind}_id": name}))


def restore(conn: psycopg.Connection, ctx: Context, memory_id: str) -> Memory:
    """Bring an archived or merged memory back into recall.

    Raises:
        NotFoundError; InvalidRequestError (``memory_not_archived``).
    """
    _memory_in_scope(conn, ctx, memory_id)
    return archive.restore(conn, ctx.tenant_id, memory_id, actor=ctx.actor)


def feedback(conn: psycopg.Connection, ctx: Context, memory_id: str, *, value: str | None,
             reason: str | None) -> Memory:
    """Record feedback (``POSITIVE``, ``NEGATIVE``, ``VERY_NEGATIVE`` or None, and a reason) in the memory's
    history.

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    _memory_in_scope(conn, ctx, memory_id)
    return manage.feedback(conn, ctx.tenant_id, memory_id, value=value, reason=reason, actor=ctx.actor)


def generate_profile(conn: psycopg.Connection, ctx: Context, user_id: str) -> Memory | None:
    """Rewrite the user's persona now (with the memory model when one is configured, else extractively); the
    persona, or None when the user has no preference or procedural memories to write it from.

    Raises:
        UpstreamError / UpstreamTimeoutError / RateLimitError: the model or the embedder failed.
        PermissionDeniedError: a bound context that may not read this user's memories as a whole.
    """
    _whole_user(ctx, user_id)
    backend, model = llm.optional_backend(ctx.settings)
    memory_id = persona.refresh_user(conn, ctx.tenant_id, user_id, embedder=ctx.embedder, backend=backend,
                                     model=model, actor=ctx.actor)
    return store.get(conn, ctx.tenant_id, memory_id) if memory_id else None


# ---- around a response ----

@dataclass(slots=True)
class Recalled:
    """What :func:`recall_context` found: the ``memories`` (best first), the earlier ``exchanges`` (best first) and the
    ``embedding_tokens`` the query cost (one embedding for both)."""

    memories: list[ranking.Hit] = field(default_factory=list)
    exchanges: list[exchanges.ExchangeHit] = field(default_factory=list)
    embedding_tokens: int = 0


def recall_context(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, text: str, *, top_k: int,
           score_threshold: float, with_exchanges: bool, exchange_threshold: float) -> Recalled:
    """What to remind a model of before it answers ``text``: the scope's best memories (``top_k`` scoring at
    least ``score_threshold``) and, ``with_exchanges``, its earlier exchanges of cosine similarity at least
    ``exchange_threshold`` — on the caller's connection. The memories are ranked by :func:`search`'s own path
    (``POST /v1/memories/search`` ranks alike), and its question — ``text`` without the scope's speakers it names,
    embedded once — is the one asked of the exchanges too.

    Raises:
        UpstreamError: embedding failed; psycopg errors (the caller degrades gracefully).
    """
    scope = ctx.within(scope)
    if not text.strip():
        return Recalled()
    asked = ranking.searched(conn, ctx.settings, ctx.tenant_id, ranking.Query(query=text, scope=scope, top_k=top_k,
                                                                            score_threshold=score_threshold),
                             embedder=ctx.embedder)
    found = (exchanges.search(conn, ctx.settings, ctx.tenant_id, scope, asked.text, embedder=ctx.embedder,
                              limit=top_k, threshold=exchange_threshold, vector=asked.vector)
             if with_exchanges else [])
    return Recalled(asked.hits, found, ctx.embedder.tokenizer.count(asked.text))


@dataclass(frozen=True, slots=True)
class Reindexed:
    """A finished move of a tenant's histories: the ``backend`` they are on now, the ``partitions`` (users'
    memories and exchanges) it holds, the ``rows`` written there (moved, or written for the first time) and whether
    the move ``resumed`` one under way."""

    backend: str
    partitions: int
    rows: int
    resumed: bool


def reindex(conn: psycopg.Connection, ctx: Context, backend: str, *,
            progress: Callable[[int, int], None] | None = None) -> Reindexed:
    """Move the tenant's memories and exchanges to vector backend ``backend`` (the tenant's new histories go there
    too): each user's history is written there from Postgres' rows — vectors included, nothing is embedded again —,
    then switched, its old index dropped. Searches use the old one until then. Resumable: run again after an
    interruption, it goes on where it was. ``progress(partitions moved, partitions)``. Call on an owner
    connection (the CLI's).

    Raises:
        InvalidRequestError: ``backend`` is not a registered backend (param ``backend``).
        UpstreamError: a backend failed (run again to resume).
    """
    from chalicelib.errors import InvalidRequestError
    from chalicelib.search.backends import names, partition_sync

    if backend not in names():
        raise InvalidRequestError(f"Unknown vector backend {backend!r}: choose one of {', '.join(names())}.",
                                  param="backend")
    total, moving = partition_sync.moves_left(conn, ctx.tenant_id)
    resumed = moving > 0
    partition_sync.start_move(conn, ctx.tenant_id, backend)
    total, moving = partition_sync.moves_left(conn, ctx.tenant_id)
    counts = partition_sync.IndexCounts()
    while True:
        if progress is not None:
            progress(total - moving, total)
        partition_sync.index_pending(conn, ctx.settings, tenant_id=ctx.tenant_id, counts=counts)
        _, left = partition_sync.moves_left(conn, ctx.tenant_id)
        if left == 0 or left == moving and counts.failed:
            break
        moving = left
    if counts.failed:
        from chalicelib.errors import UpstreamError

        raise UpstreamError(f"{counts.failed} histories could not be moved to {backend!r} (see the log); run the "
                            "command again to resume.")
    if progress is not None:
        progress(total, total)
    total, _ = partition_sync.moves_left(conn, ctx.tenant_id)
    return Reindexed(backend, total, counts.moved + counts.rows, resumed)


def thread_of(conn: psycopg.Connection, ctx: Context, response_id: str) -> str | None:
    """The thread (conversation or response chain) whose exchange ``response_id`` answered, or None (no exchange
    stored for it, yet)."""
    return exchanges.thread_of(conn, ctx.tenant_id, response_id)


def remember(conn: psycopg.Connection, ctx: Context, scope: MemoryScope, *, response_id: str, thread_id: str,
             session_id: str | None, prompt: str, answer: str, prior_ids: Sequence[str]) -> add_jobs.AddJob | None:
    """Queue the job that stores one exchange of a response (its prompt and answer, searchable later) and, when a
    memory model is configured, extracts memories from it; None when the exchange is empty.

    Raises:
        UpstreamError / ConfigurationError: the queue refused the job (nothing written).
    """
    scope = ctx.within(scope)
    if not prompt.strip() or not answer.strip():
        return None
    infer = llm.model_name(ctx.settings) is not None
    messages = (write.InputMessage("user", prompt), write.InputMessage("assistant", answer)) if infer else ()
    exchange = exchanges.NewExchange(scope=scope, thread_id=thread_id, session_id=session_id,
                                     response_id=response_id, user_prompt=prompt, assistant_response=answer,
                                     prior_ids=tuple(prior_ids))
    request = write.AddRequest(messages=messages, scope=scope, infer=infer, source_kind="response",
                               source_id=response_id, exchange=exchange)
    return add(conn, ctx, request, run_async=True).job


def _whole_user(ctx: Context, user_id: str) -> None:
    """Refuse a user-wide read (a persona) to a bound context that is not bound to exactly that user.

    Raises:
        PermissionDeniedError: bound to another user, or to an agent or run as well (403).
    """
    if ctx.bound and ctx.within(MemoryScope(user_id=user_id)) != MemoryScope(user_id=user_id):
        raise PermissionDeniedError("A user's profile spans all of the user's memories; this API key is bound to "
                                    "an agent or run as well.", code="memory_scope_not_permitted")
