"""The embedded Qdrant: Qdrant Edge (``qdrant-edge-py``, the Qdrant team's in-process engine, Apache-2.0), one
shard per collection in a folder, for the laptop and the tests.

Chosen over ``qdrant-client``'s local mode by measurement (2026-11-27, this 2-core machine, 384-d vectors with
~60-term sparse vectors, both legs of a hybrid query in one batch, top 100 each, filtered to a tenant and a store):
Edge loaded 100,000 points in 18 s (+ 99 s building its indexes) and answered in 1.4–4.1 ms p50; local mode took
134 s to load 20,000 and 1.3–2.6 s p50 per query (a Python scan of every point). Edge runs the server's engine:
HNSW, the sparse inverted index, payload indexes.

It takes the same REST-shaped dicts as :class:`~chalicelib.qdrant.http.HttpTransport` and builds Edge's objects
from them. Edge has no background optimizer: :meth:`EdgeTransport.optimize` builds the indexes (the housekeeping
job, every path that writes and the benchmarks call it); until then new points are searched by a scan of their
segment, exactly. Whether a build is owed is kept beside the shard, readable by any process (a marker file
``<collection>.unbuilt``, made by the first upsert after a build and removed by the next build), so ``engram
stores`` shows it even while another process holds the shard. A shard is opened by one process at a time (Edge
locks its write-ahead log): within a process every transport shares it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chalicelib.qdrant.port import (
    CHUNK_LAYOUT,
    DENSE,
    SPARSE,
    CollectionLayout,
    CollectionStatus,
    QdrantError,
    ScoredIds,
)

__all__ = ["EdgeTransport"]

_open: dict[Path, Any] = {}  # shard folder → EdgeShard, shared by the process
_open_lock = threading.Lock()
# Beside a shard's folder: points were written since its last index build.
UNBUILT_SUFFIX = ".unbuilt"


class EdgeTransport:
    """:class:`~chalicelib.qdrant.port.QdrantTransport` over Qdrant Edge shards under ``root`` (one folder per
    collection). ``indexing_threshold_kb``: the engine's indexing threshold for the collections it creates (KB of
    vectors in a segment before it gets an HNSW index; None: the engine's default)."""

    def __init__(self, root: Path, *, indexing_threshold_kb: int | None = None) -> None:
        self._root = Path(root)
        self._write_lock = threading.Lock()
        self._indexing_threshold_kb = indexing_threshold_kb

    def ensure_collection(self, name: str, dimension: int, layout: CollectionLayout = CHUNK_LAYOUT) -> None:
        """See :meth:`QdrantTransport.ensure_collection`."""
        self._shard(name, dimension, layout)

    def upsert(self, name: str, points: Sequence[dict[str, Any]]) -> None:
        """See :meth:`QdrantTransport.upsert` (durable: the shard keeps a write-ahead log)."""
        if not points:
            return
        import qdrant_edge as qe

        shard = self._existing(name)
        if shard is None:
            raise QdrantError(f"Qdrant collection {name!r} does not exist.")
        edge_points = [qe.Point(id=int(p["id"]), vector=_vectors(p["vector"]), payload=p.get("payload"))
                       for p in points]
        self._mark_unbuilt(name)
        self._update(shard, qe.UpdateOperation.upsert_points(edge_points))

    def delete(self, name: str, filter: dict[str, Any]) -> None:
        """See :meth:`QdrantTransport.delete`."""
        import qdrant_edge as qe

        shard = self._existing(name)
        if shard is not None:
            self._update(shard, qe.UpdateOperation.delete_points_by_filter(_filter(filter)))

    def query_batch(self, name: str, searches: Sequence[dict[str, Any]]) -> list[ScoredIds]:
        """See :meth:`QdrantTransport.query_batch`."""
        import qdrant_edge as qe

        shard = self._existing(name)
        if shard is None or not searches:
            return [[] for _ in searches]
        requests = [_query(search) for search in searches]
        try:
            answers = shard.query_batch(qe.QueryBatchRequest(queries=requests))
        except Exception as error:  # Edge raises plain exceptions for every failure
            raise QdrantError(f"Qdrant Edge query failed: {error}") from error
        return [[(int(point.id), float(point.score)) for point in answer] for answer in answers]

    def count(self, name: str, filter: dict[str, Any]) -> int:
        """See :meth:`QdrantTransport.count`."""
        import qdrant_edge as qe

        shard = self._existing(name)
        return 0 if shard is None else int(shard.count(qe.CountRequest(exact=True, filter=_filter(filter))))

    def optimize(self, name: str) -> None:
        """Build the shard's indexes over what was written since the last call (seconds to minutes: ~100 s for
        100,000 384-d points on 2 cores), then clear its owed-build marker.

        Raises:
            QdrantError: the shard cannot be opened (another process holds it) or the build failed.
        """
        shard = self._existing(name)
        if shard is None:
            return
        marker = self._marker(name)
        try:
            with self._write_lock:
                marker.unlink(missing_ok=True)  # before: an upsert during the build marks it again
                shard.optimize()
        except Exception as error:
            marker.touch()
            raise QdrantError(f"Qdrant Edge index build failed: {error}") from error

    def status(self, name: str) -> CollectionStatus | None:
        """See :meth:`QdrantTransport.status`: ``built`` from the marker (any process can read it); points and
        indexed vectors from the shard, or None when another process holds it."""
        if not (self._root / name).exists():
            return None
        built = not self._marker(name).exists()
        try:
            shard = self._existing(name)
        except QdrantError:
            return CollectionStatus(built, None, None, "embedded, held by another process (engram serve?)")
        info = shard.info()
        return CollectionStatus(built, int(info.points_count), int(info.indexed_vectors_count),
                                f"embedded, {info.segments_count} segments")

    def close(self) -> None:
        """Flush and close this root's shards (the process's other transports on it lose them too)."""
        with _open_lock:
            for path in [p for p in _open if p.parent == self._root]:
                shard = _open.pop(path)
                shard.flush()
                shard.close()

    def _marker(self, name: str) -> Path:
        return self._root / f"{name}{UNBUILT_SUFFIX}"

    def _mark_unbuilt(self, name: str) -> None:
        marker = self._marker(name)
        if not marker.exists():
            marker.touch()

    def _existing(self, name: str) -> Any:
        path = self._root / name
        with _open_lock:
            if path in _open:
                return _open[path]
        if not path.exists():
            return None
        return self._shard(name, None)

    def _shard(self, name: str, dimension: int | None, layout: CollectionLayout = CHUNK_LAYOUT) -> Any:
        """The open shard of collection ``name``, created (for ``dimension``, built as ``layout`` says) when
        missing."""
        import qdrant_edge as qe

        path = self._root / name
        with _open_lock:
            shard = _open.get(path)
            if shard is not None:
                return shard
            try:
                if path.exists():
                    shard = qe.EdgeShard.load(str(path))
                else:
                    if dimension is None:
                        raise QdrantError(f"Qdrant collection {name!r} does not exist.")
                    path.parent.mkdir(parents=True, exist_ok=True)
                    hnsw = qe.HnswIndexConfig(m=0, payload_m=16, ef_construct=100, full_scan_threshold=10_000) \
                        if layout.per_tenant_graphs else None
                    optimizers = None if self._indexing_threshold_kb is None else \
                        qe.EdgeOptimizersConfig(indexing_threshold=self._indexing_threshold_kb)
                    config = qe.EdgeConfig(
                        vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
                        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams()}, hnsw_config=hnsw,
                        optimizers=optimizers)
                    shard = qe.EdgeShard.create(str(path), config)
                    for field in layout.indexed:
                        tenant = field == layout.tenant
                        params = qe.KeywordIndexParams(is_tenant=tenant, enable_hnsw=False) \
                            if layout.per_tenant_graphs and not tenant else qe.KeywordIndexParams(is_tenant=tenant)
                        shard.update(qe.UpdateOperation.create_field_index(field, params))
            except QdrantError:
                raise
            except Exception as error:
                raise QdrantError(f"The embedded Qdrant at {path} cannot be opened: {error} (one process opens "
                                  "it at a time: is `engram serve` running on this data folder?)") from error
            _open[path] = shard
            return shard

    def _update(self, shard: Any, operation: Any) -> None:
        try:
            with self._write_lock:
                shard.update(operation)
        except Exception as error:
            raise QdrantError(f"Qdrant Edge update failed: {error}") from error


