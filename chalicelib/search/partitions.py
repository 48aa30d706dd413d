"""Long histories (issue 31): one user's memories — or exchanges — are a *partition* whose *body* a vector backend
has indexed and whose *tail*, the rows its writer has not reached yet, is read exactly in Postgres
(migrations/0030_memory_partitions.sql; the writer: :mod:`chalicelib.search.backends.partition_sync`).

A search of a scope inside one user's partition ranks through :func:`chalicelib.search.ranking.rank` like any
other, with :class:`PartitionLegs` proposing the candidates:

- **vector leg**: the body's nearest rows of the scope from the partition's backend (``partition_vector_leg``:
  pgvector walks an HNSW graph in which each partition keeps together, Qdrant its per-partition graph), with exact
  distances, merged with an exact scan of the tail;
- **keyword leg**: BM25 with the statistics of every row of the user — the body's kept by the writer, the tail's
  counted in the same statement —, the body's top-k from the backend (``partition_keyword_leg``: pgvector's
  MaxScore over impact-ordered postings, exact; Qdrant's sparse index, whose scores are read again) merged with the
  tail scored exhaustively;
- **distances and BM25 of candidates** the other leg found: exact, in Postgres, over those rows only.

So the work grows with the candidates, the tail and the backend's index, not with the history: a partition never
indexed is all tail (the exact path every scope took before). The scope's other conditions (status, types, dates,
the metadata filter, an agent or run) are checked in Postgres on every row a leg returns. A search reads its
partition once, at its start (:func:`lookup`): a writer committing meanwhile can make that one search count a row in
both parts or miss one it just indexed; it never ranks a stale one (a changed body row leaves the body in the
changing transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.search.corpus import Corpus, Partition, Scope
from chalicelib.search.filters import CompiledFilter
from chalicelib.search.keyword import KeywordLeg, QueryTerms, terms_of
from chalicelib.search.vector import VectorScope, distances, vector_search
from chalicelib.store.vector_stores import HnswIndex

__all__ = ["BM25", "TAG_DIMENSIONS", "TAIL_IDS", "PartitionLegs", "PartitionSearch", "by_ids", "floats", "lookup",
           "tail_predicate", "user_partition"]

# The dimensions of a partition's tag appended to a pgvector body's vectors (migration 0030, engram_partition_tag).
TAG_DIMENSIONS = 64
# A search reads the ids of a partition's tail when there are at most this many (else it reads the tail by a range
# of the user's index).
TAIL_IDS = 5000
# A body leg asking a backend that checks the scope after it proposes (Qdrant) asks for this many times the rows.
BODY_OVERFETCH = 2

# The exact BM25 of row {row} (an alias of the corpus table) for %(terms)s / %(idfs)s / %(avgdl)s: the arithmetic of
# engram_bm25_score (migration 0009), written out — a call of that SQL function costs more than the sum (~60 against
# ~5 µs a row on a loaded machine). Used in a LATERAL, so it is computed once per row.
BM25 = """(SELECT coalesce(sum(i.idf * u.tf * 1.9 / (u.tf + 0.9 * (0.6 + 0.4 * {row}.keyword_length / %(avgdl)s))), 0)
          AS score
   FROM (SELECT v.lexeme, coalesce(array_length(v.positions, 1), 1) AS tf
         FROM unnest(ts_filter(setweight({row}.keywords, 'A', %(terms)s), '{{a}}')) AS v) AS u
   JOIN unnest(%(terms)s::text[], %(idfs)s::float8[]) AS i(lexeme, idf) USING (lexeme))"""
# The tail's nearest rows to the query vector (the scope and filter in {check}).
_TAIL_VECTOR = """
SELECT {id}, embedding <=> %(q)s::vector AS distance FROM {table}
WHERE {check} AND {tail} AND embedding_dim = %(dim)s ORDER BY distance, {id} LIMIT %(limit)s"""
# The tail's best rows for the query, scored exactly (the scope and filter in {check}).
_TAIL_KEYWORD = """
SELECT m.{id}, b.score FROM {table} m CROSS JOIN LATERAL {bm25} AS b
WHERE {check} AND {tail} AND b.score > 0 ORDER BY b.score DESC, m.{id} LIMIT %(limit)s"""

# (The tail's ids are read in the user's index order: it holds them after the body's; a cap bounds the read.)
_LOOKUP = """
SELECT p.partition_key, p.backend, p.indexed_through, p.body_rows, p.body_length, p.avgdl_ref, p.speakers,
       p.dimensions,
       CASE WHEN p.indexed_through > 0 THEN (
           SELECT coalesce(array_agg(t.{id}), '{{}}') FROM (
               SELECT {id} FROM {table} WHERE tenant_id = %(tenant)s AND {user} = %(user)s
                 AND ({user}, {id}) > (%(user)s, p.indexed_through)
               ORDER BY tenant_id, {user}, {id} LIMIT %(cap)s) AS t) END,
       coalesce((SELECT array_agg(x.seq ORDER BY x.seq) FROM memory_index_pending x
                 WHERE x.partition_key = p.partition_key), '{{}}'),
       (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       (SELECT o.opcname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
        JOIN pg_opclass o ON o.oid = i.indclass[0] WHERE c.relname = %(index)s)
FROM (SELECT 1) AS one
LEFT JOIN memory_partitions p ON p.tenant_id = %(tenant)s AND p.corpus = %(corpus)s AND p.user_id = %(user)s"""
# The tail: rows after the body, and body rows changed since they were indexed. Written as a range of the user's
# index (tenant, user, seq): `seq > bound` alone let the planner walk memories_seq_key through every row written
# after the bound, everyone's (~180 ms at 111,000 rows, against 0.3), and an OR with the pending rows would read
# every row of the user, so that form is used only while some are pending. Statements over the tail are never
# prepared (``prepare=False``): a generic plan is blind to the bound.
_TAIL = "({user}, {seq}) > (%(tail_user)s, %(tail_through)s)"
_TAIL_IDS = "{seq} = ANY(%(tail_ids)s)"
_TAIL_PENDING = "(({user}, {seq}) > (%(tail_user)s, %(tail_through)s) OR {seq} = ANY(%(tail_pending)s))"
_WHOLE = "TRUE"
# BM25 statistics of the query's lexemes over every row of the user: the body's (kept) plus the tail's (counted).
_TERMS = """
WITH q AS (SELECT DISTINCT t.lexeme FROM unnest(to_tsvector('english', %(query)s)) AS t),
     tail AS (SELECT keywords, keyword_length FROM {table}
              WHERE tenant_id = %(tenant)s AND {user} = %(user)s AND {tail}),
     tail_totals AS (SELECT count(*) AS n, coalesce(sum(keyword_length), 0) AS len FROM tail),
     tail_df AS (SELECT t.lexeme, count(*) AS df
                 FROM tail, unnest(ts_filter(setweight(tail.keywords, 'A', (SELECT array_agg(lexeme) FROM q)),
                                             '{{a}}')) AS t GROUP BY 1),
     body AS (SELECT p.body_rows AS n, p.body_length AS len FROM memory_partitions p
              WHERE p.partition_key = %(part)s AND p.tenant_id = %(tenant)s),
     body_df AS (SELECT k.lexeme, k.df FROM memory_keyword_stats k
                 WHERE k.partition_key = %(part)s AND k.lexeme IN (SELECT lexeme FROM q))
SELECT q.lexeme, coalesce(b.df, 0) + coalesce(t.df, 0),
       coalesce((SELECT n FROM body), 0) + tt.n, coalesce((SELECT len FROM body), 0) + tt.len
FROM q LEFT JOIN body_df b USING (lexeme) LEFT JOIN tail_df t USING (lexeme) CROSS JOIN tail_totals tt
ORDER BY q.lexeme"""


@dataclass(frozen=True, slots=True)
class PartitionSearch:
    """What a backend's body legs search: the ``corpus``, the ``scope`` (its ``user`` partition with a body; its
    predicate and params the rows a result may be), the metadata filter ``where`` and the ``ids`` the scope names
    (``{"user_id": …, "agent_id": …}``: a backend may narrow its proposals by them)."""

    corpus: Corpus
    scope: Scope
    where: CompiledFilter | None
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def partition(self) -> Partition:
        """The partition searched."""
        assert self.scope.user is not None
        return self.scope.user

    def check(self) -> tuple[sql.Composable, dict[str, Any]]:
        """The SQL boolean (alias-free, over the corpus table) a row must pass to be a result — the tenant, the
        scope and the filter — with its params."""
        params: dict[str, Any] = {**self.scope.params, "tenants": list(self.scope.tenant_ids)}
        clause = sql.SQL("tenant_id = ANY(%(tenants)s) AND ({})").format(self.scope.predicate)
        if self.where is not None:
            clause = sql.SQL("{} AND {}").format(clause, self.where.expression)
            params.update(self.where.params)
        return clause, params


def by_ids(corpus: Corpus) -> sql.Composed:
    """The corpus's rows ``%(seqs)s`` (its ids) as a subquery, fenced (``OFFSET 0``) so that the unique index of
    the ids reads them whatever the statement adds outside (the tenant): a tenant whose rows were just written has
    no statistics yet, and the planner, expecting it to hold one row, read every row of it through a tenant index
    instead (120 against 0.3 ms for 50 rows of a tenant loading 1,000,000)."""
    return sql.SQL("(SELECT * FROM {table} WHERE {id} = ANY(%(seqs)s) OFFSET 0)").format(
        table=corpus.identifier(), id=corpus.row_id())


def user_partition(corpus: Corpus, tenant_id: str, scope_ids: dict[str, str]) -> str | None:
    """The user whose partition a scope naming ``scope_ids`` (``{"user_id": …, "agent_id": …}``) lies in, or None
    (a scope naming no user spans partitions: it is read exhaustively)."""
    if corpus.partitioned_by is None:
        return None
    return scope_ids.get(corpus.partitioned_by)


def lookup(conn: psycopg.Connection, corpus: Corpus, tenant_id: str, user_id: str, dimension: int) -> Partition:
    """The user's partition of ``corpus`` (one statement; a partition never indexed comes back without a key: all
    tail), with what its pgvector body needs to be searched with vectors of ``dimension`` floats."""
    from chalicelib.search.backends.pgvector_partitions import index_name

    statement = sql.SQL(_LOOKUP).format(id=corpus.row_id(), table=corpus.identifier(),
                                        user=sql.Identifier(corpus.partitioned_by or ""))
    row = conn.execute(statement, {"tenant": tenant_id, "corpus": corpus.name, "user": user_id,
                                   "index": index_name(dimension), "cap": TAIL_IDS + 1}, prepare=False).fetchone()
    assert row is not None
    key, backend, through, body_rows, body_length, avgdl_ref, speakers, dimensions, tail, pending, version, \
        opclass = row
    parsed = tuple(int(part) for part in version.split(".")) if version else (0,)
    kind = None if opclass is None else ("halfvec" if opclass.startswith("halfvec") else "vector")
    if key is None:
        return Partition(corpus.name, tenant_id, user_id, index_kind=kind, iterative_scan=parsed >= (0, 8, 0))
    return Partition(corpus.name, tenant_id, user_id, key=int(key), backend=backend, indexed_through=int(through),
                     pending=tuple(int(s) for s in pending), body_rows=int(body_rows), body_length=int(body_length),
                     tail=tuple(int(s) for s in tail) if tail is not None and len(tail) <= TAIL_IDS else None,
                     avgdl_ref=float(avgdl_ref) if avgdl_ref is not None else None,
                     speakers=tuple(speakers or ()), dimensions=tuple(dimensions or ()), index_kind=kind,
                     iterative_scan=parsed >= (0, 8, 0))


def tail_predicate(corpus: Corpus, partition: Partition) -> tuple[sql.Composable, dict[str, Any]]:
    """The SQL boolean (alias-free) of the partition's tail rows, with its params (run statements using it with
    ``prepare=False``)."""
    if partition.indexed_through <= 0 and not partition.pending:
        template = _WHOLE
    elif partition.tail is not None:  # (the usual case: the ids, each a lookup of the row)
        template = _TAIL_IDS
    else:
        template = _TAIL_PENDING if partition.pending else _TAIL
    return (sql.SQL(template).format(seq=corpus.row_id(), user=sql.Identifier(corpus.partitioned_by or "")),
            {"tail_through": partition.indexed_through, "tail_pending": list(partition.pending),
             "tail_user": partition.user_id,
             "tail_ids": sorted({*(partition.tail or ()), *partition.pending})})


def _tail_scope(corpus: Corpus, scope: Scope) -> Scope:
    """``scope`` restricted to its partition's tail."""
    assert scope.user is not None
    clause, params = tail_predicate(corpus, scope.user)
    return replace(scope, predicate=sql.SQL("({}) AND {}").format(scope.predicate, clause),
                   params={**scope.params, **params})


