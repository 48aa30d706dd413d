"""What a search runs over: a **corpus** (a table of documents, each with a tsvector ``keywords``, its length
``keyword_length``, an ``embedding`` of ``embedding_dim`` dimensions and filterable ``attributes``) and a **scope**
within it (the rows one search may return). The vector leg, the keyword leg and fusion take both, so document
chunks and agent memories share one implementation.

BM25's collection statistics come from one of two places:

- ``maintained``: kept per partition (a vector store) by triggers in the same transaction as the rows — chunk
  count, total length, document frequency per lexeme — and the corpus has impact-ordered postings for an exact
  top-k that reads only what can still make the top (``topk_function``);
- ``scope``: computed on the fly over the scope's collection (:attr:`Scope.collection`: the rows of the ids
  it names, in any status) and scored exhaustively — or, for a corpus partitioned by user (memories, exchanges) and a
  scope inside one user's partition (:class:`Partition`), kept for the partition's indexed *body* and computed on
  the fly for its *tail* (:mod:`chalicelib.search.partitions`): together, every row of the user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import sql

__all__ = ["CHUNKS", "EXCHANGES", "MEMORIES", "Corpus", "Partition", "Scope", "store_scope"]

Statistics = Literal["maintained", "scope"]


@dataclass(frozen=True, slots=True)
class Corpus:
    """A searchable table.

    Attributes:
        name: short name for logs and metrics (``chunks``).
        table: the table (columns ``tenant_id``, ``keywords``, ``keyword_length``, ``embedding_dim``, ``embedding``
            and a bigint row id ``id_column``; filters compile against whichever JSON column the caller names).
        id_column: the bigint column identifying a row in results (``id`` for chunks, ``seq`` for memories).
        statistics: where BM25's statistics come from (see the module docstring).
        partition_column: the column naming a row's partition (``vector_store_id``) for maintained statistics.
        topk_function: the PL/pgSQL exact top-k over the corpus's postings (maintained statistics only); a
            dotted name is schema-qualified.
        hnsw_prefix: the name prefix of the per-dimension partial HNSW indexes (``chunks_hnsw`` → ``chunks_hnsw_384``).
        partitioned_by: the column whose value makes a row's partition (``user_id``: memories and exchanges), whose
            rows a backend's writer indexes (:mod:`chalicelib.search.partitions`); None for chunks.
        speaker: the SQL expression of a row's speaker (memories: ``metadata->>'speaker'``), kept per partition.
        tie_key: an SQL text expression over the table (alias-free) that orders rows of equal score the same way
            whatever order they were written in (issue 33 §5: row ids follow ingestion order); None: ties keep the
            legs' order (row id).
    """

    name: str
    table: str
    statistics: Statistics
    id_column: str = "id"
    partition_column: str | None = None
    topk_function: str | None = None
    hnsw_prefix: str | None = None
    partitioned_by: str | None = None
    speaker: str | None = None
    tie_key: str | None = None

    def identifier(self) -> sql.Identifier:
        """The table as an SQL identifier."""
        return sql.Identifier(self.table)

    def row_id(self) -> sql.Identifier:
        """The row-id column as an SQL identifier."""
        return sql.Identifier(self.id_column)


@dataclass(frozen=True, slots=True)
class Partition:
    """One user's rows of a partitioned corpus (migrations/0030_memory_partitions.sql), as a search sees it.

    Attributes:
        corpus: the corpus's name (``memories`` or ``exchanges``).
        tenant_id, user_id: whose rows.
        key: the partition's key; None while nothing of it was ever indexed (every row is tail).
        backend: the vector backend holding its body's indexes (a name of ``config.VECTOR_BACKEND_ADAPTERS``).
        indexed_through: the body is the rows with ``seq`` ≤ this, less ``pending``; the rest is the tail.
        pending: body rows changed or deleted since they were indexed (out of the body, read with the tail).
        tail: the ids of the rows after the body, when they were at most a few thousand (None: more, or no body).
        body_rows, body_length: how many rows the body holds and their lexemes in all (BM25 statistics).
        avgdl_ref: the average length the body's postings were weighted with (None: no body).
        speakers: the distinct speakers of the body's rows (at most 1,000).
        dimensions: the embedding dimensions of the body's rows.
        index_kind: the type the dimension's HNSW index over tagged vectors is built over (``halfvec``, ``vector``;
            None: none), and ``iterative_scan``: pgvector ≥ 0.8 (pgvector bodies only).
    """

    corpus: str
    tenant_id: str
    user_id: str
    key: int | None = None
    backend: str = ""
    indexed_through: int = 0
    pending: tuple[int, ...] = ()
    tail: tuple[int, ...] | None = None
    body_rows: int = 0
    body_length: int = 0
    avgdl_ref: float | None = None
    speakers: tuple[str, ...] = ()
    dimensions: tuple[int, ...] = ()
    index_kind: str | None = None
    iterative_scan: bool = False

    @property
    def has_body(self) -> bool:
        """Whether some rows are indexed (else every row of the user is read from the tail)."""
        return self.key is not None and self.body_rows > 0


@dataclass(frozen=True, slots=True)
class Scope:
    """The rows one search may return.

    Attributes:
        tenant_ids: the tenants whose rows the scope holds: the caller's, plus the owners of any shared vector stores
            searched (every statement filters ``tenant_id = ANY(tenant_ids)``; row-level security, acting as the
            caller, stands behind and lets the caller read exactly its own rows and shared stores' rows).
        predicate: an SQL boolean over the corpus table, alias-free (e.g. ``vector_store_id = ANY(%(stores)s)``),
            with its named ``params``.
        rows: how many rows the scope holds (an estimate will do): chooses exact vs HNSW vector search and
            exhaustive vs top-k keyword scoring.
        partitions: the partitions the scope covers (vector store ids), for maintained statistics.
        partition_rows: how many rows those partitions hold when the scope is a part of them (a filter narrowed
            it to some files); None when the scope is the partitions whole. A top-k over postings reads the
            partitions', so a small part of a big partition is cheaper to score exhaustively.
        collection: for ``scope`` statistics, the SQL boolean (alias-free, params in ``params``) of the rows whose
            statistics BM25 uses: the rows of the ids the scope names, in any status (None: the scope's own rows).
        user: the user partition the scope lies in (partitioned corpora, a scope naming a user): its body and tail
            (:mod:`chalicelib.search.partitions`).
    """

    tenant_ids: tuple[str, ...]
    predicate: sql.Composable
    params: dict[str, Any]
    rows: int
    partitions: tuple[str, ...] = field(default_factory=tuple)
    partition_rows: int | None = None
    collection: sql.Composable | None = None
    user: Partition | None = None


# Document chunks of vector stores (migrations 0001 and 0009).
# Ties: the chunk's text (its MD5), then its position in its file, then the file: the same documents rank alike
# in any store, in whatever order they were ingested.
CHUNKS = Corpus(name="chunks", table="chunks", statistics="maintained", partition_column="vector_store_id",
                topk_function="engram_chunks_bm25_topk", hnsw_prefix="chunks_hnsw",
                tie_key="md5(text) || to_char(chunk_index, 'FM0000000000') || file_id")


# Agent memories (migration 0010): one user's, agent's or run's; a user's are a partition (migration 0030).
MEMORIES = Corpus(name="memories", table="memories", statistics="scope", id_column="seq", partitioned_by="user_id",
                  speaker="metadata->>'speaker'")
# Exchanges (migration 0015): a user's earlier turns, searched like memories.
EXCHANGES = Corpus(name="exchanges", table="exchanges", statistics="scope", id_column="seq",
                   partitioned_by="user_id")


def store_scope(tenant_ids: str | Sequence[str], store_ids: list[str], rows: int,
                file_ids: Sequence[str] | None = None, store_rows: int | None = None) -> Scope:
    """The chunks of vector stores ``store_ids`` (holding ``rows`` chunks together) owned by ``tenant_ids``: one
    tenant, or several (the caller and the owners of shared stores among ``store_ids``; duplicates are dropped).
    With ``file_ids``, only those files' chunks (``rows`` then counts theirs, ``store_rows`` the stores')."""
    owners = (tenant_ids,) if isinstance(tenant_ids, str) else tuple(dict.fromkeys(tenant_ids))
    predicate = sql.SQL("vector_store_id = ANY(%(scope_stores)s)")
    params: dict[str, Any] = {"scope_stores": list(store_ids)}
    if file_ids is not None:
        predicate = sql.SQL("vector_store_id = ANY(%(scope_stores)s) AND file_id = ANY(%(scope_files)s)")
        params["scope_files"] = list(file_ids)
    return Scope(tenant_ids=owners, predicate=predicate, params=params, rows=rows, partitions=tuple(store_ids),
                 partition_rows=store_rows if file_ids is not None else None)
