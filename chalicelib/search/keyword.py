"""The keyword leg: Okapi BM25 over Postgres full-text lexemes, exact, over any corpus
(:mod:`chalicelib.search.corpus`).

    score(d, q) = Σ_{t ∈ q} idf(t) · tf(t, d) · (k1 + 1) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

(Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond"; the idf variant is Lucene's;
k1 = 0.9, b = 0.4 are Anserini's BEIR defaults, Kamphuis et al. 2020, "Which BM25 Do You Mean?"). Text is
normalised by Postgres' ``english`` configuration (Snowball stemming, stop words). Postgres' own ``ts_rank`` has no
idf and no length normalisation against the corpus, so it ranks far below BM25.

Two ways to the same top-k:

- **exhaustive** — every scope row matching a query lexeme is scored from its own tsvector
  (``engram_bm25_score``, which looks only at the query's lexemes): for scopes up to
  :data:`EXHAUSTIVE_MAX_ROWS` rows or a small share of their stores (:data:`EXHAUSTIVE_MAX_SHARE`: a filter
  narrowed them to a few files), and for corpora whose statistics come from the scope itself;
- **top-k** — larger scopes of a corpus with maintained statistics bound every chunk's score from impact-ordered
  postings and score exactly only the chunks the bounds cannot settle (the corpus's ``topk_function``; MaxScore
  over whole posting lists, migrations/0011_search_at_scale.sql; the postings: 0009_keyword_postings.sql).
  The first ``exact`` rows equal the exhaustive scorer's (ties broken by id alike): ``benchmarks/search.py`` and
  the tests check it; rows past ``exact`` are the best of the chunks the function scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import ClientCursor, sql

from chalicelib.search.corpus import Corpus, Scope
from chalicelib.search.filters import CompiledFilter

__all__ = ["BM25_B", "BM25_K1", "EXHAUSTIVE_MAX_ROWS", "KeywordLeg", "QueryTerms", "exhaustive", "keyword_leg",
           "keyword_scores", "keyword_search", "query_terms", "terms_of"]

# BM25 parameters (Anserini's BEIR defaults); engram_bm25_impact and engram_bm25_score in migrations/0009 use the
# same constants.
BM25_K1 = 0.9
BM25_B = 0.4
TEXT_SEARCH_CONFIG = "english"
# Scopes of at most this many rows are scored exhaustively: reading them costs less than the top-k function's fixed
# steps. benchmarks/search.py, store of 1 % (in-process, 2 cores): 100 rows — exhaustive 4–6 ms vs top-k 6–8 ms;
# 1,000 rows — exhaustive 26–49 ms vs top-k 15–25 ms (2- and 12-word queries, p50).
EXHAUSTIVE_MAX_ROWS = 500
# A scope narrowed to some files of its stores (search.service.search_scope) is scored exhaustively while it holds
# at most this share of the stores' rows: the top-k reads the whole stores' posting lists and filters afterwards.
# benchmarks/search.py, 1,000 rows of a 100,000-row store ("attr 1%"), keyword leg p50: top-k with the filter
# 72 ms (2 words) / 189 ms (12 words); exhaustive over the 1,000 rows 26–49 ms (the "store 1%" figures above).
EXHAUSTIVE_MAX_SHARE = 0.05

# The query's distinct lexemes with their document frequency in the scope's partitions, and the partitions' totals.
_MAINTAINED_TERMS = """
WITH q AS (SELECT DISTINCT t.lexeme FROM unnest(to_tsvector('english', %(query)s)) AS t),
     df AS (SELECT s.lexeme, sum(s.df) AS df FROM keyword_stats s
            WHERE s.vector_store_id = ANY(%(partitions)s) AND s.lexeme IN (SELECT lexeme FROM q) GROUP BY 1),
     totals AS (SELECT coalesce(sum(chunk_count), 0) AS n, coalesce(sum(keyword_length), 0) AS len
                FROM vector_stores WHERE tenant_id = ANY(%(tenants)s) AND id = ANY(%(partitions)s))
SELECT q.lexeme, coalesce(df.df, 0), totals.n, totals.len
FROM q LEFT JOIN df USING (lexeme) CROSS JOIN totals ORDER BY q.lexeme"""
_EXHAUSTIVE = """
SELECT row_id, score FROM (
    SELECT {id} AS row_id, engram_bm25_score(keywords, keyword_length, %(terms)s, %(idfs)s, %(avgdl)s) AS score
    FROM {table} WHERE tenant_id = ANY(%(tenants)s) AND ({scope}) AND {filter}) AS scored
