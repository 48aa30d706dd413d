"""The server-side ``file_search`` tool: what the model is offered, how its calls are read, how the search runs
(only over the request's vector stores — the model supplies queries, never store ids; OPENAI-COMPAT.md §7 gotcha
7) and how results are shown to the model (labelled with citation markers, :mod:`citations`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from chalicelib import deps, ids, observability
from chalicelib.chat.base import ToolSpec
from chalicelib.config import Settings
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.responses.items import FILE_SEARCH_TOOL
from chalicelib.responses.schemas import FileSearchTool
from chalicelib.search.filters import compile_filter
from chalicelib.search.service import RankingOptions, search
from chalicelib.store import vector_stores
from chalicelib.store.db import tenant_connection
from chalicelib.store.vector_stores import VectorStore
from chalicelib.validation import param_path
from chalicelib.wire import FileSearchResult

MAX_QUERIES_PER_CALL = 5  # queries the model may send in one call (more are ignored)

SPEC = ToolSpec(
    name=FILE_SEARCH_TOOL,
    description=("Search the user's documents. Returns the most relevant passages, each labelled with a source "
                 "marker such as <|file-abc123|> to cite."),
    parameters={"type": "object",
                "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                           "description": "One or more search queries."}},
                "required": ["queries"], "additionalProperties": False})


@dataclass(frozen=True)
class FileSearch:
    """A request's ``file_search`` tool, its stores checked: runs searches for ``tenant_id`` over ``stores``."""

    settings: Settings
    tenant_id: str
    stores: tuple[VectorStore, ...]
    max_num_results: int
    filters: Any
    ranking: RankingOptions

    def run(self, queries: list[str]) -> list[FileSearchResult]:
        """Search and return results ``{file_id, filename, score, text, attributes}`` (best first, at most
        ``max_num_results``; an empty store gives ``[]``).

        Raises:
            UpstreamError: embedding the queries failed.
        """
        started = time.perf_counter()
        with tenant_connection(self.settings, self.tenant_id) as conn:
            hits = search(conn, self.tenant_id, list(self.stores), queries, embedder=deps.embedder(self.settings),
                          settings=self.settings, limit=self.max_num_results, filters=self.filters,
                          ranking=self.ranking)
            vector_stores.touch(conn, self.tenant_id, self.stores)
        observability.record(observability.SEARCH_LATENCY, (time.perf_counter() - started) * 1000.0)
        return [{"file_id": h.file_id, "filename": h.filename, "score": h.score, "text": h.text,
                 "attributes": h.attributes} for h in hits]


def prepare(conn: psycopg.Connection, settings: Settings, tenant_id: str, tool: FileSearchTool, *,
            index: int) -> FileSearch:
    """Check a request's ``file_search`` tool (``tools[index]``) against the tenant's stores (and stores other
    tenants shared, which any tenant may search), on the request's tenant connection ``conn``.

    Raises:
        InvalidRequestError: (400) a malformed store id, an expired store, a store of another embedding model,
            invalid ``filters``.
        NotFoundError: (404) a store id the tenant does not have; ``param`` names it
            (``tools[<index>].vector_store_ids[<j>]``).
    """
    field = param_path("tools", index, "vector_store_ids")
    for position, store_id in enumerate(tool.vector_store_ids):
        ids.validate_id(store_id, ids.VECTOR_STORE, param=param_path(field, position))
    compile_filter(tool.filters, param=param_path("tools", index, "filters"))
    embedder = deps.embedder(settings)
    stores = []
    for store_id in dict.fromkeys(tool.vector_store_ids):
        try:
            store = vector_stores.get(conn, tenant_id, store_id, shared=True)
            vector_stores.require_active(store, datetime.now(UTC))
            vector_stores.check_embedding(store, embedder.model, embedder.dimension)
        except (NotFoundError, InvalidRequestError) as exc:
            param = param_path(field, tool.vector_store_ids.index(store_id))
            raise type(exc)(exc.message, param=param, code=exc.code) from None
        stores.append(store)
    ranking = tool.ranking_options
    options = RankingOptions()
    if ranking is not None:
        weights = ranking.hybrid_search
        options = RankingOptions(ranker=ranking.ranker, score_threshold=ranking.score_threshold,
                                 embedding_weight=weights.embedding_weight if weights else 1.0,
                                 text_weight=weights.text_weight if weights else 1.0)
    return FileSearch(settings, tenant_id, tuple(stores), tool.max_num_results, tool.filters, options)


def parse_queries(arguments: str) -> list[str]:
    """The queries in a model's ``file_search`` call: ``{"queries": [...]}`` (or ``{"query": "..."}``, which
    smaller models produce); blank queries dropped, at most :data:`MAX_QUERIES_PER_CALL`.

    Raises:
        InvalidRequestError: the arguments are not JSON or name no query (reported to the model, not the client).
    """
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        raise InvalidRequestError("file_search arguments are not valid JSON.") from None
    raw: Any = value.get("queries", value.get("query")) if isinstance(value, dict) else value
    if isinstance(raw, str):
        raw = [raw]
    queries = [q.strip() for q in raw if isinstance(q, str) and q.strip()] if isinstance(raw, list) else []
    if not queries:
        raise InvalidRequestError('file_search needs {"queries": ["..."]} with at least one non-empty query.')
    return queries[:MAX_QUERIES_PER_CALL]
