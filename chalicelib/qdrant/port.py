"""The Qdrant transport port: the few operations of Qdrant's REST API Engram uses, in the API's own JSON shapes.

Requests and filters are the REST API's JSON (https://api.qdrant.tech, "Points" and "Collections"), so the same
dicts go to a Qdrant server or cluster over HTTP (:mod:`chalicelib.qdrant.http`) and, translated, to the embedded
Qdrant Edge engine (:mod:`chalicelib.qdrant.edge`). A filter is ``{"must": [...], "should": [...], "must_not":
[...]}`` of conditions ``{"key", "match": {"value" | "any" | "except"}}``, ``{"key", "range": {"gt", "gte", "lt",
"lte"}}``, ``{"has_id": [ids]}`` or a nested filter. A point is ``{"id": int, "vector": {DENSE: [floats],
SPARSE: {"indices": [ints], "values": [floats]}}, "payload": {...}}``. A search is a REST ``QueryRequest``:
``{"query": [floats] | {"indices", "values"}, "using": DENSE | SPARSE, "filter", "limit", "params"}``.

One collection per embedding dimension holds every tenant's chunks, told apart by payload (Qdrant's multitenancy
guide: one collection, a ``keyword`` payload index with ``is_tenant`` on the tenant field).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chalicelib.errors import UpstreamError

__all__ = ["CHUNK_LAYOUT", "DENSE", "INDEXED_FIELDS", "PARTITION_FIELD", "PARTITION_LAYOUT", "SPARSE", "TENANT_FIELD",
           "CollectionLayout", "CollectionStatus", "QdrantError", "QdrantTransport", "ScoredIds"]

# The named vectors of a chunk point: its embedding (cosine) and its BM25 keyword weights (sparse, dot product).
DENSE = "dense"
SPARSE = "bm25"
# The payload field every query filters on first (indexed with is_tenant: Qdrant co-locates a tenant's points).
TENANT_FIELD = "tenant_id"
# Payload fields with a keyword index: every search filters on the tenant and the stores, a file's sync on the file.
INDEXED_FIELDS = (TENANT_FIELD, "vector_store_id", "file_id")

# One search's result: (point id, score) pairs, best first.
ScoredIds = list[tuple[int, float]]
# The payload field of a user's history points naming its partition (memory_partitions.partition_key, as a keyword).
PARTITION_FIELD = "partition"


@dataclass(frozen=True, slots=True)
class CollectionLayout:
    """How a collection is built: keyword payload indexes on ``indexed``, ``tenant`` among them marked ``is_tenant``
    (Qdrant stores its points together); with ``per_tenant_graphs``, no global HNSW graph (``m`` 0) but one per
    value of the tenant field (``payload_m`` 16; the other indexes with ``enable_hnsw`` off) — Qdrant's
    multitenancy guide for collections only ever searched one tenant at a time."""

    indexed: tuple[str, ...]
    tenant: str
    per_tenant_graphs: bool = False


# Vector stores' chunks: searched across a tenant's stores (and shared ones), with a global graph.
CHUNK_LAYOUT = CollectionLayout(INDEXED_FIELDS, TENANT_FIELD)
# Users' histories: every search stays in one user's partition; agent and run narrow it.
PARTITION_LAYOUT = CollectionLayout((PARTITION_FIELD, TENANT_FIELD, "agent_id", "run_id"), PARTITION_FIELD,
                                    per_tenant_graphs=True)


class QdrantError(UpstreamError):
    """Qdrant answered with an error, timed out or could not be reached (HTTP 502 to API clients; SQS retries a
    message that met it). ``qdrant_status`` is Qdrant's HTTP status when it answered."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.qdrant_status = status


@dataclass(frozen=True, slots=True)
class CollectionStatus:
    """The state of a collection's indexes: ``built`` (False while points written since the last index build wait
    for one: searches scan them exactly), ``points`` in it and ``indexed_vectors`` (Qdrant's count: dense and
    sparse vectors in indexed segments) — None when this process cannot read them (the embedded engine is held by
    another process) — and ``detail``, for people (Qdrant's status, or who holds the engine)."""

    built: bool
    points: int | None
    indexed_vectors: int | None
    detail: str


class QdrantTransport(Protocol):
    """What Engram asks of Qdrant. Every method raises :class:`QdrantError` when Qdrant fails."""

    def ensure_collection(self, name: str, dimension: int, layout: CollectionLayout = CHUNK_LAYOUT) -> None:
        """Create collection ``name`` for ``dimension``-float dense vectors (cosine) and sparse BM25 vectors, built
        as ``layout`` says (chunks': keyword payload indexes on :data:`INDEXED_FIELDS`), unless it exists."""
        ...

    def upsert(self, name: str, points: Sequence[dict[str, Any]]) -> None:
        """Insert or replace ``points`` (REST ``PointStruct`` dicts); durable and visible when it returns."""
        ...

    def delete(self, name: str, filter: dict[str, Any]) -> None:
        """Delete every point matching ``filter``; visible when it returns. A missing collection holds nothing."""
        ...

    def query_batch(self, name: str, searches: Sequence[dict[str, Any]]) -> list[ScoredIds]:
        """Run ``searches`` (REST ``QueryRequest`` dicts) in one request; one result list per search, in order.
        A missing collection answers empty lists."""
        ...

    def count(self, name: str, filter: dict[str, Any]) -> int:
        """How many points match ``filter`` (exact); 0 for a missing collection."""
        ...

    def optimize(self, name: str) -> None:
        """Build the collection's indexes for what was written since the last call (the embedded engine runs no
        background optimizer; a server does this itself, so there it is a no-op)."""
        ...

    def status(self, name: str) -> CollectionStatus | None:
        """The state of the collection's indexes (None: no such collection)."""
        ...

    def close(self) -> None:
        """Release connections or the embedded engine's files."""
        ...
