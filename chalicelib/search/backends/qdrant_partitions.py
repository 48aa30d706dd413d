"""The Qdrant backend's user partitions (migrations/0030_memory_partitions.sql): a body's points in
``<prefix><corpus>_<dim>`` (``memories``, ``exchanges``), one collection per embedding dimension for every tenant.

- **Layout** (:data:`chalicelib.qdrant.PARTITION_LAYOUT`, Qdrant's multitenancy guide): the partition's key is the
  keyword payload field ``partition`` marked ``is_tenant``, and the collection has no global graph (``m`` 0) but one
  per partition (``payload_m`` 16): a search walks only its user's graph, whatever the others hold. ``tenant_id``,
  ``agent_id`` and ``run_id`` are indexed without graphs of their own, for filtering.
- **Point**: id = the row's ``seq``; ``dense`` its embedding, read back from Postgres (nothing is embedded again);
  ``bm25`` its lexemes' BM25 term components against the partition's ``avgdl_ref`` (:mod:`qdrant_points`).
- **Legs**: a dense, or sparse (the query lexemes' idf over every row of the user), query filtered to the tenant,
  the partition, the agent and run the scope names, and away from the partition's pending rows; each proposed row
  is then checked against the whole scope in Postgres, which returns its exact distance, or exact BM25, in the same
  statement — so both legs' scores are exact, and a row Qdrant still holds after it was deleted is dropped. Asked
  for :data:`~chalicelib.search.partitions.BODY_OVERFETCH` times the rows, for the ones the scope refuses.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.qdrant import DENSE, PARTITION_FIELD, PARTITION_LAYOUT, SPARSE, TENANT_FIELD, QdrantTransport
from chalicelib.qdrant import partition_collection_name as collection
from chalicelib.search.backends.qdrant_points import lexeme_id, query_vector, sparse, term_weight
from chalicelib.search.corpus import Corpus, Partition
from chalicelib.search.keyword import QueryTerms
from chalicelib.search.partitions import BM25, BODY_OVERFETCH, PartitionSearch, by_ids, floats

__all__ = ["UPSERT_BATCH", "body_keyword_leg", "body_vector_leg", "delete_rows", "drop", "settle", "write"]

# Points per upsert request (as chunks': qdrant_write.UPSERT_BATCH).
UPSERT_BATCH = 256
# A user's words recur from add to add: their sparse indices are remembered (a hash each, ~1 µs).
_index_of = functools.lru_cache(maxsize=1 << 16)(lexeme_id)

_ROWS = """
SELECT x.{id}, x.embedding_dim, x.embedding, x.keyword_length, x.agent_id, x.run_id,
       (SELECT array_agg(t.lexeme ORDER BY t.lexeme) FROM unnest(x.keywords) AS t),
       (SELECT array_agg(coalesce(array_length(t.positions, 1), 1) ORDER BY t.lexeme) FROM unnest(x.keywords) AS t)
FROM {rows} x WHERE x.tenant_id = %(tenant)s"""
# The proposed rows the scope lets through, with their exact distance or BM25.
_CHECK_DISTANCE = """SELECT {id}, embedding <=> %(q)s::vector FROM {table}
WHERE {id} = ANY(%(ids)s) AND embedding_dim = %(dim)s AND {check}"""
_CHECK_BM25 = """SELECT m.{id}, b.score FROM {table} m CROSS JOIN LATERAL {bm25} AS b
WHERE m.{id} = ANY(%(ids)s) AND {check}"""


def _filter(search: PartitionSearch) -> dict[str, Any]:
    """The Qdrant filter of a search's partition: the tenant, the partition, the agent and run the scope names,
    none of the partition's pending rows."""
    partition = search.partition
    must: list[dict[str, Any]] = [{"key": TENANT_FIELD, "match": {"value": partition.tenant_id}},
                                  {"key": PARTITION_FIELD, "match": {"value": str(partition.key)}}]
    for name, value in sorted(search.ids.items()):
        if name in ("agent_id", "run_id"):
            must.append({"key": name, "match": {"value": value}})
    out: dict[str, Any] = {"must": must}
    if partition.pending:
        out["must_not"] = [{"has_id": list(partition.pending)}]
    return out


def body_vector_leg(conn: psycopg.Connection, transport: QdrantTransport, settings: Settings, search: PartitionSearch,
                    vector: Sequence[float], limit: int) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(row id, exact cosine distance)`` of the body's rows passing the scope, nearest first."""
    from pgvector import Vector

    if limit <= 0:
        return []
    values = floats(vector)
    asked = limit * BODY_OVERFETCH
    request = {"query": values, "using": DENSE, "filter": _filter(search), "limit": asked,
               "params": {"hnsw_ef": max(settings.hnsw_ef_search, asked)}}
    [found] = transport.query_batch(collection(settings, search.corpus.name, len(values)), [request])
    if not found:
        return []
    check, params = search.check()
    statement = sql.SQL(_CHECK_DISTANCE).format(id=search.corpus.row_id(), table=search.corpus.identifier(),
                                                check=check)
    params.update(q=Vector(values), dim=len(values), ids=[i for i, _ in found])
    rows = [(int(i), float(d)) for i, d in conn.execute(statement, params).fetchall()]
    return sorted(rows, key=lambda r: (r[1], r[0]))[:limit]