class PartitionLegs:
    """:func:`chalicelib.search.ranking.rank`'s candidate legs for a scope inside one user's partition
    (``scope.user``): the body's candidates from the partition's backend (its adapter for ``settings``; ``ids``, the
    ids the scope names), the tail's read exactly, merged (module docstring)."""

    name = "partition"
    in_postgres = True  # (rank's HNSW lookup is for chunks; the body's backend is the partition's)

    def __init__(self, settings: Settings, ids: dict[str, str] | None = None) -> None:
        self._settings = settings
        self._ids = dict(ids or {})

    def vector_leg(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float], limit: int, *,
                   where: CompiledFilter | None, settings: Settings, index: HnswIndex) -> list[tuple[int, float]]:
        """Up to ``limit`` ``(row id, exact cosine distance)`` of the scope nearest ``vector``, nearest first:
        the body's from its backend and the tail's exact scan, merged; the whole partition read exactly when the
        body's backend came up short of rows it holds."""
        partition = scope.scope.user
        assert partition is not None
        search = PartitionSearch(scope.corpus, scope.scope, where, self._ids)
        tail = _tail_vector(conn, search, vector, limit)
        if not partition.has_body or limit <= 0:
            return tail
        backend = _backend(partition, settings, scope.dim)
        body = backend.partition_vector_leg(conn, search, vector, limit, settings=settings)
        if len(body) < min(limit, partition.body_rows):
            # Fewer than asked while the body holds more: the scope's conditions passed few of the rows the backend
            # proposed. The exact answer, over the whole partition.
            return vector_search(conn, scope, vector, limit, where=where, ef_search=settings.hnsw_ef_search,
                                 exact_scan_max_rows=0, iterative_scan=False, halfvec=False)
        return _merged(body, tail, limit, reverse=False)

    def distances(self, conn: psycopg.Connection, scope: VectorScope, vector: Sequence[float],
                  ids: Sequence[int]) -> dict[int, float]:
        """Exact cosine distances of the scope's rows ``ids`` (Postgres, those rows only)."""
        return distances(conn, scope, vector, ids)

    def keyword_leg(self, conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                    where: CompiledFilter | None, exact_head: int | None = None) -> KeywordLeg:
        """BM25 over every row of the user (:data:`_TERMS`): the body's top ``limit`` from its backend (its first
        ``exact_head`` exact, or all) and the tail's, scored exhaustively, merged. ``exact`` on the leg when the
        backend's scores are exact BM25; ``terms`` carry the statistics, so other rows are scored alike."""
        partition = scope.user
        assert partition is not None
        if limit <= 0 or not query.strip():
            return KeywordLeg([], True, 0.0)
        terms = _terms(conn, corpus, partition, query)
        if terms is None:
            return KeywordLeg([], True, 0.0)
        if not terms.lexemes:
            return KeywordLeg([], True, terms.max_score, terms)
        tail = _tail_keyword(conn, PartitionSearch(corpus, scope, where, self._ids), terms, limit)
        if not partition.has_body:
            return KeywordLeg(tail, len(tail) < limit, terms.max_score, terms)
        backend = _backend(partition, self._settings, 0)
        search = PartitionSearch(corpus, scope, where, self._ids)
        body, exact = backend.partition_keyword_leg(conn, search, terms, limit, exact_head=exact_head)
        rows = _merged(body, tail, limit, reverse=True)
        # (Never complete: a body's leg proposes the best of what it read, so a row it did not return may match.)
        return KeywordLeg(rows, False, terms.max_score, terms, exact=exact)



