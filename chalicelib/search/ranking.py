"""Ranking a scope of any corpus for one or more queries: the vector leg and the keyword leg per query, fused
(:mod:`chalicelib.search.fusion`). Shared by vector-store search (chunks) and memory search.

Each result carries the fused ``score`` and the evidence behind it: the best cosine ``similarity`` seen by the
vector leg and the best ``keyword`` score (BM25 divided by the query's highest attainable BM25, so in [0, 1]).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from chalicelib import observability
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.search.corpus import Corpus, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.fusion import reciprocal_rank_fusion
from chalicelib.search.keyword import keyword_search, query_terms
from chalicelib.search.vector import VectorScope, vector_search
from chalicelib.store.vector_stores import HnswIndex, hnsw_index

__all__ = ["Ranked", "Weights", "rank"]


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each leg counts (≥ 0, not both 0): OpenAI's ``ranking_options.hybrid_search``."""

    embedding: float = 1.0
    text: float = 1.0


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked row: its ``id``, the fused ``score`` in [0, 1], its best cosine ``similarity`` (None when the
    vector leg did not return it) and best normalised ``keyword`` score (None likewise)."""

    id: int
    score: float
    similarity: float | None
    keyword: float | None


def rank(conn: psycopg.Connection, corpus: Corpus, scope: Scope, queries: Sequence[str], *, embedder: Embedder,
         settings: Settings, depth: int, where: CompiledFilter | None, weights: Weights,
         indexed_rows: int, vectors: Sequence[Sequence[float]] | None = None) -> list[Ranked]:
    """Every row either leg returned for any of ``queries`` (each leg asked for ``depth`` rows per query), best
    first. Vector-only ranking (``weights.text == 0``) orders by cosine similarity; otherwise by reciprocal-rank
    fusion of every leg's list. ``vectors`` (one per query, ``embedder.dimension`` floats each) are the queries'
    embeddings when the caller computed them already (memory recall reuses its query vector); else they are
    embedded here.

    Raises:
        UpstreamError: embedding the queries failed.
    """
    rankings: list[tuple[float, list[int]]] = []
    similarity: dict[int, float] = {}
    keyword: dict[int, float] = {}
    if weights.embedding > 0 and scope.rows > 0:
        # Only an indexed corpus can take the HNSW path: what its index is built over decides the cast.
        index = (hnsw_index(conn, embedder.dimension) if corpus.hnsw_prefix is not None
                 else HnswIndex(kind=None, iterative_scan=False))
        vector_scope = VectorScope(corpus, scope, embedder.dimension, indexed_rows)
        if vectors is None:
            started = time.perf_counter()
            vectors = embedder.embed(list(queries))
            observability.record(observability.QUERY_EMBEDDING_LATENCY, (time.perf_counter() - started) * 1000.0)
        for vector in vectors:
            rows = vector_search(conn, vector_scope, vector, depth, where=where, ef_search=settings.hnsw_ef_search,
                                 exact_scan_max_rows=settings.exact_scan_max_rows,
                                 iterative_scan=index.iterative_scan, halfvec=index.halfvec)
            for row_id, distance in rows:
                similarity[row_id] = max(similarity.get(row_id, 0.0), max(0.0, min(1.0, 1.0 - distance)))
            rankings.append((weights.embedding, [row_id for row_id, _ in rows]))
    if weights.text > 0:
        for q in queries:
            terms = query_terms(conn, corpus, scope, q) if corpus.statistics == "maintained" else None
            rows = keyword_search(conn, corpus, scope, q, depth, where=where, terms=terms)
            best = terms.max_score if terms is not None else max((s for _, s in rows), default=1.0)
            for row_id, value in rows:
                keyword[row_id] = max(keyword.get(row_id, 0.0), min(1.0, value / best) if best > 0 else 0.0)
            rankings.append((weights.text, [row_id for row_id, _ in rows]))
    if weights.text > 0:
        fused = reciprocal_rank_fusion(rankings)
    else:
        fused = sorted(similarity.items(), key=lambda kv: -kv[1])
    return [Ranked(int(row_id), score, similarity.get(int(row_id)), keyword.get(int(row_id)))
            for row_id, score in fused]
