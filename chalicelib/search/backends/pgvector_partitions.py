"""The pgvector backend's user partitions (migrations/0030_memory_partitions.sql): a body's BM25 postings and its
tagged vectors, in Postgres.

- **Vector leg**: the HNSW index of the dimension over the body's *tagged* vectors (each embedding followed by
  its partition's tag, :data:`~chalicelib.search.partitions.TAG_DIMENSIONS` more dimensions): the query vector,
  tagged alike, walks its own partition's part of the graph (the migration's header), which pgvector's iterative
  scan, filtered to the partition, follows until ``limit`` rows passed the scope (checked on the corpus row, whose
  exact distance is returned). ``ef_search`` is the setting's (at least ``limit``), as for a store of its own.
- **Keyword leg**: a bounded read of the body's impact-ordered postings (:data:`KEYWORD_BUDGET` postings of the
  rarest words whole, the :data:`KEYWORD_HEAD` highest impacts of the others), the best rows met scored exactly
  with the statistics of every row of the user, the scope checked on each. Its cost does not grow with the
  history; its head is the exhaustive ranking whenever the words not read whole cannot lift an unseen row into it
  (MaxScore's condition: their maxima add up to less than the head's last score), and the ranking reads every
  candidate's exact BM25 anyway. An exact top-k (chunks' MaxScore, migrations 0011–0025) read the lists of the
  query's middling words whole, which grow with the history: 30–150 ms at 100,000 memories a user on a loaded
  machine, against a few ms here (benchmarks/memory.py --per-user).
- **Writer**: postings and tagged vectors inserted by SQL from the corpus rows (nothing crosses the wire), in the
  caller's transaction; the dimension's index created on its first body.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.search.corpus import Corpus, Partition
from chalicelib.search.keyword import QueryTerms
from chalicelib.search.partitions import BM25, TAG_DIMENSIONS, PartitionSearch, by_ids, floats
from chalicelib.search.vector import with_hnsw_settings
from chalicelib.store.vector_stores import HNSW_MAX_HALFVEC_DIM, HNSW_MAX_VECTOR_DIM

__all__ = ["KEYWORD_BUDGET", "KEYWORD_CANDIDATES", "KEYWORD_HEAD", "body_keyword_leg", "body_vector_leg", "drop",
           "index_name", "write"]

# Postings of the rarest query words a keyword leg reads whole; highest-impact postings it reads of each other word;
# rows met it scores exactly (times the rows asked for, at least).
KEYWORD_BUDGET = 4096
KEYWORD_HEAD = 256
KEYWORD_CANDIDATES = 2

# The bodies' HNSW graphs: pgvector's defaults (m 16, ef_construction 64). The writer pays each row's insert (a
# body is written off the add's path); chunks' 128 doubles that for a recall the vector leg does not need: the
# ranking reads every candidate's exact evidence.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64

_VECTOR = """
SELECT m.{id}, m.embedding <=> %(q)s::vector AS distance
FROM memory_vectors v
CROSS JOIN LATERAL (SELECT x.{id}, x.embedding FROM {table} x WHERE x.{id} = v.seq AND {check}) AS m
WHERE v.partition_key = %(part)s AND v.embedding_dim = {dim}
ORDER BY v.tagged::{cast} <=> (%(q)s::vector::real[] || engram_partition_tag(%(part)s))::vector::{cast}
LIMIT %(limit)s"""
# The body's keyword candidates: the query's lists read rarest first, whole while they hold at most
# KEYWORD_BUDGET postings together, the others' KEYWORD_HEAD highest impacts (the first list past the budget: what is
# left of it, at least that); each row met gets its read components (upper-weighted impacts); the
# KEYWORD_CANDIDATES best are scored exactly on their row (partitions.BM25), which must pass the scope.
_KEYWORD = """
WITH l AS (SELECT t.lexeme, t.idf * greatest(1.0, %(avgdl)s / p.avgdl_ref) AS w, k.df,
                  sum(k.df) OVER (ORDER BY k.df, t.lexeme) AS run
           FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS t(lexeme, idf)
           JOIN memory_partitions p ON p.partition_key = %(part)s
           JOIN memory_keyword_stats k ON k.partition_key = %(part)s AND k.lexeme = t.lexeme
           WHERE k.df > 0),
     c AS (SELECT x.seq, sum(l.w * x.impact) AS part
           FROM l CROSS JOIN LATERAL (
               SELECT mp.seq, mp.impact FROM memory_postings mp
               WHERE mp.partition_key = %(part)s AND mp.lexeme = l.lexeme
               ORDER BY mp.impact DESC, mp.seq DESC
               LIMIT CASE WHEN l.run <= %(budget)s THEN NULL
                          ELSE greatest(%(budget)s - (l.run - l.df), %(head)s) END) AS x
           GROUP BY x.seq ORDER BY 2 DESC, 1 LIMIT %(candidates)s)
