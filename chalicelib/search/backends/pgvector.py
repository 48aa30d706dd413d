"""The pgvector backend: the vector leg over pgvector (HNSW or exact, :mod:`chalicelib.search.vector`) and the
keyword leg over the BM25 postings (:mod:`chalicelib.search.keyword`), both in Postgres — the default. Its writer
has nothing to do: the chunks' triggers maintain the HNSW index and the postings in the writing transaction
(migrations 0009, 0012, 0026), so it is ``in_postgres``. Users' histories: a body's postings and tagged vectors
in Postgres too (:mod:`pgvector_partitions`), written by the ``index_memories`` job once a history is long enough
for them to pay (:data:`PARTITION_MIN_ROWS`)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from chalicelib.config import Settings
from chalicelib.search.backends import IndexState, pgvector_partitions
from chalicelib.search.corpus import Corpus, Partition, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.keyword import KeywordLeg, QueryTerms, keyword_leg
from chalicelib.search.partitions import PartitionSearch
from chalicelib.search.vector import VectorScope, distances, vector_search
from chalicelib.store.vector_index_outbox import StoreRow
from chalicelib.store.vector_stores import HNSW_MAX_HALFVEC_DIM, HnswIndex, hnsw_index

__all__ = ["PARTITION_MIN_ROWS", "PGVECTOR", "PgvectorBackend", "adapter"]

# A user's history is indexed on pgvector once it holds this many rows: below, an exact scan of it costs less than
# the graph's walk and the top-k's fixed steps (benchmarks/memory.py --per-user).
PARTITION_MIN_ROWS = 2000


class PgvectorBackend:
    """:class:`~chalicelib.search.backends.VectorBackend` over Postgres (stateless: one instance serves all)."""

    name = "pgvector"
    in_postgres = True
    partition_min_rows = PARTITION_MIN_ROWS
    writes_after_add = False  # (an HNSW insert costs ~1 ms a row: the job writes bodies)

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

    def partition_vector_leg(self, conn: psycopg.Connection, search: PartitionSearch, vector: Sequence[float],
                             limit: int, *, settings: Settings) -> list[tuple[int, float]]:
        """:func:`pgvector_partitions.body_vector_leg`."""
        return pgvector_partitions.body_vector_leg(conn, search, vector, limit, settings=settings)

    def partition_keyword_leg(self, conn: psycopg.Connection, search: PartitionSearch, terms: QueryTerms,
                              limit: int, *, exact_head: int | None) -> tuple[list[tuple[int, float]], bool]:
        """:func:`pgvector_partitions.body_keyword_leg` (exact BM25)."""
        return pgvector_partitions.body_keyword_leg(conn, search, terms, limit, exact_head=exact_head), True

    def write_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                        seqs: Sequence[int], *, rebuild: bool = False) -> None:
        """:func:`pgvector_partitions.write` (in the caller's transaction)."""
        pgvector_partitions.write(conn, partition, corpus, seqs, rebuild=rebuild)

    def delete_partition_rows(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                              seqs: Sequence[int]) -> None:
        """Nothing: the triggers removed their postings and vectors when the rows changed (migration 0030)."""

    def drop_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus) -> None:
        """:func:`pgvector_partitions.drop`."""
        pgvector_partitions.drop(conn, partition)

    def settle_partitions(self, corpus: Corpus, dimensions: Sequence[int]) -> None:
        """Nothing: Postgres maintains its indexes as it writes."""

    # ---- writer: nothing to write (the triggers keep the index in the writing transaction)

    def write_file(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow, file_id: str, *,
                   points: bool = True, upsert: bool = True, delete_stale: bool = True) -> int:
        """Nothing: the file's rows are its index. Returns 0."""
        return 0

    def delete_store(self, tenant_id: str, store_id: str, dimension: int) -> None:
        """Nothing: a deleted store's rows and postings go with it."""

    def keep_files(self, tenant_id: str, store_id: str, dimension: int, file_ids: Sequence[str]) -> None:
        """Nothing: a detached file's rows go with it."""

    def settle(self, dimensions: Sequence[int]) -> None:
        """Nothing: Postgres maintains its indexes as it writes."""

    def describe(self) -> str:
        """``Postgres``."""
        return "Postgres"

    def index_state(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow) -> IndexState:
        """Indexed when the dimension's HNSW index exists (a dimension pgvector cannot index is scanned exactly by
        design, and says so); its points are the store's chunks (their vectors are in their rows)."""
        index = hnsw_index(conn, store.embedding_dim)
        if index.kind is not None:
            return IndexState(True, store.chunk_count, f"HNSW over {index.kind} (chunks_hnsw_{store.embedding_dim})")
        if store.embedding_dim > HNSW_MAX_HALFVEC_DIM:
            return IndexState(True, store.chunk_count, f"exact scans ({store.embedding_dim} dimensions: beyond HNSW)")
        return IndexState(False, store.chunk_count, f"no HNSW index for {store.embedding_dim} dimensions: exact scans")


PGVECTOR = PgvectorBackend()


def adapter(settings: Settings, dimension: int) -> PgvectorBackend:
    """The adapter (stateless: one instance serves every dimension)."""
    return PGVECTOR
