"""Engram's tools for MCP clients (:mod:`chalicelib.api.mcp_server` serves them): memory — add, search, list, get,
update, delete, history — and knowledge — list vector stores, ``search`` one or several, ``fetch`` a file's text
(the ``search`` / ``fetch`` pair OpenAI's deep-research connectors call).

Each :class:`EngramTool` has a JSON input schema (a pydantic model), an output schema (the structured content it
returns, also sent as JSON text for clients that read only text), MCP's annotations (``readOnlyHint``,
``destructiveHint``, ``idempotentHint``) and the permission it needs (:mod:`chalicelib.access`). A tool runs as the
current caller (:func:`chalicelib.api.context.acting_as`: the HTTP request's key, or ``engram mcp``'s) through the
same helpers as the HTTP routes — the same validation, the same memory service, the same scope rules: a key bound to
a memory scope does not even see the scope parameters it is bound to (:func:`listed`), and its calls stay in that
scope whatever they name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from chalicelib import deps, memory
from chalicelib.access import Access, Level, Resource
from chalicelib.api import objects
from chalicelib.api.context import current_access, current_tenant, tenant_db
from chalicelib.api.memory_schemas import ListParams, scope_of
from chalicelib.api.routes import memories as native
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.store.paging import Page

__all__ = ["TOOLS", "EngramTool", "listed", "run"]

SCOPE_FIELDS = ("user_id", "agent_id", "run_id")
MAX_STORES = 16  # vector stores one search covers (file_search's own limit)
FETCH_MAX_CHARS = 200_000  # a fetched file's text is cut here (characters), as the result says


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Scoped(_In):
    user_id: str | None = Field(default=None, max_length=128, description="The user whose memories these are.")
    agent_id: str | None = Field(default=None, max_length=128, description="The agent whose memories these are.")
    run_id: str | None = Field(default=None, max_length=128, description="One run or session.")

    def scope(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SCOPE_FIELDS if getattr(self, name) is not None}


class Message(_In):
    role: str = Field(description="user, assistant or system")
    content: str = Field(min_length=1)


class AddMemoryIn(_Scoped):
    text: str | None = Field(default=None, min_length=1, description="A fact to remember, as written.")
    messages: list[Message] | None = Field(default=None, min_length=1, max_length=100,
                                           description="A conversation to remember (instead of text).")
    infer: bool = Field(default=False, description="Extract facts with the memory model (true) or store the "
                                                   "text as written (false).")
    metadata: dict[str, Any] | None = None
    memory_type: str | None = Field(default=None, description="fact, preference, episode, procedural, ...")


class SearchMemoriesIn(_Scoped):
    query: str = Field(min_length=1, max_length=4096)
    top_k: int = Field(default=10, ge=1, le=100)
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    filters: dict[str, Any] | None = Field(default=None, description="A filter over metadata (vector-store "
                                                                     "filter grammar).")
    memory_types: list[str] | None = None


class ListMemoriesIn(_Scoped):
    memory_type: str | None = None
    limit: int = Field(default=20, ge=1, le=100)
    after: str | None = Field(default=None, description="The last id of the previous page.")


class MemoryIdIn(_In):
    memory_id: str = Field(pattern=r"^mem_[A-Za-z0-9]{1,64}$")


class UpdateMemoryIn(MemoryIdIn):
    text: str | None = Field(default=None, min_length=1, description="New text: a new version, the old kept.")
    metadata: dict[str, Any] | None = None


class ListStoresIn(_In):
    limit: int = Field(default=20, ge=1, le=100)
    after: str | None = None


class SearchIn(_In):
    query: str = Field(min_length=1, max_length=4096)
    vector_store_ids: list[str] | None = Field(default=None, max_length=MAX_STORES,
                                               description=f"Stores to search (default: the newest {MAX_STORES}).")
    max_num_results: int = Field(default=10, ge=1, le=50)
    filters: dict[str, Any] | None = Field(default=None, description="OpenAI attribute filter (eq, in, and, ...).")
    ranking_options: dict[str, Any] | None = Field(default=None, description="OpenAI ranking_options.")


class FetchIn(_In):
    id: str = Field(min_length=1, max_length=300, description="A search result's id (vs_…/file-…) or a file id.")


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class MemoryOut(_Out):
    id: str
    memory: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    memory_type: str
    status: str
    created_at: int


class ScoredMemoryOut(MemoryOut):
    score: float


class AddResultOut(_Out):
    results: list[dict[str, Any]] = Field(description="One entry per memory touched: id, memory, event.")
    job_id: str | None = Field(default=None, description="An inferring add queued as a job: its id.")


class MemoriesOut(_Out):
    results: list[ScoredMemoryOut]


class MemoryPageOut(_Out):
    data: list[MemoryOut]
    has_more: bool


class DeletedOut(_Out):
    id: str
    deleted: bool


class HistoryOut(_Out):
    memory_id: str
    events: list[dict[str, Any]]


class StoreOut(_Out):
    id: str
    name: str
    status: str
    file_counts: dict[str, int]


class StorePageOut(_Out):
    data: list[StoreOut]
    has_more: bool


class SearchResultOut(_Out):
    id: str = Field(description="Pass to fetch for the whole text.")
    title: str
    text: str
    url: str
    score: float
    vector_store_id: str
    file_id: str


class SearchOut(_Out):
    results: list[SearchResultOut]


class FetchOut(_Out):
    id: str
    title: str
    text: str
    url: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class EngramTool:
    """One tool: its ``name``, ``title``, ``description``, input and output models, the permission it needs
    (``resource``, ``level``), MCP's hints, and ``handler`` (the validated input → the structured result)."""

    name: str
    title: str
    description: str
    input: type[BaseModel]
    output: type[BaseModel]
    resource: Resource
    level: Level
    read_only: bool
    destructive: bool
    idempotent: bool
    handler: Callable[[Any], dict[str, Any]]

    def input_schema(self, grants: Access) -> dict[str, Any]:
        """The input JSON schema as ``grants`` sees it: the scope ids a key is bound to are not parameters."""
        schema = copy.deepcopy(self.input.model_json_schema())
        for name in grants.memory_scope:
            schema.get("properties", {}).pop(name, None)
        return schema


