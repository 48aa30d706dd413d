"""The keyword leg: Okapi BM25 over Postgres full-text lexemes, with exact corpus statistics.

Postgres' ``ts_rank``/``ts_rank_cd`` have no inverse document frequency and no length normalisation against the
corpus, so they rank far below BM25. Engram keeps BM25's statistics in the database instead — per store: N
(``vector_stores.chunk_count``), total document length (``vector_stores.keyword_length``) and document frequency
per lexeme (``keyword_stats``), maintained in the same transaction that writes or deletes chunks — and scores
candidates (chunks matching any query lexeme, found through the GIN index) with

    score(d, q) = Σ_{t ∈ q} idf(t) · tf(t, d) · (k1 + 1) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

(Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond"; the idf variant is
Lucene's). Text is normalised by Postgres' ``english`` configuration (Snowball stemming, stop words).
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from chalicelib.search.filters import CompiledFilter

# BM25 parameters: Anserini's defaults for BEIR (k1 = 0.9, b = 0.4; Kamphuis et al. 2020, "Which BM25 Do You
# Mean?", and the Anserini BEIR regressions).
BM25_K1 = 0.9
BM25_B = 0.4
TEXT_SEARCH_CONFIG = "english"

_BM25 = """
WITH q AS (
    SELECT DISTINCT t.lexeme FROM unnest(to_tsvector('english', %(query)s)) AS t
), corpus AS (
    SELECT greatest(sum(chunk_count), 1)::float8 AS n,
           greatest(sum(keyword_length)::float8 / greatest(sum(chunk_count), 1), 1) AS avgdl
    FROM vector_stores WHERE tenant_id = %(tenant)s AND id = ANY(%(stores)s)
), idf AS (
    SELECT s.lexeme, ln(1 + (corpus.n - sum(s.df) + 0.5) / (sum(s.df) + 0.5)) AS idf
    FROM keyword_stats s, corpus
    WHERE s.vector_store_id = ANY(%(stores)s) AND s.lexeme IN (SELECT lexeme FROM q)
    GROUP BY s.lexeme, corpus.n
), candidates AS (
    SELECT id, keywords, keyword_length FROM chunks
    WHERE {where}
      AND keywords @@ replace(replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | '),
                              ' <-> ', ' | ')::tsquery
)
SELECT c.id,
       sum(idf.idf * tf.n * (%(k1)s + 1)
           / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * c.keyword_length / corpus.avgdl))) AS score
FROM candidates c
CROSS JOIN LATERAL (
    SELECT t.lexeme, coalesce(array_length(t.positions, 1), 1) AS n FROM unnest(c.keywords) AS t
) AS tf
JOIN idf ON idf.lexeme = tf.lexeme
CROSS JOIN corpus
GROUP BY c.id
ORDER BY score DESC, c.id
LIMIT %(limit)s"""


def keyword_search(conn: psycopg.Connection, tenant_id: str, store_ids: Sequence[str], query: str, limit: int, *,
                   where: CompiledFilter | None) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(chunk_id, bm25_score)`` pairs, best first; ``[]`` when the query has no indexable word
    (only stop words or punctuation). Scores are unbounded positive reals."""
    if limit <= 0 or not query.strip():
        return []
    clause: sql.Composable = sql.SQL("tenant_id = %(tenant)s AND vector_store_id = ANY(%(stores)s)")
    params = {"tenant": tenant_id, "stores": list(store_ids), "query": query.replace("\x00", " "),
              "limit": limit, "k1": BM25_K1, "b": BM25_B}
    if where is not None:
        clause = sql.SQL("{} AND {}").format(clause, where.expression)
        params.update(where.params)
    statement = sql.SQL(_BM25).format(where=clause)
    with conn.transaction():
        # An all-stop-word query makes plainto_tsquery return an empty query; Postgres notices, we return [].
        rows = conn.execute(statement, params).fetchall()
    return [(int(i), float(s)) for i, s in rows]
