"""Vector backends: where a vector store's candidates come from. The port (:class:`VectorBackend`) and
:func:`for_store`; the adapters are :mod:`pgvector` (the default: HNSW and BM25 postings in Postgres) and
:mod:`qdrant` (a Qdrant server or cluster, or the embedded engine), whose write half is :mod:`qdrant_sync`.

A backend only *proposes* candidates; ranking stays one implementation (:func:`chalicelib.search.ranking.rank`):
the evidence behind every result — its cosine similarity and its exact BM25 over the store's statistics, which
Postgres keeps for every store — and the relevance made from it are computed the same way on both backends, so
``score_threshold``, ranking options and citations mean the same thing. Postgres stays the system of record: a
candidate resolves to a chunk only through Postgres (the fetch and the exact BM25 read its row), so a point Qdrant
still holds for a chunk that is gone (a superseded version, a deleted file or store) is never returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import psycopg

    from chalicelib.config import Settings
    from chalicelib.search.corpus import Corpus, Scope
    from chalicelib.search.filters import CompiledFilter
    from chalicelib.search.keyword import KeywordLeg
    from chalicelib.search.vector import VectorScope
    from chalicelib.store.vector_stores import HnswIndex

__all__ = ["VectorBackend", "for_backend"]


class VectorBackend(Protocol):
    """The candidate legs of one backend. Row ids are ``chunks.id``; distances are cosine distances in [0, 2]."""

    name: str

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """Up to ``limit`` ``(row id, cosine distance)`` of ``scope`` nearest ``vector``, nearest first —
        ``min(limit, matching rows)`` of them. ``index``: pgvector's HNSW index for the dimension."""
        ...

    def distances(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float],
                  ids: Sequence[int]) -> dict[int, float]:
        """The exact cosine distance of each of ``scope``'s rows ``ids`` to ``vector`` (unknown ids left out)."""
        ...

    def keyword_leg(self, conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                    where: CompiledFilter | None, exact_head: int | None = None) -> KeywordLeg:
        """The keyword candidates of ``query`` (:class:`~chalicelib.search.keyword.KeywordLeg`; its ``exact``
        says whether their scores are the exact BM25 or must be read again). ``exact_head``: how many of the first
        rows must be the exhaustive BM25 ranking (None: all; :func:`chalicelib.search.ranking.keyword_exact_head`);
        a backend whose rows are not exact anyway may ignore it."""
        ...


def for_backend(name: str, settings: Settings, dimension: int) -> VectorBackend:
    """The adapter for backend ``name`` (``pgvector`` or ``qdrant``; a store's ``backend`` column) searching
    ``dimension``-float embeddings.

    Raises:
        ValueError: an unknown name (the column's check constraint allows no other).
    """
    if name == "pgvector":
        from chalicelib.search.backends.pgvector import PGVECTOR

        return PGVECTOR
    if name == "qdrant":
        from chalicelib.search.backends.qdrant import QdrantBackend

        return QdrantBackend(settings, dimension)
    raise ValueError(f"unknown vector backend {name!r}")
