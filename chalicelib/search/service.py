"""Hybrid search over a tenant's vector stores (and stores other tenants shared): validate the request, run both
legs per query, fuse, fetch.

A shared store (migrations/0014_shared_stores.sql) is searched like the caller's own: its rows carry its owner's
``tenant_id``, so statements filter on the owners of the stores searched while row-level security, acting as the
caller, lets through exactly the caller's rows and shared stores' rows. A hit of a shared store shows what a hit
of one's own store shows — file id, filename (for citations), text, attributes, score — but the file itself stays
the owner's: retrieving it or its content is "not found" for anyone else.

Order: hybrid results come in reciprocal-rank-fusion order (:mod:`fusion`), vector-only results (``text_weight``
0) by cosine similarity, keyword-only results (``embedding_weight`` 0) by BM25. Scores: every result carries its
**relevance** in [0, 1] (:mod:`relevance`), made from its cosine similarity and BM25 under the request's weights and
calibrated against what unanswerable queries reach, so it means the same for every query: about 96 % of queries
made of random words find nothing at 0.5 or above. ``score_threshold`` keeps the results whose relevance reaches
it, in the same order. A single leg's relevance is monotone in that leg's evidence, so vector-only and keyword-only
scores descend along the list; a hybrid list follows fusion, so a result may score above the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from pydantic import Field, model_validator

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.errors import InvalidRequestError
from chalicelib.search.backends import for_backend
from chalicelib.search.corpus import CHUNKS, Scope, store_scope
from chalicelib.search.filters import CompiledFilter, compile_filter
from chalicelib.search.ranking import Ranked, Weights, rank
from chalicelib.store import attachments
from chalicelib.store.vector_stores import HnswIndex, VectorStore, check_embedding, hnsw_index
from chalicelib.validation import RequestBody, validate

# OpenAI: max_num_results is 1..50 on the API (default 10); internal callers (benchmarks) may ask for more.
MAX_RESULTS_API = 50
MAX_RESULTS_INTERNAL = 1000
# Each leg retrieves at least this many candidates before fusion.
MIN_CANDIDATES = 100
# A filter narrows the scope to the files it matches (file attributes, one row per file) when they hold at most this
# share of the stores' chunks: both legs then see the scope's true size, and the vector leg scans a few files'
# chunks exactly instead of walking the HNSW graph past the 99 % of rows the filter rejects (benchmarks/search.py,
# case "attr 1%": vector leg p50 78–84 ms at 100k chunks before).
NARROW_MAX_SHARE = 0.5

# The filename: from files (the caller's own files), else from shared_store_files (a shared store's, which the
# caller may not read in files); COALESCE evaluates the subquery only when the first is NULL.
_FETCH = """
SELECT c.id, c.vector_store_id, c.file_id,
       coalesce(f.filename, (SELECT s.filename FROM shared_store_files s
                             WHERE s.vector_store_id = c.vector_store_id AND s.file_id = c.file_id)),
       c.chunk_index, c.text, c.attributes, c.page_start, c.page_end, c.char_start, c.char_end
FROM chunks c LEFT JOIN files f ON f.id = c.file_id
WHERE c.tenant_id = ANY(%(tenants)s) AND c.id = ANY(%(ids)s)"""


@dataclass(frozen=True, slots=True)
class RankingOptions:
    """OpenAI ``ranking_options``: ``score_threshold`` in [0, 1]; ``hybrid_search`` weights ≥ 0 (at least one > 0);
    ``ranker``: ``auto`` and ``default-2024-11-15`` (Engram's one ranker: fusion picks the candidates, relevance
    orders them) or ``none`` (no re-ranking: hybrid results in reciprocal-rank-fusion order, each still scored by
    its relevance; a single leg's order is the same under every ranker)."""

    ranker: str = "auto"
    score_threshold: float = 0.0
    embedding_weight: float = 1.0
    text_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One retrieved chunk; ``score`` its relevance in [0, 1] (:mod:`chalicelib.search.relevance`); character
    offsets into the parsed text; pages 1-based or None; the evidence the score was made from
    (:class:`chalicelib.search.ranking.Ranked`): ``similarity`` its cosine similarity to the query in [0, 1] (None
    when the vector leg did not run), ``keyword`` its BM25 over the query's best attainable in [0, 1] (None when
    the keyword leg did not run), with several queries the best over them."""

    chunk_id: int
    vector_store_id: str
    file_id: str
    filename: str
    chunk_index: int
    text: str
    score: float
    attributes: dict[str, Any]
    page_start: int | None
    page_end: int | None
    char_start: int
    char_end: int
    similarity: float | None = None
    keyword: float | None = None


class _Weights(RequestBody):
    """``ranking_options.hybrid_search``: the weight of each leg (≥ 0, not both 0; 1 each when absent)."""

    embedding_weight: float = Field(default=1.0, ge=0.0)
    text_weight: float = Field(default=1.0, ge=0.0)

    @model_validator(mode="after")
    def _some_weight(self) -> _Weights:
        if self.embedding_weight + self.text_weight <= 0:
            raise ValueError("the weights must not both be 0")
        return self


class _Ranking(RequestBody):
    """``ranking_options`` of ``POST /vector_stores/{id}/search``: OpenAI's ``ranker`` and ``score_threshold``,
    and Engram's ``hybrid_search`` weights (as on the Responses ``file_search`` tool)."""

    ranker: Literal["auto", "default-2024-11-15", "none"] = "auto"
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    hybrid_search: _Weights | None = None


