"""A Qdrant server or cluster over its REST API (httpx; no ``qdrant-client``, whose numpy and gRPC dependencies
would put ~100 MB into every Lambda function that searches).

Endpoints (Qdrant REST API reference, https://api.qdrant.tech): ``GET /collections/{c}``, ``GET
/collections/{c}/exists``, ``PUT
/collections/{c}``, ``PUT /collections/{c}/index``, ``PUT /collections/{c}/points``, ``POST
/collections/{c}/points/delete``, ``POST /collections/{c}/points/query/batch``, ``POST
/collections/{c}/points/count``. Writes pass ``wait=true``: they return once applied, so a search that follows sees
them. Every request is idempotent (upserts by id, deletes by filter), so timeouts, 429 and 5xx answers are retried
with the model clients' back-off (:mod:`chalicelib.http_retry`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

from chalicelib import http_retry
from chalicelib.qdrant.port import (
    CHUNK_LAYOUT,
    DENSE,
    SPARSE,
    CollectionLayout,
    CollectionStatus,
    QdrantError,
    ScoredIds,
)

__all__ = ["HttpTransport"]

# Attempts per request (the first and two retries): a search must fail within a few timeouts, not minutes.
MAX_ATTEMPTS = 3


class HttpTransport:
    """:class:`~chalicelib.qdrant.port.QdrantTransport` over HTTP to ``url`` (the REST root, e.g.
    ``http://localhost:6333``), authenticated by ``api_key`` (the ``api-key`` header) when given; ``timeout_s`` per
    request (seconds)."""

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"api-key": api_key} if api_key else {}
        self._client = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s,
                                    transport=transport)
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def ensure_collection(self, name: str, dimension: int, layout: CollectionLayout = CHUNK_LAYOUT) -> None:
        """See :meth:`QdrantTransport.ensure_collection` (checked once per process and collection)."""
        if name in self._known:
            return
        with self._lock:
            if name in self._known:
                return
            if not self._call("GET", f"/collections/{name}/exists")["exists"]:
                body: dict[str, Any] = {"vectors": {DENSE: {"size": dimension, "distance": "Cosine"}},
                                        "sparse_vectors": {SPARSE: {}}}
                if layout.per_tenant_graphs:
                    body["hnsw_config"] = {"m": 0, "payload_m": 16}
                try:
                    self._call("PUT", f"/collections/{name}", body)
                except QdrantError as error:  # created meanwhile by another process: fine
                    if error.qdrant_status != 409:
                        raise
                for field in layout.indexed:
                    schema: dict[str, Any] = {"type": "keyword"}
                    if field == layout.tenant:
                        schema["is_tenant"] = True
                    elif layout.per_tenant_graphs:
                        schema["enable_hnsw"] = False
                    self._call("PUT", f"/collections/{name}/index", {"field_name": field, "field_schema": schema},
                               wait=True)
            self._known.add(name)

    def upsert(self, name: str, points: Sequence[dict[str, Any]]) -> None:
        """See :meth:`QdrantTransport.upsert`."""
        if points:
            self._call("PUT", f"/collections/{name}/points", {"points": list(points)}, wait=True)

    def delete(self, name: str, filter: dict[str, Any]) -> None:
        """See :meth:`QdrantTransport.delete`."""
        self._call("POST", f"/collections/{name}/points/delete", {"filter": filter}, wait=True, missing=None)

    def query_batch(self, name: str, searches: Sequence[dict[str, Any]]) -> list[ScoredIds]:
        """See :meth:`QdrantTransport.query_batch`."""
        if not searches:
            return []
        body = {"searches": [{**search, "with_payload": False, "with_vector": False} for search in searches]}
        result = self._call("POST", f"/collections/{name}/points/query/batch", body, missing=[])
        if not result:
            return [[] for _ in searches]
        return [[(int(point["id"]), float(point["score"])) for point in answer["points"]] for answer in result]

    def count(self, name: str, filter: dict[str, Any]) -> int:
        """See :meth:`QdrantTransport.count`."""
        result = self._call("POST", f"/collections/{name}/points/count", {"filter": filter, "exact": True},
                            missing={"count": 0})
        return int(result["count"])

    def optimize(self, name: str) -> None:
        """A server optimizes on its own: nothing to do."""

    def status(self, name: str) -> CollectionStatus | None:
        """See :meth:`QdrantTransport.status` (``GET /collections/{name}``): built when Qdrant reports the
        collection ``green`` (``yellow``: optimizing; ``grey``: optimizations pending, not started; ``red``: an
        optimization failed)."""
        result = self._call("GET", f"/collections/{name}", missing=None)
        if result is None:
            return None
        state = str(result.get("status", "green"))
        points, indexed = result.get("points_count"), result.get("indexed_vectors_count")
        return CollectionStatus(state == "green", None if points is None else int(points),
                                None if indexed is None else int(indexed), f"server, {state}")

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(self, method: str, path: str, body: Any = None, *, wait: bool = False, missing: Any = ...) -> Any:
        """The ``result`` of one request, retried on timeouts, connection errors, 429 and 5xx. ``missing``: what a
        404 (no such collection) means, when it is not an error.

        Raises:
            QdrantError: any other failure, or the last retryable one (with Qdrant's message and status).
        """
        params = {"wait": "true"} if wait else None
        for attempt in range(MAX_ATTEMPTS):
            try:
                response = self._client.request(method, path, json=body, params=params)
            except httpx.HTTPError as error:
                if attempt + 1 == MAX_ATTEMPTS:
                    raise QdrantError(f"Qdrant at {self._client.base_url} failed: {type(error).__name__}: "
                                      f"{error}") from error
                time.sleep(http_retry.backoff_s(attempt))
                continue
            if response.status_code == 404 and missing is not ...:
                return missing
            if response.status_code in http_retry.RETRYABLE_STATUS and attempt + 1 < MAX_ATTEMPTS:
                time.sleep(http_retry.retry_after_s(response.headers) or http_retry.backoff_s(attempt))
                continue
            if response.is_error:
                message, _ = http_retry.server_message(response)
                raise QdrantError(f"Qdrant answered {response.status_code} to {method} {path}: {message}",
                                  status=response.status_code)
            return response.json().get("result")
        raise AssertionError("unreachable")  # pragma: no cover