WHERE score > 0 ORDER BY score DESC, row_id LIMIT %(limit)s"""
_TOPK = """SELECT chunk_id, score
FROM {function}(%(partitions)s, %(terms)s, %(idfs)s, %(avgdl)s, %(limit)s, %(exact)s, %(filter)s)"""
# Scope statistics: the rows of the scope's collection (Scope.collection, else the scope's own rows) make N, avgdl
# and df; the scope's rows passing the filter are scored, in the same statement. The query's lexemes are computed in
# the statement too (one round trip; none → no rows).
_SCOPE_SCORED = """
WITH q AS (SELECT array_agg(DISTINCT t.lexeme) AS terms FROM unnest(to_tsvector('english', %(query)s)) AS t),
     d AS (SELECT {id} AS id, keywords, keyword_length, ({scope}) AND {filter} AS inside FROM {table}
           WHERE tenant_id = ANY(%(tenants)s) AND ({collection})),
     totals AS (SELECT count(*) AS n, greatest(avg(keyword_length), 1) AS avgdl FROM d),
     hits AS (SELECT d.id, d.inside, d.keyword_length AS len, t.lexeme,
                     coalesce(array_length(t.positions, 1), 1) AS tf
              FROM d, unnest(ts_filter(setweight(d.keywords, 'A', (SELECT terms FROM q)), '{{a}}')) AS t),
     idf AS (SELECT h.lexeme, ln(1 + (totals.n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
             FROM hits h, totals GROUP BY h.lexeme, totals.n)
SELECT h.id,
       sum(idf.idf * h.tf * (%(k1)s + 1) / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * h.len / totals.avgdl))) AS score,
       min(totals.n) AS n, (SELECT coalesce(sum(i.idf), 0) FROM idf i) AS idf_sum, (SELECT count(*) FROM idf) AS found,
       (SELECT coalesce(array_length(terms, 1), 0) FROM q) AS lexemes
FROM hits h JOIN idf USING (lexeme) CROSS JOIN totals
WHERE h.inside AND {only}
GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(limit)s"""
# BM25 of given rows with the query's terms and the partitions' statistics (maintained statistics).
_ROWS_SCORED = """
SELECT {id}, engram_bm25_score(keywords, keyword_length, %(terms)s, %(idfs)s, %(avgdl)s)
FROM {table} WHERE tenant_id = ANY(%(tenants)s) AND ({scope}) AND {id} = ANY(%(ids)s)"""


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """A query as BM25 sees it: its distinct ``lexemes`` found in the collection with their ``idfs``, the
    collection's average length ``avgdl`` (lexemes) and ``max_score``, the highest BM25 score any document could
    reach for the query: Σ idf · (k1 + 1) over every query lexeme, absent ones included (each with the idf of a
    lexeme no document holds). Scores divided by it are comparable across queries: a query of words the collection
    does not know has a large ``max_score`` and low normalised scores."""

    lexemes: list[str]
    idfs: list[float]
    avgdl: float
    max_score: float


def idf(n: float, df: float) -> float:
    """Lucene's BM25 idf: ``ln(1 + (N − df + 0.5) / (df + 0.5))`` (never negative)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def query_terms(conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str) -> QueryTerms | None:
    """The BM25 view of ``query`` over ``scope``'s partitions (maintained statistics), or None when the query has
    no indexable word (only stop words or punctuation) or the scope no row."""
    rows = conn.execute(_MAINTAINED_TERMS, {"query": _clean(query), "tenants": list(scope.tenant_ids),
                                            "partitions": list(scope.partitions)}).fetchall()
    return terms_of(rows)


def terms_of(rows: list[tuple[Any, ...]]) -> QueryTerms | None:
    """:class:`QueryTerms` from one row per distinct query lexeme: ``(lexeme, df, N, total length)`` (N and the
    total length the collection's, alike on every row); None for no row or an empty collection."""
    if not rows or not rows[0][2]:
        return None
    n, total = float(rows[0][2]), float(rows[0][3])
    known = [(lexeme, idf(n, df)) for lexeme, df, _, _ in rows if df > 0]
    max_score = sum(idf(n, df) for _, df, _, _ in rows) * (BM25_K1 + 1)
    return QueryTerms([lexeme for lexeme, _ in known], [value for _, value in known], max(total / n, 1.0), max_score)