def parse_ranking_options(raw: Any, *, param: str = "ranking_options") -> RankingOptions:
    """Validate an OpenAI ``ranking_options`` object (None → defaults).

    Raises:
        InvalidRequestError: unknown ranker or field, threshold outside [0, 1], bad or all-zero weights
            (``param`` names the field, e.g. ``ranking_options.hybrid_search.text_weight``).
    """
    if raw is None:
        return RankingOptions()
    ranking = validate(_Ranking, raw, prefix=param)
    weights = ranking.hybrid_search or _Weights()
    return RankingOptions(ranking.ranker, ranking.score_threshold, weights.embedding_weight, weights.text_weight)


def search(conn: psycopg.Connection, tenant_id: str, stores: Sequence[VectorStore], query: str | Sequence[str], *,
           embedder: Embedder, settings: Settings, limit: int = 10, filters: Any = None,
           ranking: RankingOptions = RankingOptions(), max_results: int = MAX_RESULTS_API) -> list[SearchHit]:
    """Search ``stores`` (the tenant's or shared, same embedding model) for ``query`` (one string or several,
    fused).

    Returns at most ``limit`` hits in ranking order, each with its relevance ``score >= ranking.score_threshold``
    (with several queries, a hit's best relevance over them). A filtered or
    store-scoped search returns ``min(limit, matching chunks)`` hits (before the threshold).

    Raises:
        InvalidRequestError: empty query, ``limit`` outside 1..``max_results``, bad filters, a store that is
            neither the tenant's nor shared.
        EmbeddingMismatchError: a store's embedding model differs from ``embedder``'s.
        UpstreamError: embedding the query failed.
    """
    queries = [query] if isinstance(query, str) else list(query)
    if not queries or any(not isinstance(q, str) or not q.strip() for q in queries):
        raise InvalidRequestError("Invalid 'query': expected a non-empty string or a list of non-empty strings.",
                                  param="query", code="invalid_value")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= max_results:
        raise InvalidRequestError(f"Invalid 'max_num_results': expected an integer between 1 and {max_results}.",
                                  param="max_num_results", code="invalid_value")
    if not stores:
        return []
    for store in stores:
        if store.tenant_id != tenant_id and not store.shared:  # defence in depth: callers load stores by tenant
            raise InvalidRequestError("vector store does not belong to the caller.", param="vector_store_ids",
                                      code="invalid_value")
        check_embedding(store, embedder.model, embedder.dimension)
    where = compile_filter(filters)
    groups: dict[str, list[VectorStore]] = {}
    for store in stores:
        groups.setdefault(store.backend, []).append(store)
    # Stores on different backends are ranked apart and merged by relevance, which means the same on both; the
    # queries are embedded once for all of them.
    vectors = embedder.embed(queries) if len(groups) > 1 and ranking.embedding_weight > 0 else None
    ranked: list[Ranked] = []
    tenant_ids: list[str] = []
    for name, group in groups.items():
        backend = for_backend(name, settings, embedder.dimension)
        index = hnsw_index(conn, embedder.dimension) if backend.in_postgres else HnswIndex(None, False)
        scope = search_scope(conn, tenant_id, group, where)
        tenant_ids += [t for t in scope.tenant_ids if t not in tenant_ids]
        ranked += rank(conn, CHUNKS, scope, queries, embedder=embedder, settings=settings,
                       depth=max(MIN_CANDIDATES, 2 * limit), where=where, indexed_rows=index.indexed_rows,
                       index=index, weights=Weights(ranking.embedding_weight, ranking.text_weight), limit=limit,
                       threshold=ranking.score_threshold, vectors=vectors,
                       backend=backend, rerank=ranking.ranker != "none")
    if len(groups) > 1:
        ranked.sort(key=lambda r: -r.relevance)
    kept = [r for r in ranked if r.relevance >= ranking.score_threshold][:limit]
    return _fetch(conn, tenant_ids, kept)


def search_scope(conn: psycopg.Connection, tenant_id: str, stores: Sequence[VectorStore],
                 where: CompiledFilter | None) -> Scope:
    """The chunks a search of ``stores`` by ``tenant_id`` runs over: the stores' chunks, or — with a filter that
    matches files holding at most :data:`NARROW_MAX_SHARE` of them — those files' chunks (the filter still applies
    to each chunk). Shared stores' attachments are their owner's to read, so a search including one keeps the whole
    scope."""
    owners = [tenant_id, *(s.tenant_id for s in stores)]
    store_ids, rows = [s.id for s in stores], sum(s.chunk_count for s in stores)
    if where is not None and all(s.tenant_id == tenant_id for s in stores):
        matched = attachments.matching_files(conn, tenant_id, store_ids, where.expression, where.params)
        if sum(matched.values()) <= NARROW_MAX_SHARE * rows:
            return store_scope(owners, store_ids, sum(matched.values()), file_ids=sorted(matched), store_rows=rows)
    return store_scope(owners, store_ids, rows)


def _fetch(conn: psycopg.Connection, tenant_ids: Sequence[str], kept: list[Ranked]) -> list[SearchHit]:
    if not kept:
        return []
    rows = {r[0]: r for r in conn.execute(_FETCH, {"tenants": list(tenant_ids),
                                                   "ids": [found.id for found in kept]}).fetchall()}
    hits = []
    for found in kept:
        r = rows.get(found.id)
        if r is None:  # deleted between ranking and fetching
            continue
        hits.append(SearchHit(chunk_id=r[0], vector_store_id=r[1], file_id=r[2], filename=r[3], chunk_index=r[4],
                              text=r[5], score=round(found.relevance, 6), attributes=r[6], page_start=r[7],
                              page_end=r[8], char_start=r[9], char_end=r[10],
                              similarity=_rounded(found.similarity), keyword=_rounded(found.keyword)))
    return hits


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