def body_keyword_leg(conn: psycopg.Connection, transport: QdrantTransport, settings: Settings,
                     search: PartitionSearch, terms: QueryTerms, limit: int) -> list[tuple[int, float]]:
    """Up to ``limit`` ``(row id, exact BM25)`` of the body's rows passing the scope, best first: Qdrant's sparse
    candidates (BM25 with the average length of their sync) in each of the partition's collections (one per
    dimension of its rows), scored again exactly."""
    if limit <= 0 or not terms.lexemes:
        return []
    asked = limit * BODY_OVERFETCH
    request = {"query": query_vector(terms.lexemes, terms.idfs), "using": SPARSE, "filter": _filter(search),
               "limit": asked}
    proposed: set[int] = set()
    for dimension in search.partition.dimensions:
        [found] = transport.query_batch(collection(settings, search.corpus.name, dimension), [request])
        proposed.update(i for i, _ in found)
    if not proposed:
        return []
    check, params = search.check()
    statement = sql.SQL(_CHECK_BM25).format(id=search.corpus.row_id(), table=search.corpus.identifier(), check=check,
                                            bm25=sql.SQL(BM25).format(row=sql.Identifier("m")))
    params.update(terms=terms.lexemes, idfs=terms.idfs, avgdl=terms.avgdl, ids=sorted(proposed))
    rows = [(int(i), float(s)) for i, s in conn.execute(statement, params).fetchall() if s > 0]
    return sorted(rows, key=lambda r: (-r[1], r[0]))[:limit]


def write(conn: psycopg.Connection, transport: QdrantTransport, settings: Settings, partition: Partition,
          corpus: Corpus, seqs: Sequence[int]) -> None:
    """Upsert the points of rows ``seqs`` (their vectors from Postgres), creating the collection of a dimension
    on its first point.

    Raises:
        QdrantError: Qdrant failed (the caller's transaction rolls back; upserts are idempotent).
    """
    if not seqs:
        return
    statement = sql.SQL(_ROWS).format(id=corpus.row_id(), rows=by_ids(corpus))
    by_dimension: dict[int, list[dict[str, Any]]] = {}
    # (binary results: a vector's text form costs ~0.5 ms a row to parse)
    for seq, dim, embedding, length, agent_id, run_id, lexemes, tfs in conn.execute(
            statement, {"tenant": partition.tenant_id, "seqs": list(seqs)}, binary=True):
        weights: dict[int, float] = {}
        for lexeme, tf in zip(lexemes or (), tfs or (), strict=True):
            index = _index_of(lexeme)
            weights[index] = weights.get(index, 0.0) + term_weight(tf, length, partition.avgdl_ref or 1.0)
        payload: dict[str, Any] = {TENANT_FIELD: partition.tenant_id, PARTITION_FIELD: str(partition.key)}
        if agent_id is not None:
            payload["agent_id"] = agent_id
        if run_id is not None:
            payload["run_id"] = run_id
        values = embedding.to_list() if hasattr(embedding, "to_list") else [float(x) for x in embedding]
        by_dimension.setdefault(int(dim), []).append(
            {"id": int(seq), "vector": {DENSE: values, SPARSE: sparse(weights)}, "payload": payload})
    for dim, points in by_dimension.items():
        name = collection(settings, corpus.name, dim)
        transport.ensure_collection(name, dim, PARTITION_LAYOUT)
        for start in range(0, len(points), UPSERT_BATCH):
            transport.upsert(name, points[start:start + UPSERT_BATCH])


def delete_rows(transport: QdrantTransport, settings: Settings, partition: Partition, corpus: Corpus,
                seqs: Sequence[int]) -> None:
    """Delete the points of rows ``seqs`` from the partition's collections.

    Raises:
        QdrantError: Qdrant failed.
    """
    for dimension in partition.dimensions:
        transport.delete(collection(settings, corpus.name, dimension),
                         {"must": [{"key": PARTITION_FIELD, "match": {"value": str(partition.key)}},
                                   {"has_id": [int(s) for s in seqs]}]})


def drop(transport: QdrantTransport, settings: Settings, partition: Partition, corpus: Corpus) -> None:
    """Delete every point of the partition.

    Raises:
        QdrantError: Qdrant failed.
    """
    for dimension in partition.dimensions:
        transport.delete(collection(settings, corpus.name, dimension),
                         {"must": [{"key": PARTITION_FIELD, "match": {"value": str(partition.key)}}]})


def settle(transport: QdrantTransport, settings: Settings, corpus: Corpus, dimensions: Sequence[int]) -> None:
    """Build the indexes of what was written (the embedded engine; a server does it itself).

    Raises:
        QdrantError: Qdrant failed.
    """
    if settings.qdrant_url:
        return
    for dimension in dimensions:
        transport.optimize(collection(settings, corpus.name, dimension))