SELECT m.{id}, b.score FROM c JOIN {table} m ON m.{id} = c.seq CROSS JOIN LATERAL {bm25} AS b
WHERE {check} AND b.score > 0 ORDER BY b.score DESC, m.{id} LIMIT %(limit)s"""
_INDEX_EXISTS = "SELECT 1 FROM pg_class WHERE relname = %s"
_DIMENSIONS = "SELECT DISTINCT embedding_dim FROM {rows} AS x WHERE tenant_id = %(tenant)s"
_POSTINGS = """
INSERT INTO memory_postings (partition_key, lexeme, impact, seq, tenant_id)
SELECT %(part)s, t.lexeme, engram_bm25_impact(coalesce(array_length(t.positions, 1), 1), x.keyword_length,
                                              %(ref)s::real), x.{id}, %(tenant)s
FROM {source} x, unnest(x.keywords) AS t
WHERE x.tenant_id = %(tenant)s AND {rows}
ON CONFLICT DO NOTHING"""
_VECTORS = """
INSERT INTO memory_vectors (partition_key, seq, tenant_id, embedding_dim, tagged)
SELECT %(part)s, x.{id}, %(tenant)s, x.embedding_dim, (x.embedding::real[] || engram_partition_tag(%(part)s))::vector
FROM {rows} x WHERE x.tenant_id = %(tenant)s
ON CONFLICT (partition_key, seq) DO UPDATE SET embedding_dim = EXCLUDED.embedding_dim, tagged = EXCLUDED.tagged"""
# The body: the user's rows up to the partition's bound, less the pending ones (a rebuild of its postings).
_BODY_ROWS = """x.{user} = %(user)s AND x.{id} <= %(through)s
    AND NOT EXISTS (SELECT 1 FROM memory_index_pending p WHERE p.partition_key = %(part)s AND p.seq = x.{id})"""
_DROP = ("DELETE FROM memory_postings WHERE partition_key = %(part)s",
         "DELETE FROM memory_vectors WHERE partition_key = %(part)s")


def index_name(dimension: int) -> str:
    """The HNSW index over the tagged vectors of ``dimension``-float embeddings: ``memory_vectors_hnsw_<dim>``."""
    return f"memory_vectors_hnsw_{dimension}"


def body_vector_leg(conn: psycopg.Connection, search: PartitionSearch, vector: Sequence[float], limit: int, *,
                    settings: Settings) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(row id, exact cosine distance)`` of the body's rows passing the scope, nearest first
    (module docstring); ``[]`` when the dimension has no index (the caller then reads the partition exactly)."""
    from pgvector import Vector

    partition = search.partition
    if partition.index_kind is None or limit <= 0:
        return []
    values = floats(vector)
    dimension = len(values)
    check, params = search.check()
    statement = sql.SQL(_VECTOR).format(
        id=search.corpus.row_id(), table=search.corpus.identifier(), check=check, dim=sql.Literal(dimension),
        cast=sql.SQL("{}({})").format(sql.SQL(partition.index_kind), sql.Literal(dimension + TAG_DIMENSIONS)))
    params.update(q=Vector(values), part=partition.key, limit=limit)
    rows = with_hnsw_settings(conn, statement, params, ef=max(settings.hnsw_ef_search, limit),
                              iterative_scan=partition.iterative_scan, index_only=True)
    return sorted(((int(i), float(d)) for i, d in rows), key=lambda r: (r[1], r[0]))


