"""The pgvector backend: the vector leg over pgvector (HNSW or exact, :mod:`chalicelib.search.vector`) and the
keyword leg over the BM25 postings (:mod:`chalicelib.search.keyword`), both in Postgres — the default, and the
only backend for memories and exchanges."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from chalicelib.config import Settings
from chalicelib.search.corpus import Corpus, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.keyword import KeywordLeg, keyword_leg
from chalicelib.search.vector import VectorScope, distances, vector_search
from chalicelib.store.vector_stores import HnswIndex

__all__ = ["PGVECTOR", "PgvectorBackend"]


class PgvectorBackend:
    """:class:`~chalicelib.search.backends.VectorBackend` over Postgres (stateless: one instance serves all)."""

    name = "pgvector"

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """:func:`~chalicelib.search.vector.vector_search` with the settings' ``ef_search`` and exact-scan bound."""
        return vector_search(conn, scope, vector, limit, where=where, ef_search=settings.hnsw_ef_search,
                             exact_scan_max_rows=settings.exact_scan_max_rows, iterative_scan=index.iterative_scan,
                             halfvec=index.halfvec)

    def distances(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float],
                  ids: Sequence[int]) -> dict[int, float]:
        """:func:`~chalicelib.search.vector.distances`."""
        return distances(conn, scope, vector, ids)

    def keyword_leg(self, conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                    where: CompiledFilter | None, exact_head: int | None = None) -> KeywordLeg:
        """:func:`~chalicelib.search.keyword.keyword_leg` (exact BM25 scores; the first ``exact_head`` rows, or
        all, the exhaustive ranking)."""
        return keyword_leg(conn, corpus, scope, query, limit, where=where, exact=exact_head)


PGVECTOR = PgvectorBackend()
