"""The vector leg: cosine nearest neighbours of a query vector within a scope of a corpus
(:mod:`chalicelib.search.corpus`: a tenant's vector stores, or a user's memories).

pgvector's HNSW applies WHERE clauses *after* the index scan, so a search scoped to one store (or filtered by
attributes) can silently return fewer than k rows. This leg never does:

1. Exact scan or HNSW, whichever costs less (:func:`prefer_exact`): an exact scan reads every row of the scope
   (its heap row, which holds the vector since migration 0019); the HNSW scan of a scope holding a share ``s`` of
   the indexed rows visits about ``ef + limit / s`` index tuples (each checked against the scope in the heap) until
   ``limit`` of them are in the scope. So a small scope inside a big index is scanned exactly, a big one (or a
   small index) through the graph. Scopes of more than ``exact_scan_max_rows`` rows always take the graph; 0
   forces it. A corpus without an HNSW index (memories, exchanges: one user's rows, read through the scope's
   btree) is always scanned exactly.
2. The HNSW scan uses the partial index with ``hnsw.ef_search`` raised in proportion to how small a share of the
   indexed rows the scope is (``ef ≈ 2 · limit · total / scope``, capped at 1,000 — pgvector's maximum), and, on
   pgvector ≥ 0.8, ``hnsw.iterative_scan = relaxed_order`` so the index keeps scanning until enough rows pass.
3. If that still yields fewer than ``min(limit, scope)`` rows, the same query is answered exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from chalicelib.search.corpus import Corpus, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.store.vector_stores import HNSW_MAX_HALFVEC_DIM, HNSW_MAX_VECTOR_DIM, vector_cast

# pgvector caps hnsw.ef_search at 1,000 (pgvector README, "Query Options").
MAX_EF_SEARCH = 1000
# pgvector ≥ 0.8: upper bound on tuples an iterative scan visits (its default is 20,000).
ITERATIVE_MAX_SCAN_TUPLES = 100_000
# What scanning one row exactly costs, in tuple visits of the HNSW scan. Since migration 0019 the vector is in the
# row: an exact row reads it there and computes the distance (0.57 µs per row over the 1,000 rows of
# benchmarks/search.py's 1 % store at 100k; 1.67 µs when the vector was TOASTed, the 10 visits this was before); a
# visit reads an index tuple, computes a distance and checks the heap row against the scope (~0.5 µs at 100k, ~3.8 µs
# at 1M, where the rows a filtered walk checks are rarely in shared buffers). So a scope is scanned exactly when it
# holds fewer rows than the walk would visit: at 1M chunks, a 10,000-row store (1 %) is scanned exactly.
EXACT_ROW_COST = 1.0

# The HNSW scan's settings for one search, local to its transaction (pgvector README, "Query Options"):
# ef_search, and on pgvector ≥ 0.8 iterative scans in relaxed order up to ITERATIVE_MAX_SCAN_TUPLES tuples.
_HNSW_EF_SETTING = "SELECT set_config('hnsw.ef_search', %(ef)s, true)"
_HNSW_SETTINGS = (_HNSW_EF_SETTING + ", set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                  "set_config('hnsw.max_scan_tuples', %(max_tuples)s, true)")
# A statement that must walk the graph: the planner, estimating a filter's share of the table, may otherwise read
# those rows and sort them (a user of 10,000 memories among 110,000: a parallel scan and an on-disk sort, 33 ms,
# against 2-8 ms through the index).
_INDEX_ONLY = ", set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)"


@dataclass(frozen=True, slots=True)
class VectorScope:
    """Where to search: the ``corpus`` and ``scope`` (its rows), the vector dimension ``dim`` and how many rows of
    that dimension the corpus holds in all (``indexed_rows``, for sizing ``ef_search``)."""

    corpus: Corpus
    scope: Scope
    dim: int
    indexed_rows: int

    @property
    def scope_rows(self) -> int:
        """Rows in the scope."""
        return self.scope.rows


def vector_search(conn: psycopg.Connection, scope: VectorScope, query_vector: Sequence[float], limit: int, *,
                  where: CompiledFilter | None, ef_search: int, exact_scan_max_rows: int,
                  iterative_scan: bool, halfvec: bool) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(chunk_id, cosine_distance)`` pairs, nearest first (distance in [0, 2]).

    Returns ``min(limit, matching chunks)`` rows: exact whenever the HNSW pass comes up short. ``halfvec``: the
    index is built over ``halfvec`` (``vector_stores.hnsw_index``); ``iterative_scan``: pgvector ≥ 0.8.
    """
    if scope.scope_rows == 0 or limit <= 0:
        return []
    indexable = scope.corpus.hnsw_prefix is not None and scope.dim <= (
        HNSW_MAX_HALFVEC_DIM if halfvec else HNSW_MAX_VECTOR_DIM)
    share = scope.scope_rows / max(scope.indexed_rows, scope.scope_rows)
    ef = min(MAX_EF_SEARCH, max(ef_search, limit, math.ceil(2 * limit / share)))
    if indexable and (scope.scope_rows > exact_scan_max_rows
                      or not prefer_exact(scope.scope_rows, scope.indexed_rows, limit, ef, iterative_scan)):
        rows = _hnsw(conn, scope, query_vector, limit, where, ef, iterative_scan, halfvec)
        if len(rows) >= min(limit, scope.scope_rows):
            return rows
    return _exact(conn, scope, query_vector, limit, where)


