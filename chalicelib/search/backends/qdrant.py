"""The Qdrant backend: candidates from Qdrant's dense and sparse indexes, evidence from Postgres; its writer
(:mod:`qdrant_write`) keeps the points equal to Postgres through the generic sync.

- **Vector leg**: a dense query of the store's collection filtered to the scope (the tenants, the stores, the
  files a filter narrowed it to, the attribute filter). Qdrant's cosine score is the similarity: distance = 1 −
  score. Filtering happens inside Qdrant's HNSW walk (its filterable graph and payload indexes), so a filtered
  search returns ``min(limit, matching)`` points without the over-fetching pgvector needs.
- **Keyword leg**: a sparse query whose weights are the query lexemes' idf over the stores' statistics, which
  Postgres maintains for every store (:func:`~chalicelib.search.keyword.query_terms`): Qdrant's dot product with
  the points' term weights (:mod:`qdrant_points`) is BM25 with the average length of the sync. The ranking reads the
  candidates' exact BM25 in Postgres (``exact`` False on the leg), so scores equal the pgvector backend's.
- **Distances** of candidates only the keyword leg found: the same dense query restricted to their ids.

Every query carries the tenant filter (Qdrant's ``is_tenant`` payload index); the candidates then resolve to rows
only through Postgres, under row-level security, so neither wall depends on the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.errors import EngramError
from chalicelib.qdrant import DENSE, SPARSE, TENANT_FIELD, QdrantTransport, collection_name
from chalicelib.search.backends import IndexState, qdrant_partitions, qdrant_write
from chalicelib.search.backends.qdrant_filters import compile_qdrant
from chalicelib.search.backends.qdrant_points import query_vector
from chalicelib.search.corpus import Corpus, Partition, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.keyword import KeywordLeg, QueryTerms, query_terms
from chalicelib.search.partitions import PartitionSearch
from chalicelib.search.vector import VectorScope
from chalicelib.store.vector_index_outbox import StoreRow
from chalicelib.store.vector_stores import HnswIndex

__all__ = ["QdrantBackend", "adapter", "scope_filter"]

# Candidates of a leg whose filter Qdrant could only widen (string ranges) are checked in Postgres: ask for this
# many times as many.
WIDENED_OVERFETCH = 4
_CHECK = """SELECT id FROM chunks WHERE tenant_id = ANY(%(tenants)s) AND id = ANY(%(ids)s) AND {where}"""


def scope_filter(scope: Scope, where: CompiledFilter | None) -> tuple[dict[str, Any], bool]:
    """The Qdrant filter of a search's scope (tenants, stores, narrowed files) and attribute filter, and whether it
    is exact (see :mod:`qdrant_filters`)."""
    must: list[dict[str, Any]] = [{"key": TENANT_FIELD, "match": {"any": list(scope.tenant_ids)}},
                                  {"key": "vector_store_id", "match": {"any": list(scope.partitions)}}]
    files = scope.params.get("scope_files")
    if files is not None:
        must.append({"key": "file_id", "match": {"any": list(files)}})
    exact = True
    if where is not None:
        compiled = compile_qdrant(where.source)
        exact = compiled.exact
        if compiled.filter is not None:
            must.append(compiled.filter)
    return {"must": must}, exact


class QdrantBackend:
    """:class:`~chalicelib.search.backends.VectorBackend` over the Qdrant transport of ``settings``
    (:func:`chalicelib.deps.qdrant`), searching the collection of ``dimension``-float embeddings."""

    name = "qdrant"
    in_postgres = False
    partition_min_rows = 0  # every history lives in Qdrant
    writes_after_add = True  # an add's points are upserted right after it commits

    def __init__(self, settings: Settings, dimension: int) -> None:
        self._settings = settings
        self._collection = collection_name(settings, dimension)

    @property
    def _transport(self) -> QdrantTransport:
        """The settings' transport (:func:`chalicelib.deps.qdrant`: built once per process, on first use)."""
        return deps.qdrant(self._settings)

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """Up to ``limit`` nearest points of the scope: ``(chunk id, 1 − cosine)``, nearest first. ``hnsw_ef``
        follows pgvector's ``ef_search`` setting (at least ``limit``)."""
        if scope.scope_rows == 0 or limit <= 0:
            return []
        flt, exact = scope_filter(scope.scope, where)
        asked = limit if exact else limit * WIDENED_OVERFETCH
        search = {"query": [float(x) for x in vector], "using": DENSE, "filter": flt, "limit": asked,
                  "params": {"hnsw_ef": max(settings.hnsw_ef_search, asked)}}
        [found] = self._transport.query_batch(self._collection, [search])
        rows = [(point_id, 1.0 - score) for point_id, score in found]
        return rows if exact else self._checked(conn, scope.scope, where, rows)[:limit]

    def distances(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float],
                  ids: Sequence[int]) -> dict[int, float]:
        """Exact cosine distances of the scope's points ``ids`` (one query restricted to them)."""
        if not ids:
            return {}
        flt, _ = scope_filter(scope.scope, None)
        flt["must"].append({"has_id": [int(i) for i in ids]})
        search = {"query": [float(x) for x in vector], "using": DENSE, "filter": flt, "limit": len(ids),
                  "params": {"exact": True}}
        [found] = self._transport.query_batch(self._collection, [search])
        return {point_id: 1.0 - score for point_id, score in found}

    def keyword_leg(self, conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                    where: CompiledFilter | None, exact_head: int | None = None) -> KeywordLeg:
        """Up to ``limit`` sparse candidates (BM25 with the sync's average length; ``exact`` False) and the query's
        ``max_score`` over the stores' statistics. ``exact_head`` is ignored (Qdrant's sparse search is its own
        ranking; the candidates' exact scores are read again)."""
        if limit <= 0 or not query.strip() or scope.rows <= 0:
            return KeywordLeg([], True, 0.0, exact=False)
        terms = query_terms(conn, corpus, scope, query)
        if terms is None or not terms.lexemes:
            return KeywordLeg([], True, terms.max_score if terms else 0.0, terms, exact=False)
        flt, exact = scope_filter(scope, where)
        asked = limit if exact else limit * WIDENED_OVERFETCH
        search = {"query": query_vector(terms.lexemes, terms.idfs), "using": SPARSE, "filter": flt, "limit": asked}
        [found] = self._transport.query_batch(self._collection, [search])
        rows = found if exact else self._checked(conn, scope, where, found)
        return KeywordLeg(rows[:limit], len(rows) < limit, terms.max_score, terms, exact=False)

    def _checked(self, conn: psycopg.Connection, scope: Scope, where: CompiledFilter | None,
                 rows: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """The rows whose chunks pass the SQL filter (the Qdrant one was wider), in their order."""
        if where is None or not rows:
            return rows
        statement = sql.SQL(_CHECK).format(where=where.expression)
        kept = {int(r[0]) for r in conn.execute(statement, {**where.params, "tenants": list(scope.tenant_ids),
                                                            "ids": [i for i, _ in rows]}).fetchall()}
        return [row for row in rows if row[0] in kept]

    def partition_vector_leg(self, conn: psycopg.Connection, search: PartitionSearch, vector: Sequence[float],
                             limit: int, *, settings: Settings) -> list[tuple[int, float]]:
        """:func:`qdrant_partitions.body_vector_leg` (exact distances, the scope checked in Postgres)."""
        return qdrant_partitions.body_vector_leg(conn, self._transport, self._settings, search, vector, limit)

    def partition_keyword_leg(self, conn: psycopg.Connection, search: PartitionSearch, terms: QueryTerms,
                              limit: int, *, exact_head: int | None) -> tuple[list[tuple[int, float]], bool]:
        """:func:`qdrant_partitions.body_keyword_leg` (Qdrant's sparse candidates, their exact BM25 read in
        Postgres)."""
        return qdrant_partitions.body_keyword_leg(conn, self._transport, self._settings, search, terms, limit), True

    # ---- writer

    def write_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                        seqs: Sequence[int], *, rebuild: bool = False) -> None:
        """:func:`qdrant_partitions.write` (``rebuild`` changes nothing: the sparse weights only propose).

        Raises:
            QdrantError: Qdrant failed.
        """
        qdrant_partitions.write(conn, self._transport, self._settings, partition, corpus, seqs)

    def delete_partition_rows(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                              seqs: Sequence[int]) -> None:
        """:func:`qdrant_partitions.delete_rows`.

        Raises:
            QdrantError: Qdrant failed.
        """
        qdrant_partitions.delete_rows(self._transport, self._settings, partition, corpus, seqs)

    def drop_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus) -> None:
        """:func:`qdrant_partitions.drop`.

        Raises:
            QdrantError: Qdrant failed.
        """
        qdrant_partitions.drop(self._transport, self._settings, partition, corpus)

    def settle_partitions(self, corpus: Corpus, dimensions: Sequence[int]) -> None:
        """:func:`qdrant_partitions.settle`.

        Raises:
            QdrantError: Qdrant failed.
        """
        qdrant_partitions.settle(self._transport, self._settings, corpus, dimensions)

    def write_file(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow, file_id: str, *,
                   points: bool = True, upsert: bool = True, delete_stale: bool = True) -> int:
        """:func:`qdrant_write.write_file` on the settings' transport.

        Raises:
            QdrantError: Qdrant failed (nothing in Postgres changed; running it again finishes the job).
            ConfigurationError / UpstreamError: vectors missing from the cache could not be embedded again.
        """
        return qdrant_write.write_file(conn, self._settings, self._transport, tenant_id, store_id, store, file_id,
                                       points=points, upsert=upsert, delete_stale=delete_stale)

    def delete_store(self, tenant_id: str, store_id: str, dimension: int) -> None:
        """Delete the store's points from the collection of ``dimension``-float embeddings.

        Raises:
            QdrantError: Qdrant failed.
        """
        self._transport.delete(collection_name(self._settings, dimension),
                               {"must": qdrant_write.store_scope(tenant_id, store_id)})

    def keep_files(self, tenant_id: str, store_id: str, dimension: int, file_ids: Sequence[str]) -> None:
        """Delete the store's points of files not in ``file_ids``.

        Raises:
            QdrantError: Qdrant failed.
        """
        self._transport.delete(collection_name(self._settings, dimension),
                               {"must": qdrant_write.store_scope(tenant_id, store_id),
                                "must_not": [{"key": "file_id", "match": {"any": list(file_ids)}}]})

    def settle(self, dimensions: Sequence[int]) -> None:
        """Build the indexes of what was written into each dimension's collection since its last build (the
        embedded engine runs no background optimizer; a server does it itself, so nothing is sent there). A
        collection with nothing written since costs one look at its marker.

        Raises:
            QdrantError: Qdrant failed (or another process holds the embedded engine).
        """
        if self._settings.qdrant_url:
            return
        for dimension in dimensions:
            name = collection_name(self._settings, dimension)
            state = self._transport.status(name)
            if state is not None and not state.built:
                self._transport.optimize(name)

    def index_state(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow) -> IndexState:
        """Indexed unless points were written since the collection's last index build (the embedded engine:
        until ``settle``; a server: while it optimizes); the store's points counted in Qdrant, None when this
        process cannot reach them (Qdrant down, or the embedded engine held by another process)."""
        name = collection_name(self._settings, store.embedding_dim)
        try:
            state = self._transport.status(name)
        except EngramError as error:
            return IndexState(None, None, f"unknown: {error}")
        if state is None:
            return IndexState(True, 0, "no collection yet")
        points = None
        if state.points is not None:
            points = self._transport.count(name, {"must": qdrant_write.store_scope(tenant_id, store_id)})
        detail = state.detail if state.built else f"{state.detail}; an index build is owed (exact scans until then)"
        return IndexState(state.built, points, detail)

    def describe(self) -> str:
        """The server's URL, or ``embedded``."""
        return self._settings.qdrant_url or "embedded"


def adapter(settings: Settings, dimension: int) -> QdrantBackend:
    """The adapter for ``dimension``-float embeddings on the settings' Qdrant (its transport opened on first
    use)."""
    return QdrantBackend(settings, dimension)