def _terms(conn: psycopg.Connection, corpus: Corpus, partition: Partition, query: str) -> QueryTerms | None:
    """The query's BM25 view over every row of the user (one statement)."""
    clause, params = tail_predicate(corpus, partition)
    statement = sql.SQL(_TERMS).format(table=corpus.identifier(), user=sql.Identifier(corpus.partitioned_by or ""),
                                       tail=clause)
    rows = conn.execute(statement, {**params, "query": query.replace("\x00", " "), "tenant": partition.tenant_id,
                                    "user": partition.user_id, "part": partition.key}, prepare=False).fetchall()
    return terms_of(rows)


def floats(vector: Sequence[float]) -> list[float]:
    """A query vector (list, tuple, numpy array or pgvector ``Vector``) as a list of floats."""
    values = vector.to_list() if hasattr(vector, "to_list") else vector
    return [float(x) for x in values]


def _tail_vector(conn: psycopg.Connection, search: PartitionSearch, vector: Sequence[float],
                 limit: int) -> list[tuple[int, float]]:
    """The tail's ``limit`` nearest ``(row id, exact cosine distance)`` passing the scope and filter."""
    from pgvector import Vector

    if limit <= 0:
        return []
    check, params = search.check()
    clause, tail_params = tail_predicate(search.corpus, search.partition)
    statement = sql.SQL(_TAIL_VECTOR).format(id=search.corpus.row_id(), table=search.corpus.identifier(),
                                             check=check, tail=clause)
    values = floats(vector)
    params.update(tail_params, q=Vector(values), dim=len(values), limit=limit)
    return [(int(i), float(d)) for i, d in conn.execute(statement, params, prepare=False).fetchall()]