def prefer_exact(scope_rows: int, indexed_rows: int, limit: int, ef: int, iterative_scan: bool) -> bool:
    """Whether scanning the scope's ``scope_rows`` rows exactly costs less than the HNSW scan of an index over
    ``indexed_rows`` rows for ``limit`` rows at ``ef_search`` ``ef`` (module docstring; :data:`EXACT_ROW_COST`).

    The HNSW scan visits about ``ef + limit / share`` tuples (share = scope_rows / indexed_rows), at most the
    index; past :data:`ITERATIVE_MAX_SCAN_TUPLES` (or without iterative scans, past ``ef``) it comes up short and
    the exact scan runs anyway.
    """
    total = max(indexed_rows, scope_rows, 1)
    share = max(scope_rows, 1) / total
    visits = min(total, ef + limit / share)
    if limit / share > (ITERATIVE_MAX_SCAN_TUPLES if iterative_scan else ef):
        return True  # the graph would come up short: the exact scan would follow it
    return scope_rows * EXACT_ROW_COST <= visits


def _scope_sql(scope: VectorScope, where: CompiledFilter | None) -> tuple[sql.Composable, dict[str, Any]]:
    params: dict[str, Any] = {**scope.scope.params, "tenants": list(scope.scope.tenant_ids), "dim": scope.dim}
    clause = sql.SQL("tenant_id = ANY(%(tenants)s) AND ({}) AND embedding_dim = %(dim)s").format(scope.scope.predicate)
    if where is not None:
        clause = sql.SQL("{} AND {}").format(clause, where.expression)
        params.update(where.params)
    return clause, params


def _hnsw(conn: psycopg.Connection, scope: VectorScope, query_vector: Sequence[float], limit: int,
          where: CompiledFilter | None, ef: int, iterative_scan: bool, halfvec: bool) -> list[tuple[int, float]]:
    clause, params = _scope_sql(scope, where)
    cast = vector_cast(scope.dim, halfvec=halfvec)
    # The ORDER BY expression must match the partial index expression exactly for the planner to use it.
    # The distance returned is the exact one (full-precision vectors, as the exact scan's): a halfvec index orders by
    # 2-byte elements (cosine off by ~1e-4), and relevance (search/relevance.py) must not depend on the path taken.
    # It is computed only for the rows returned.
    distance = sql.SQL("(embedding::{cast} <=> %(q)s::{cast})").format(cast=cast)
    statement = sql.SQL("SELECT {id}, embedding <=> %(q)s::vector AS distance FROM {table} WHERE {where} "
                        "ORDER BY {d} LIMIT %(limit)s").format(
        id=scope.corpus.row_id(), d=distance, table=scope.corpus.identifier(), where=clause)
    params.update(q=_as_list(query_vector), limit=limit)
    rows = with_hnsw_settings(conn, statement, params, ef=ef, iterative_scan=iterative_scan)
    # relaxed_order may return rows slightly out of order (and the index orders by its own precision): re-sort by
    # the exact distance.
    return sorted(((int(i), float(d)) for i, d in rows), key=lambda r: r[1])