def _vectors(vector: dict[str, Any]) -> dict[str, Any]:
    import qdrant_edge as qe

    out: dict[str, Any] = {}
    for name, value in vector.items():
        out[name] = qe.SparseVector(indices=list(value["indices"]), values=list(value["values"])) \
            if isinstance(value, dict) else list(value)
    return out


def _query(search: dict[str, Any]) -> Any:
    import qdrant_edge as qe

    query = search["query"]
    nearest = qe.SparseVector(indices=list(query["indices"]), values=list(query["values"])) \
        if isinstance(query, dict) else list(query)
    params = search.get("params") or {}
    return qe.QueryRequest(limit=int(search["limit"]), query=qe.Query.Nearest(nearest, using=search.get("using")),
                           filter=_filter(search["filter"]) if search.get("filter") else None,
                           params=qe.SearchParams(hnsw_ef=params.get("hnsw_ef"), exact=bool(params.get("exact")))
                           if params else None,
                           with_payload=False, with_vector=False)


def _filter(node: dict[str, Any]) -> Any:
    """A REST filter dict → ``qdrant_edge.Filter``."""
    import qdrant_edge as qe

    def conditions(clause: str) -> list[Any] | None:
        return [_condition(c) for c in node[clause]] if node.get(clause) else None

    return qe.Filter(must=conditions("must"), should=conditions("should"), must_not=conditions("must_not"))


def _condition(node: dict[str, Any]) -> Any:
    import qdrant_edge as qe

    if "has_id" in node:
        return qe.HasIdCondition(set(int(i) for i in node["has_id"]))
    if "key" not in node:
        return _filter(node)
    if "range" in node:
        return qe.FieldCondition(key=node["key"], range=qe.RangeFloat(**node["range"]))
    match = node["match"]
    if "value" in match:
        return qe.FieldCondition(key=node["key"], match=qe.MatchValue(match["value"]))
    if "any" in match:
        return qe.FieldCondition(key=node["key"], match=qe.MatchAny(list(match["any"])))
    if "except" in match:
        return qe.FieldCondition(key=node["key"], match=qe.MatchExcept(list(match["except"])))
    raise ValueError(f"unsupported Qdrant condition {node!r}")