@dataclass(frozen=True, slots=True)
class KeywordLeg:
    """One query's keyword leg: ``rows`` — up to ``limit`` ``(row id, bm25)`` pairs, best first; ``complete`` —
    True when they are every scope row with a positive score (fewer than ``limit`` matched), so a row not among
    them scores 0; ``max_score`` — the highest BM25 any row could reach for the query (see :class:`QueryTerms`; 0
    when the query has no indexable word or nothing matched); ``terms`` — the query's terms (maintained statistics
    only), reused to score further rows (:func:`keyword_scores`); ``exact`` — whether the scores in ``rows`` are
    the exact BM25 (False for a backend whose index weighs documents by an older average length, e.g. Qdrant's
    sparse vectors: the ranking reads the candidates' exact scores again)."""

    rows: list[tuple[int, float]]
    complete: bool
    max_score: float
    terms: QueryTerms | None = None
    exact: bool = True


def keyword_leg(conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                where: CompiledFilter | None, exact: int | None = None) -> KeywordLeg:
    """:func:`keyword_search` with what it takes to normalise and extend its scores (:class:`KeywordLeg`);
    ``exact`` as there (default: all ``limit`` rows)."""
    if limit <= 0 or not query.strip() or scope.rows <= 0:
        return KeywordLeg([], True, 0.0)
    if corpus.statistics == "scope":
        rows, max_score = _scope_scored(conn, corpus, scope, query, limit, where)
        return KeywordLeg(rows, len(rows) < limit, max_score)
    terms = query_terms(conn, corpus, scope, query)
    rows = keyword_search(conn, corpus, scope, query, limit, where=where, terms=terms, exact=exact) if terms else []
    return KeywordLeg(rows, len(rows) < limit, terms.max_score if terms else 0.0, terms)


def keyword_scores(conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, leg: KeywordLeg,
                   ids: list[int], *, where: CompiledFilter | None) -> dict[int, float]:
    """BM25 of the rows ``ids`` of ``scope`` for ``query``, with the collection statistics ``leg`` used, so the
    scores are those the leg would have given them: ``{row id: bm25}`` (rows scoring 0 may be left out). One
    statement over those rows: ``engram_bm25_score`` with the leg's ``terms`` (maintained statistics, a user
    partition's), else the scope's statistics restricted to them."""
    if not ids:
        return {}
    if corpus.statistics == "scope" and leg.terms is None:
        rows, _ = _scope_scored(conn, corpus, scope, query, len(ids), where, only=ids)
        return dict(rows)
    if leg.terms is None or not leg.terms.lexemes:
        return {}
    params: dict[str, Any] = {**scope.params, "tenants": list(scope.tenant_ids), "terms": leg.terms.lexemes,
                              "idfs": leg.terms.idfs, "avgdl": leg.terms.avgdl, "ids": list(ids)}
    statement = sql.SQL(_ROWS_SCORED).format(id=corpus.row_id(), table=corpus.identifier(), scope=scope.predicate)
    return {int(i): float(s) for i, s in conn.execute(statement, params).fetchall()}