def with_hnsw_settings(conn: psycopg.Connection, statement: sql.Composed, params: dict[str, Any], *, ef: int,
                       iterative_scan: bool, index_only: bool = False) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` run with ``hnsw.ef_search`` = ``ef`` and, with ``iterative_scan`` (pgvector ≥
    0.8), iterative scans in relaxed order up to :data:`ITERATIVE_MAX_SCAN_TUPLES` tuples, the settings local to
    it. ``index_only``: the planner may not read the table and sort it (``enable_seqscan`` and ``enable_sort``
    off for the statement): the caller has decided the graph is the cheaper path."""
    # One round trip, two statements: the settings, then the query, pipelined with no Sync between them. The
    # extended query protocol runs a pipeline's statements up to its Sync as one implicit transaction (PostgreSQL
    # docs, "Pipelining"), so settings made local by set_config(…, true) hold for the query and are gone after it, as
    # SET LOCAL in BEGIN … COMMIT would be, without those two statements and the three SETs (0.73 against 1.1 ms p50
    # per top-10 at 100k chunks; inside a caller's transaction they last until its end, as SET LOCAL does).
    settings = _HNSW_SETTINGS if iterative_scan else _HNSW_EF_SETTING
    if index_only:
        settings += _INDEX_ONLY
    with conn.pipeline():
        conn.execute(settings, {"ef": str(ef), "max_tuples": str(ITERATIVE_MAX_SCAN_TUPLES)})
        cursor = conn.execute(statement, params)
    return cursor.fetchall()


def _exact(conn: psycopg.Connection, scope: VectorScope, query_vector: Sequence[float], limit: int,
           where: CompiledFilter | None) -> list[tuple[int, float]]:
    clause, params = _scope_sql(scope, where)
    # `embedding <=> q` (no cast) cannot use the expression index: the planner reads the scope through
    # chunks_scope and sorts, i.e. an exact k-NN.
    statement = sql.SQL(
        "SELECT {id}, embedding <=> %(q)s::vector AS distance FROM {table} WHERE {where} "
        "ORDER BY distance LIMIT %(limit)s").format(id=scope.corpus.row_id(), table=scope.corpus.identifier(),
                                                    where=clause)
    params.update(q=_as_list(query_vector), limit=limit)
    return [(int(i), float(d)) for i, d in conn.execute(statement, params).fetchall()]


def distances(conn: psycopg.Connection, scope: VectorScope, query_vector: Sequence[float],
              ids: Sequence[int]) -> dict[int, float]:
    """The cosine distance (in [0, 2]) between ``query_vector`` and each of the scope's rows ``ids``: ``{row id:
    distance}``, one statement over those rows only (rows outside the scope or of another dimension are left
    out)."""
    if not ids:
        return {}
    clause, params = _scope_sql(scope, None)
    statement = sql.SQL("SELECT {id}, embedding <=> %(q)s::vector FROM {table} WHERE {where} AND {id} = ANY(%(ids)s)"
                        ).format(id=scope.corpus.row_id(), table=scope.corpus.identifier(), where=clause)
    params.update(q=_as_list(query_vector), ids=list(ids))
    return {int(i): float(d) for i, d in conn.execute(statement, params).fetchall()}


def _as_list(vector: Sequence[float]) -> Any:
    """pgvector's ``Vector`` for a query vector (list, tuple, numpy array or ``Vector``): dumpable without numpy,
    which the Lambda packages leave out (50 MB)."""
    from pgvector import Vector

    if isinstance(vector, Vector):
        return vector
    return Vector(list(vector) if isinstance(vector, Sequence) else vector)