def body_keyword_leg(conn: psycopg.Connection, search: PartitionSearch, terms: QueryTerms, limit: int, *,
                     exact_head: int | None) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(row id, exact BM25)`` of the body's rows passing the scope, best first: the best of the
    rows a bounded read of the postings met (module docstring; ``exact_head`` does not change the read)."""
    if limit <= 0 or not terms.lexemes:
        return []
    check, params = search.check()
    statement = sql.SQL(_KEYWORD).format(id=search.corpus.row_id(), table=search.corpus.identifier(), check=check,
                                         bm25=sql.SQL(BM25).format(row=sql.Identifier("m")))
    params.update(part=search.partition.key, terms=terms.lexemes, idfs=terms.idfs, avgdl=terms.avgdl, limit=limit,
                  budget=KEYWORD_BUDGET, head=KEYWORD_HEAD, candidates=max(KEYWORD_CANDIDATES * limit, 200))
    return [(int(i), float(s)) for i, s in conn.execute(statement, params).fetchall()]


def write(conn: psycopg.Connection, partition: Partition, corpus: Corpus, seqs: Sequence[int], *,
          rebuild: bool) -> None:
    """Insert the postings (impacts against the partition's ``avgdl_ref``) and tagged vectors of rows ``seqs``;
    with ``rebuild``, every posting of the body is computed again first. Creates the HNSW index of a dimension on
    its first rows. Call inside the writer's transaction."""
    if not seqs and not rebuild:
        return
    params = {"part": partition.key, "tenant": partition.tenant_id, "seqs": list(seqs), "ref": partition.avgdl_ref,
              "user": partition.user_id, "through": partition.indexed_through}
    names = {"id": corpus.row_id(), "table": corpus.identifier()}
    fenced = by_ids(corpus)
    if rebuild:
        conn.execute("DELETE FROM memory_postings WHERE partition_key = %(part)s", params)
        rows = sql.SQL(_BODY_ROWS).format(user=sql.Identifier(corpus.partitioned_by or ""), **names)
        conn.execute(sql.SQL(_POSTINGS).format(rows=rows, source=corpus.identifier(), **names), params)
    else:
        conn.execute(sql.SQL(_POSTINGS).format(rows=sql.SQL("TRUE"), source=fenced, **names), params)
    if seqs:
        for (dimension,) in conn.execute(sql.SQL(_DIMENSIONS).format(rows=fenced), params).fetchall():
            _ensure_index(conn, int(dimension))
        conn.execute(sql.SQL(_VECTORS).format(rows=fenced, **names), params)


def drop(conn: psycopg.Connection, partition: Partition) -> None:
    """Delete the body's postings and vectors (the partition moved to another backend)."""
    for statement in _DROP:
        conn.execute(statement, {"part": partition.key})


def _ensure_index(conn: psycopg.Connection, dimension: int) -> None:
    """Create ``memory_vectors_hnsw_<dim>`` when missing (over halfvec where pgvector has it); a dimension pgvector
    cannot index gets none (its partitions are read exactly)."""
    from chalicelib.store.db import capabilities

    if conn.execute(_INDEX_EXISTS, (index_name(dimension),)).fetchone() is not None:
        return
    halfvec = capabilities(conn).halfvec
    if dimension + TAG_DIMENSIONS > (HNSW_MAX_HALFVEC_DIM if halfvec else HNSW_MAX_VECTOR_DIM):
        return
    try:
        with conn.transaction():  # a savepoint: losing the race to a concurrent writer leaves the transaction usable
            conn.execute("SELECT engram_ensure_memory_vectors_index(%s, %s, %s, %s)",
                         (dimension, "halfvec" if halfvec else "vector", HNSW_M, HNSW_EF_CONSTRUCTION))
    except psycopg.errors.UniqueViolation:
        pass