# ---- memory ----

def _add(args: AddMemoryIn) -> dict[str, Any]:
    if (args.text is None) == (args.messages is None):
        raise InvalidRequestError("Give either 'text' or 'messages'.", param="text", code="invalid_value")
    body: dict[str, Any] = {**args.scope(), "infer": args.infer,
                            "messages": args.text if args.text is not None else [m.model_dump() for m in
                                                                                  args.messages or []]}
    for name in ("metadata", "memory_type"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    status, out = native.add(body, idempotency_key=None)
    if status == 202:
        return {"results": [], "job_id": out["id"]}
    return {"results": out["results"], "job_id": None}


def _search(args: SearchMemoriesIn) -> dict[str, Any]:
    body = {**args.scope(), "query": args.query, "top_k": args.top_k, "score_threshold": args.score_threshold}
    if args.filters is not None:
        body["filters"] = args.filters
    if args.memory_types:
        body["memory_types"] = args.memory_types
    _, hits = native.search(body)
    return {"results": [{**objects.memory_object(h.memory), "score": h.score} for h in hits]}


def _list(args: ListMemoriesIn) -> dict[str, Any]:
    from chalicelib.api import request

    parsed = request.validate(ListParams, native.bound({**args.scope(), **({"memory_type": args.memory_type}
                                                                          if args.memory_type else {})}))
    with native.session() as (conn, ctx):
        rows, has_more = memory.list_page(conn, ctx, scope_of(parsed), Page(limit=args.limit, after=args.after),
                                          memory_types=[parsed.memory_type] if parsed.memory_type else None)
    return {"data": [objects.memory_object(m) for m in rows], "has_more": has_more}


def _get(args: MemoryIdIn) -> dict[str, Any]:
    with native.session() as (conn, ctx):
        return objects.memory_object(memory.get(conn, ctx, args.memory_id))


def _update(args: UpdateMemoryIn) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.text is not None:
        body["memory"] = args.text
    if args.metadata is not None:
        body["metadata"] = args.metadata
    return objects.memory_object(native.update(args.memory_id, body))


def _delete(args: MemoryIdIn) -> dict[str, Any]:
    with native.session() as (conn, ctx):
        if not memory.delete(conn, ctx, args.memory_id):
            raise NotFoundError(f"No memory found with id '{args.memory_id}'.", param="memory_id")
    return {"id": args.memory_id, "deleted": True}


def _history(args: MemoryIdIn) -> dict[str, Any]:
    with native.session() as (conn, ctx):
        rows, _ = memory.history(conn, ctx, args.memory_id)
    return {"memory_id": args.memory_id, "events": [objects.memory_history_entry(r) for r in rows]}


# ---- knowledge ----

def _stores(args: ListStoresIn) -> dict[str, Any]:
    from chalicelib.store import vector_stores

    tenant = current_tenant()
    with tenant_db() as conn:
        rows, has_more = vector_stores.list_page(conn, tenant, Page(limit=args.limit, after=args.after))
        counts = vector_stores.file_counts(conn, tenant, [r.id for r in rows])
    return {"data": [objects.vector_store_object(r, counts[r.id]) for r in rows], "has_more": has_more}


def _url(store_id: str, file_id: str) -> str:
    return f"engram://vector_stores/{store_id}/files/{file_id}"


def _knowledge_search(args: SearchIn) -> dict[str, Any]:
    from chalicelib.search.service import parse_ranking_options, search
    from chalicelib.store import vector_stores

    tenant = current_tenant()
    ranking = parse_ranking_options(args.ranking_options)
    with tenant_db() as conn:
        if args.vector_store_ids:
            stores = [vector_stores.get(conn, tenant, i, shared=True) for i in args.vector_store_ids]
        else:
            stores, _ = vector_stores.list_page(conn, tenant, Page(limit=MAX_STORES))
        now = objects.now()
        stores = [s for s in stores if not vector_stores.is_expired(s, now)]
        hits = search(conn, tenant, stores, args.query, embedder=deps.embedder(), settings=deps.current_settings(),
                      limit=args.max_num_results, filters=args.filters, ranking=ranking) if stores else []
    return {"results": [{"id": f"{h.vector_store_id}/{h.file_id}", "title": h.filename, "text": h.text,
                         "url": _url(h.vector_store_id, h.file_id), "score": h.score,
                         "vector_store_id": h.vector_store_id, "file_id": h.file_id, "attributes": h.attributes}
                        for h in hits]}


def _fetch(args: FetchIn) -> dict[str, Any]:
    from chalicelib.store import attachments, chunks, vector_stores

    tenant = current_tenant()
    store_id, _, file_id = args.id.rpartition("/")
    with tenant_db() as conn:
        candidates = [vector_stores.get(conn, tenant, store_id, shared=True)] if store_id else \
            vector_stores.list_all(conn, tenant)
        for store in candidates:
            try:
                row = attachments.get(conn, store.tenant_id, store.id, file_id) if store.tenant_id == tenant \
                    else None
            except NotFoundError:
                continue
            if store.tenant_id != tenant or (row is not None and row.status == "completed"):
                text = chunks.file_text(conn, store.tenant_id, store.id, file_id)
                if not text:
                    continue
                name = row.filename if row is not None else file_id
                return {"id": f"{store.id}/{file_id}", "title": name, "text": text[:FETCH_MAX_CHARS],
                        "url": _url(store.id, file_id),
                        "metadata": {"vector_store_id": store.id, "file_id": file_id,
                                     "attributes": row.attributes if row is not None else {},
                                     "truncated": len(text) > FETCH_MAX_CHARS}}
    raise NotFoundError(f"No processed file found with id '{args.id[:300]}'.", param="id")


TOOLS: tuple[EngramTool, ...] = (
    EngramTool("add_memory", "Remember", "Store a memory: a fact as written (text), or a conversation to extract "
               "facts from (messages with infer: true). Returns each memory added or updated.", AddMemoryIn,
               AddResultOut, "memories", "write", read_only=False, destructive=False, idempotent=False,
               handler=_add),
    EngramTool("search_memories", "Recall", "Search memories by meaning and keywords; the best first, each with its "
               "score.", SearchMemoriesIn, MemoriesOut, "memories", "read", read_only=True, destructive=False,
               idempotent=True, handler=_search),
    EngramTool("list_memories", "List memories", "List the scope's memories, newest first, a page at a time.",
               ListMemoriesIn, MemoryPageOut, "memories", "read", read_only=True, destructive=False, idempotent=True,
               handler=_list),
    EngramTool("get_memory", "Get a memory", "One memory by id.", MemoryIdIn, MemoryOut, "memories", "read",
               read_only=True, destructive=False, idempotent=True, handler=_get),
    EngramTool("update_memory", "Update a memory", "Change a memory's text (a new version; the old one is kept in "
               "its history) or metadata.", UpdateMemoryIn, MemoryOut, "memories", "write", read_only=False,
               destructive=False, idempotent=True, handler=_update),
    EngramTool("delete_memory", "Forget a memory", "Delete a memory and its earlier versions (its history keeps the "
               "events, not the text).", MemoryIdIn, DeletedOut, "memories", "write", read_only=False,
               destructive=True, idempotent=True, handler=_delete),
    EngramTool("memory_history", "A memory's history", "Every change of a memory, oldest first.", MemoryIdIn,
               HistoryOut, "memories", "read", read_only=True, destructive=False, idempotent=True, handler=_history),
    EngramTool("list_vector_stores", "List knowledge bases", "The vector stores (document collections) that can be "
               "searched, newest first.", ListStoresIn, StorePageOut, "vector_stores", "read", read_only=True,
               destructive=False, idempotent=True, handler=_stores),
    EngramTool("search", "Search documents", "Search documents in one or several vector stores (hybrid: meaning "
               "and keywords). Each result has an id to fetch the whole document.", SearchIn, SearchOut,
               "vector_stores", "read", read_only=True, destructive=False, idempotent=True,
               handler=_knowledge_search),
    EngramTool("fetch", "Read a document", "The whole text of a document by the id a search result gave.", FetchIn,
               FetchOut, "vector_stores", "read", read_only=True, destructive=False, idempotent=True,
               handler=_fetch),
)
_BY_NAME = {tool.name: tool for tool in TOOLS}


def listed(grants: Access | None = None) -> list[EngramTool]:
    """The tools the current caller's key (or ``grants``) may call: a tool needing a permission the key lacks is
    not listed."""
    grants = grants or current_access()
    return [tool for tool in TOOLS if grants.allows(tool.resource, tool.level)]


def run(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Run the tool ``name`` with ``arguments`` as the current caller: its structured result (checked against its
    output model).

    Raises:
        KeyError: no such tool, or one the key may not use (the server answers it as an unknown tool).
        InvalidRequestError: arguments that do not fit the input schema (``param`` names the field), or what the
            service refuses; NotFoundError, PermissionDeniedError, UpstreamError ...: as the HTTP API raises them.
    """
    from chalicelib.validation import validate

    tool = _BY_NAME[name]
    if not current_access().allows(tool.resource, tool.level):
        raise KeyError(name)
    args = validate(tool.input, arguments or {})
    return tool.output.model_validate(tool.handler(args)).model_dump(mode="json")