def _tail_keyword(conn: psycopg.Connection, search: PartitionSearch, terms: QueryTerms,
                  limit: int) -> list[tuple[int, float]]:
    """The tail's best ``limit`` ``(row id, exact BM25)`` passing the scope and filter, best first, ties by id."""
    check, params = search.check()
    clause, tail_params = tail_predicate(search.corpus, search.partition)
    statement = sql.SQL(_TAIL_KEYWORD).format(id=search.corpus.row_id(), table=search.corpus.identifier(),
                                              bm25=sql.SQL(BM25).format(row=sql.Identifier("m")), check=check,
                                              tail=clause)
    params.update(tail_params, terms=terms.lexemes, idfs=terms.idfs, avgdl=terms.avgdl, limit=limit)
    return [(int(i), float(s)) for i, s in conn.execute(statement, params, prepare=False).fetchall()]


def _merged(body: list[tuple[int, float]], tail: list[tuple[int, float]], limit: int, *,
            reverse: bool) -> list[tuple[int, float]]:
    """The best ``limit`` of two ``(row id, value)`` lists, best first (largest values when ``reverse``, else
    smallest), ties by id; a row in both keeps the tail's value (read from its row now)."""
    values = dict(body)
    values.update(tail)
    key = (lambda kv: (-kv[1], kv[0])) if reverse else (lambda kv: (kv[1], kv[0]))
    return sorted(values.items(), key=key)[:limit]


def _backend(partition: Partition, settings: Settings, dimension: int) -> Any:
    from chalicelib.search.backends import for_backend

    return for_backend(partition.backend, settings, dimension)

