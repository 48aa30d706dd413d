"""Vector backends: where a vector store's candidates come from, and how they are kept equal to Postgres.

**The port** (:class:`VectorBackend`) has two halves:

- the *candidate legs* — ``vector_leg``, ``distances``, ``keyword_leg`` — which only *propose* rows;
- the *writer* — ``write_file`` (upsert a file's points, delete its stale ones), ``delete_store`` and
  ``keep_files`` (delete by scope), ``settle`` (build what was written) — which makes the backend's copy of a
  store equal to Postgres. A backend whose candidates *are* Postgres' own indexes (``in_postgres``: the default,
  pgvector) has nothing to write: the triggers keep its HNSW and BM25 postings in the same transaction.

**Backends are chosen by name** from one table (:data:`chalicelib.config.VECTOR_BACKEND_ADAPTERS`: name →
``module:function`` of the adapter's factory), :func:`for_backend`. Nothing else names a backend: the triggers
queue every change of a store whose backend is not ``in_postgres`` (migration 0026), the generic sync
(:mod:`sync`) drains that outbox through the writer of the backend each entry names, and the call sites see one
after-write hook (:func:`sync.after_write`) and, inside an ingest's swap, :func:`sync.lock_ahead` /
:func:`sync.write_ahead`. ``tests/test_vector_backend_names.py`` fails if a backend's name is tested anywhere
outside its adapter; ``tests/test_vector_backend_conformance.py`` runs on every registered adapter.

**Users' histories** (memories, exchanges: :mod:`chalicelib.search.partitions`) use the same port: a partition's
*body* legs (``partition_vector_leg``, ``partition_keyword_leg``) and its writer (``write_partition``,
``delete_partition_rows``, ``drop_partition``, ``settle_partitions``), driven by :mod:`partition_sync`.

Ranking stays one implementation (:func:`chalicelib.search.ranking.rank`): the evidence behind every result — its
cosine similarity and its exact BM25 over the store's statistics, which Postgres keeps for every store — and the
relevance made from it are computed the same way on every backend, so ``score_threshold``, ranking options and
citations mean the same thing. Postgres stays the system of record: a candidate resolves to a chunk only through
Postgres (the fetch and the exact BM25 read its row), so a point a backend still holds for a chunk that is gone (a
superseded version, a deleted file or store) is never returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from chalicelib.config import DEFAULT_VECTOR_BACKEND, VECTOR_BACKEND_ADAPTERS
from chalicelib.entrypoints import resolve

if TYPE_CHECKING:
    import psycopg

    from chalicelib.config import Settings
    from chalicelib.search.corpus import Corpus, Partition, Scope
    from chalicelib.search.filters import CompiledFilter
    from chalicelib.search.keyword import KeywordLeg, QueryTerms
    from chalicelib.search.partitions import PartitionSearch
    from chalicelib.search.vector import VectorScope
    from chalicelib.store.vector_index_outbox import StoreRow
    from chalicelib.store.vector_stores import HnswIndex

__all__ = ["DEFAULT_VECTOR_BACKEND", "CandidateLegs", "IndexState", "VectorBackend", "for_backend", "names"]


@dataclass(frozen=True, slots=True)
class IndexState:
    """The state of a store's candidates in its backend, for ``engram stores`` / ``engram stats``: ``indexed``
    (True: searches use the backend's indexes; False: some of the store's candidates are scanned exactly until an
    index is built; None: unknown here), ``points`` (the store's vectors the backend holds; None: unknown here) and
    ``detail`` (what the index is, or why something is unknown), for people."""

    indexed: bool | None
    points: int | None
    detail: str


class CandidateLegs(Protocol):
    """What :func:`chalicelib.search.ranking.rank` asks for candidates: a backend's legs over a store, or a user
    partition's (:class:`chalicelib.search.partitions.PartitionLegs`). Row ids are the corpus's; distances are
    cosine distances in [0, 2]."""

    name: str
    in_postgres: bool

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """Up to ``limit`` ``(row id, cosine distance)`` of ``scope`` nearest ``vector``, nearest first."""
        ...

    def distances(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float],
                  ids: Sequence[int]) -> dict[int, float]:
        """The exact cosine distance of each of ``scope``'s rows ``ids`` to ``vector`` (unknown ids left out)."""
        ...

    def keyword_leg(self, conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                    where: CompiledFilter | None, exact_head: int | None = None) -> KeywordLeg:
        """The keyword candidates of ``query`` (:class:`~chalicelib.search.keyword.KeywordLeg`)."""
        ...


class VectorBackend(Protocol):
    """One backend: its candidate legs and its writer, for vector stores and for users' histories. Row ids are
    ``chunks.id`` (a partition's: its corpus's ``seq``); distances are cosine distances in [0, 2]. Every method may
    raise the backend's :class:`~chalicelib.errors.UpstreamError` (HTTP 502 to clients; the outbox keeps a failed
    write queued)."""

    name: str
    in_postgres: bool
    """True when the candidates are Postgres' own indexes (nothing to write: the writer's methods do nothing)."""
    partition_min_rows: int
    """A user partition is indexed on this backend once it holds this many rows (0: at once); a shorter history
    is read exactly in Postgres, cheaper than any index."""
    writes_after_add: bool
    """Whether an add writes its partition's tail right after it commits (cheap writes), else the
    ``index_memories`` job does."""

    # ---- candidate legs

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """Up to ``limit`` ``(row id, cosine distance)`` of ``scope`` nearest ``vector``, nearest first —
        ``min(limit, matching rows)`` of them. ``index``: pgvector's HNSW index for the dimension (others ignore
        it)."""
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

    def partition_vector_leg(self, conn: psycopg.Connection, search: PartitionSearch, vector: Sequence[float],
                             limit: int, *, settings: Settings) -> list[tuple[int, float]]:
        """Up to ``limit`` ``(row id, exact cosine distance)`` of the partition's body rows that pass the search's
        scope and filter (checked in Postgres), nearest ``vector`` first (an index's approximation of the body's
        nearest)."""
        ...

    def partition_keyword_leg(self, conn: psycopg.Connection, search: PartitionSearch, terms: QueryTerms,
                              limit: int, *, exact_head: int | None) -> tuple[list[tuple[int, float]], bool]:
        """Up to ``limit`` ``(row id, BM25)`` of the partition's body rows that pass the scope and filter, best
        first, for the query ``terms`` (statistics of every row of the user), and whether the scores are exact
        BM25 (the first ``exact_head`` rows then the exact ranking; else they are read again)."""
        ...

    # ---- writer

    def write_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                        seqs: Sequence[int], *, rebuild: bool = False) -> None:
        """Index the partition's rows ``seqs`` (they exist; the caller's transaction updates the statistics and
        the partition's bounds). ``rebuild``: the partition's ``avgdl_ref`` changed; weights that depend on it are
        computed again for the whole body. Idempotent."""
        ...

    def delete_partition_rows(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus,
                              seqs: Sequence[int]) -> None:
        """Forget the partition's rows ``seqs`` (deleted, or changed and about to be written again). Idempotent."""
        ...

    def drop_partition(self, conn: psycopg.Connection, partition: Partition, corpus: Corpus) -> None:
        """Forget the partition's whole body (it moved to another backend). Idempotent."""
        ...

    def settle_partitions(self, corpus: Corpus, dimensions: Sequence[int]) -> None:
        """Build the indexes of what was written into partitions of these dimensions (an engine without a
        background optimizer; a no-op elsewhere)."""
        ...

    def write_file(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow, file_id: str, *,
                   points: bool = True, upsert: bool = True, delete_stale: bool = True) -> int:
        """Make the backend's points of one file equal to its chunks in Postgres: upsert them (unless ``upsert`` is
        False: they are already; none at all when ``points`` is False: the store moved away), then delete the
        file's other points (unless ``delete_stale`` is False). Idempotent. Returns the points upserted."""
        ...

    def delete_store(self, tenant_id: str, store_id: str, dimension: int) -> None:
        """Delete every point of the store (of ``dimension``-float embeddings). Idempotent."""
        ...

    def keep_files(self, tenant_id: str, store_id: str, dimension: int, file_ids: Sequence[str]) -> None:
        """Delete the store's points of every file not in ``file_ids``. Idempotent."""
        ...

    def settle(self, dimensions: Sequence[int]) -> None:
        """Build the indexes of what was written since the last call, for these embedding dimensions (an engine
        without a background optimizer; a no-op elsewhere)."""
        ...

    def describe(self) -> str:
        """Where the candidates live, for people (``Postgres``, a URL, ``embedded``)."""
        ...

    def index_state(self, conn: psycopg.Connection, tenant_id: str, store_id: str, store: StoreRow) -> IndexState:
        """The state of the store's candidates here (:class:`IndexState`); the files still queued for the writer
        are counted by the generic sync (:func:`sync.index_state`), not here."""
        ...


def names() -> tuple[str, ...]:
    """Every registered backend's name, the default first."""
    return tuple(VECTOR_BACKEND_ADAPTERS)


def for_backend(name: str, settings: Settings, dimension: int) -> VectorBackend:
    """The adapter registered as ``name`` (a store's ``backend`` column, a setting) searching and writing
    ``dimension``-float embeddings. Building one is cheap: a backend opens its connections on first use.

    Raises:
        ValueError: an unknown name (settings refuse such names when they are read).
    """
    path = VECTOR_BACKEND_ADAPTERS.get(name)
    if path is None:
        raise ValueError(f"unknown vector backend {name!r}: choose one of {', '.join(names())}")
    adapter: VectorBackend = resolve(path)(settings, dimension)
    return adapter

