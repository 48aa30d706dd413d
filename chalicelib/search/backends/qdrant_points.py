"""How a chunk becomes a Qdrant point, and a query a sparse vector: shared by the Qdrant backend's search and its
sync, so both use the same lexeme ids, weights and payload fields.

- **Point id** = ``chunks.id`` (a bigint identity: a new version's chunks get new ids, so a re-ingested file never
  overwrites a point another search may still rank; the sync deletes the old ones).
- **Dense vector** ``dense``: the chunk's embedding (cosine).
- **Sparse vector** ``bm25``: one entry per lexeme of the chunk's tsvector (Postgres' ``english`` configuration,
  the same lexemes as the pgvector backend), at index :func:`lexeme_id`, weighted by BM25's term component
  ``tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))`` against the store's average length when the chunk is
  synced (k1, b: :mod:`chalicelib.search.keyword`). The query vector holds each query lexeme's idf over the store's
  statistics, so the dot product is BM25 (Robertson & Zaragoza 2009) with the average length of the sync — close
  enough to propose candidates; the ranking then reads their exact BM25 from Postgres.
- **Payload**: ``tenant_id``, ``vector_store_id``, ``file_id``, and each attribute under :func:`attribute_field`
  (a boolean as the keyword ``"true"``/``"false"`` under :func:`boolean_field`: the embedded engine's Python
  binding reads a boolean match value as the integer 0 or 1, so booleans are matched as keywords on both
  transports).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chalicelib.qdrant import DENSE, SPARSE, TENANT_FIELD
from chalicelib.search.keyword import BM25_B, BM25_K1

__all__ = ["attribute_field", "boolean_field", "boolean_keyword", "lexeme_id", "point", "query_vector",
           "term_weight"]

# Attribute keys are arbitrary strings (OpenAI: up to 64 characters); Qdrant reads '.', '[' and '"' in a payload key
# as path syntax. Each attribute is stored under this prefix and its key's UTF-8 bytes in hex.
ATTRIBUTE_PREFIX = "attr_"
BOOLEAN_PREFIX = "bool_"


def lexeme_id(lexeme: str) -> int:
    """The sparse-vector index of ``lexeme``: the first 4 bytes of its BLAKE2b digest as an unsigned 32-bit int
    (Qdrant's sparse indices are u32). Two lexemes share an index with probability ~n²/2³³ for n distinct lexemes
    (~0.1 for a 30,000-lexeme store): a collision adds one lexeme's weight to the other's candidates only, since
    the exact BM25 is read from Postgres."""
    return int.from_bytes(hashlib.blake2b(lexeme.encode("utf-8"), digest_size=4).digest(), "big")


def term_weight(tf: int, length: int, avgdl: float) -> float:
    """BM25's term component of a chunk (``tf`` occurrences, ``length`` lexemes) against ``avgdl``."""
    return tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / max(avgdl, 1.0)))


def attribute_field(key: str) -> str:
    """The payload field holding attribute ``key`` (:data:`ATTRIBUTE_PREFIX` + hex of its UTF-8 bytes)."""
    return ATTRIBUTE_PREFIX + key.encode("utf-8").hex()


def boolean_field(key: str) -> str:
    """The payload field holding boolean attribute ``key`` as a keyword (:func:`boolean_keyword`)."""
    return BOOLEAN_PREFIX + key.encode("utf-8").hex()


def boolean_keyword(value: bool) -> str:
    """A boolean attribute's keyword: ``"true"`` or ``"false"``."""
    return "true" if value else "false"


def sparse(weights: Mapping[int, float]) -> dict[str, list[Any]]:
    """A REST sparse vector from ``{index: weight}`` (indices ascending)."""
    ordered = sorted(weights.items())
    return {"indices": [i for i, _ in ordered], "values": [float(w) for _, w in ordered]}


def point(chunk_id: int, tenant_id: str, store_id: str, file_id: str, vector: Sequence[float],
          terms: Iterable[tuple[str, int]], length: int, avgdl: float, attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The REST point of one chunk: ``vector`` (its embedding, dim floats), ``terms`` its ``(lexeme, tf)`` pairs,
    ``length`` its lexeme count, ``avgdl`` the store's average length now."""
    weights: dict[int, float] = {}
    for lexeme, tf in terms:
        index = lexeme_id(lexeme)
        weights[index] = weights.get(index, 0.0) + term_weight(tf, length, avgdl)
    payload: dict[str, Any] = {TENANT_FIELD: tenant_id, "vector_store_id": store_id, "file_id": file_id}
    for key, value in attributes.items():
        if isinstance(value, bool):
            payload[boolean_field(key)] = boolean_keyword(value)
        else:
            payload[attribute_field(key)] = value
    return {"id": int(chunk_id), "vector": {DENSE: [float(x) for x in vector], SPARSE: sparse(weights)},
            "payload": payload}


def query_vector(lexemes: Sequence[str], idfs: Sequence[float]) -> dict[str, list[Any]]:
    """The sparse query vector of a query's lexemes weighted by their ``idfs`` (same length)."""
    weights: dict[int, float] = {}
    for lexeme, value in zip(lexemes, idfs, strict=True):
        index = lexeme_id(lexeme)
        weights[index] = weights.get(index, 0.0) + value
    return sparse(weights)