def keyword_search(conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int, *,
                   where: CompiledFilter | None, terms: QueryTerms | None = None,
                   exact: int | None = None) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(row id, bm25 score)`` pairs of ``scope``, best first — ``min(limit, matching rows)`` of
    them; ``[]`` when the query has no indexable word or nothing matches. Scores are unbounded positive reals (see
    :class:`QueryTerms` for their normalisation). ``terms`` may be passed when the caller already computed them
    (maintained statistics). ``exact`` (default: all ``limit``): how many of the first rows must be the exact BM25
    ranking; on the top-k path the rows past it are the best of the chunks scored (cheaper for a fusion input
    that needs exact heads and good tails)."""
    if limit <= 0 or not query.strip() or scope.rows <= 0:
        return []
    if corpus.statistics == "scope":
        return _scope_scored(conn, corpus, scope, query, limit, where)[0]
    terms = terms or query_terms(conn, corpus, scope, query)
    if terms is None or not terms.lexemes:
        return []
    if corpus.topk_function is not None and not _exhaustive_cheaper(scope):
        return _topk(conn, corpus, scope, terms, limit, where, exact)
    return exhaustive(conn, corpus, scope, terms, limit, where)


def _exhaustive_cheaper(scope: Scope) -> bool:
    """Whether scoring the scope's rows exhaustively costs less than the top-k over its partitions' postings: a
    small scope (:data:`EXHAUSTIVE_MAX_ROWS`), or a small part of big partitions (:data:`EXHAUSTIVE_MAX_SHARE`)."""
    partition_rows = scope.partition_rows or scope.rows
    return scope.rows <= EXHAUSTIVE_MAX_ROWS or scope.rows <= EXHAUSTIVE_MAX_SHARE * partition_rows


def exhaustive(conn: psycopg.Connection, corpus: Corpus, scope: Scope, terms: QueryTerms, limit: int,
               where: CompiledFilter | None) -> list[tuple[int, float]]:
    """The best ``limit`` ``(row id, bm25)`` of ``scope``'s rows passing ``where``, each scored from its own
    tsvector with ``terms`` (collection statistics computed by the caller), best first, ties by id; rows scoring 0
    left out. One statement reading every row of the scope."""
    params: dict[str, Any] = {**scope.params, "tenants": list(scope.tenant_ids), "terms": terms.lexemes,
                              "idfs": terms.idfs, "avgdl": terms.avgdl, "limit": limit}
    filter_expression: sql.Composable = sql.SQL("true")
    if where is not None:
        filter_expression = where.expression
        params.update(where.params)
    statement = sql.SQL(_EXHAUSTIVE).format(id=corpus.row_id(), table=corpus.identifier(), scope=scope.predicate,
                                            filter=filter_expression)
    return [(int(i), float(s)) for i, s in conn.execute(statement, params).fetchall()]


def _topk(conn: psycopg.Connection, corpus: Corpus, scope: Scope, terms: QueryTerms, limit: int,
          where: CompiledFilter | None, exact: int | None) -> list[tuple[int, float]]:
    assert corpus.topk_function is not None
    filter_sql = None
    if where is not None:  # inlined as literals: the function runs it with EXECUTE
        filter_sql = ClientCursor(conn).mogrify(where.expression.as_string(conn), where.params)
    # (a schema-qualified name, e.g. a benchmark's pg_temp copy, is split into its parts)
    statement = sql.SQL(_TOPK).format(function=sql.Identifier(*corpus.topk_function.split(".")))
    rows = conn.execute(statement, {"partitions": list(scope.partitions), "terms": terms.lexemes, "idfs": terms.idfs,
                                    "avgdl": terms.avgdl, "limit": limit, "exact": exact,
                                    "filter": filter_sql}).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def _scope_scored(conn: psycopg.Connection, corpus: Corpus, scope: Scope, query: str, limit: int,
                  where: CompiledFilter | None, only: list[int] | None = None) -> tuple[list[tuple[int, float]], float]:
    """The scope's best ``limit`` rows (only the rows ``only`` when given) and the query's ``max_score`` over the
    scope's statistics (0 when no row matched). One statement (the query's lexemes are computed in it)."""
    params: dict[str, Any] = {**scope.params, "tenants": list(scope.tenant_ids), "query": _clean(query),
                              "limit": limit,
                              "k1": BM25_K1, "b": BM25_B}
    filter_expression: sql.Composable = sql.SQL("true")
    if where is not None:
        filter_expression = where.expression
        params.update(where.params)
    restriction: sql.Composable = sql.SQL("true")
    if only is not None:
        restriction = sql.SQL("h.id = ANY(%(only)s)")
        params["only"] = list(only)
    statement = sql.SQL(_SCOPE_SCORED).format(id=corpus.row_id(), table=corpus.identifier(), scope=scope.predicate,
                                              filter=filter_expression, only=restriction,
                                              collection=scope.collection or scope.predicate)
    rows = conn.execute(statement, params).fetchall()
    if not rows:
        return [], 0.0
    n, idf_sum, found, lexemes = float(rows[0][2]), float(rows[0][3]), int(rows[0][4]), int(rows[0][5])
    # Lexemes no scope row holds count with the idf of df = 0, as in QueryTerms.max_score.
    max_score = (idf_sum + (lexemes - found) * idf(n, 0)) * (BM25_K1 + 1)
    return [(int(r[0]), float(r[1])) for r in rows], max_score


def _clean(query: str) -> str:
    return query.replace("\x00", " ")
