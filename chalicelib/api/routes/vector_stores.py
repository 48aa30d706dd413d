"""Vector stores API: ``/v1/vector_stores`` and search (OPENAI-COMPAT.md §2).

Shared stores (``engram stores share``): any tenant may retrieve one by id and search it; every other route on it
answers 403 ``vector_store_read_only`` to anyone but its owner (it is visible, so 404 would be untrue). The list
shows the caller's own stores only: a shared store is found by its id, which the operator hands out.
"""

from __future__ import annotations

import time
from typing import Any

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids, observability
from chalicelib.api import objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import ARRAY, PAGE, accepts
from chalicelib.api.routes.common import respond, settled_store, store_id, sync_vector_index
from chalicelib.api.schemas import CreateVectorStore, SearchRequest, UpdateVectorStore
from chalicelib.ingest.chunk import resolve_chunking_strategy
from chalicelib.search import highlight
from chalicelib.search.rewrite import rewrite_queries
from chalicelib.search.service import parse_ranking_options, search
from chalicelib.store import vector_stores
from chalicelib.validation import param_path

bp = Blueprint(__name__)


# Engram's ``include`` values on the list and retrieve routes: ``details`` adds the store's backend, chunk count,
# embedding model and sharing (chalicelib.api.objects.vector_store_details).
INCLUDE = ("details",)


def _object(conn, tenant: str, store, *, details: bool = False) -> Response:
    if store.tenant_id == tenant:
        counts = vector_stores.file_counts(conn, tenant, [store.id])[store.id]
    else:  # a shared store: its owner's files, counted through the view every tenant may read
        counts = vector_stores.shared_file_counts(conn, [store.id])[store.id]
    body = objects.vector_store_object(store, counts)
    if details:
        body["details"] = objects.vector_store_details(store)
    return respond(body, in_progress=body["status"] == "in_progress")


@bp.route("/vector_stores", methods=["POST"])
def create_vector_store() -> Response:
    """``vector_stores.create(name=, file_ids=, chunking_strategy=, expires_after=, metadata=)``. Files named in
    ``file_ids`` are attached (and processed inline when small); nothing is written if any is invalid."""
    from chalicelib.ingest import attach  # lazy: the parsers load on the first attach, not at cold start

    body = request.validate(CreateVectorStore, request.json_body(bp.current_request))
    tenant, embedder = current_tenant(), deps.embedder()
    entries = [(f, None, body.chunking_strategy) for f in body.file_ids or []]
    if body.chunking_strategy is not None and not entries:  # checked even when no file uses it yet
        resolve_chunking_strategy(body.chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    with tenant_db() as conn:
        prepared = attach.prepare(conn, tenant, entries, embedder=embedder, settings=deps.current_settings(),
                                  param=lambda i, field: param_path("file_ids", i) if field == "file_id" else field)
        with conn.transaction():
            store = vector_stores.create(
                conn, tenant, name=body.name, model=embedder.model, dim=embedder.dimension,
                metadata=body.metadata, expires_after=body.expires_after.model_dump() if body.expires_after else None,
                backend=deps.current_settings().vector_backend)
            attach.attach_all(conn, tenant, store.id, prepared, param="file_ids")
        attach.process_attached(conn, tenant, store, prepared, settings=deps.current_settings(),
                                dispatcher=deps.dispatcher())
        return _object(conn, tenant, vector_stores.get(conn, tenant, store.id))


@bp.route("/vector_stores", methods=["GET"])
@accepts(include=ARRAY, **PAGE)
def list_vector_stores() -> dict:
    """``vector_stores.list(limit=, order=, after=, before=)`` → a cursor page (Engram's ``include=details``: each
    store's backend, chunks and embedding model too)."""
    params = request.query(bp.current_request)
    details = "details" in request.includes(params, INCLUDE)
    page = request.page(params, prefix=ids.VECTOR_STORE, default_limit=20, max_limit=100)
    tenant = current_tenant()
    with tenant_db() as conn:
        rows, has_more = vector_stores.list_page(conn, tenant, page)
        counts = vector_stores.file_counts(conn, tenant, [r.id for r in rows])
    data = []
    for row in rows:
        body = objects.vector_store_object(row, counts[row.id])
        if details:
            body["details"] = objects.vector_store_details(row)
        data.append(body)
    return objects.cursor_page(data, has_more)


@bp.route("/vector_stores/{vector_store_id}", methods=["GET"])
@accepts(include=ARRAY)
def retrieve_vector_store(vector_store_id: str) -> Response:
    """``vector_stores.retrieve(id)``: the caller's store, or a shared one (``include=details`` as on the list)."""
    details = "details" in request.includes(request.query(bp.current_request), INCLUDE)
    tenant = current_tenant()
    with tenant_db() as conn:
        return _object(conn, tenant, settled_store(conn, tenant, store_id(vector_store_id), shared=True),
                       details=details)


@bp.route("/vector_stores/{vector_store_id}", methods=["POST"])
def update_vector_store(vector_store_id: str) -> Response:
    """``vector_stores.update(id, name=, metadata=, expires_after=)``: fields sent replace (null clears)."""
    body = request.validate(UpdateVectorStore, request.json_body(bp.current_request))
    changes: dict[str, Any] = {}
    if "name" in body.model_fields_set:
        changes["name"] = body.name
    if "metadata" in body.model_fields_set:
        changes["metadata"] = body.metadata
    if "expires_after" in body.model_fields_set:
        changes["expires_after"] = body.expires_after.model_dump() if body.expires_after else None
    tenant = current_tenant()
    with tenant_db() as conn:
        store = vector_stores.update(conn, tenant, store_id(vector_store_id), **changes)
        return _object(conn, tenant, store)


@bp.route("/vector_stores/{vector_store_id}", methods=["DELETE"])
def delete_vector_store(vector_store_id: str) -> dict:
    """``vector_stores.delete(id)``: the store, its attachments and chunks (the Files themselves stay).

    Raises:
        NotFoundError: no such store.
    """
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        vector_stores.delete(conn, tenant, vector_store_id)
        sync_vector_index(conn, store_id=vector_store_id)
    return objects.deleted(vector_store_id, "vector_store.deleted")


@bp.route("/vector_stores/{vector_store_id}/search", methods=["POST"])
def search_vector_store(vector_store_id: str) -> dict:
    """``vector_stores.search(id, query=, max_num_results=, filters=, ranking_options=, rewrite_query=)`` →
    ``vector_store.search_results.page``; Engram's ``include`` (``score_details``, ``chunk``) adds to each result
    the evidence of its score and where it lies (:func:`chalicelib.api.objects.search_page`). With
    ``rewrite_query`` the configured chat model rewrites each query first (:mod:`chalicelib.search.rewrite`;
    without one the query is used as given) and ``search_query`` shows what was searched. A shared store can be
    searched by any tenant; only its owner's searches count as activity (``last_active_at``)."""
    body = request.validate(SearchRequest, request.json_body(bp.current_request))
    ranking = parse_ranking_options(body.ranking_options)
    queries = [body.query] if isinstance(body.query, str) else list(body.query)
    tenant = current_tenant()
    started = time.perf_counter()
    if body.rewrite_query:  # the store is checked first; no connection is held during the model call (seconds)
        with tenant_db() as conn:
            vector_stores.require_active(vector_stores.get(conn, tenant, store_id(vector_store_id), shared=True),
                                         objects.now())
        queries = rewrite_queries(deps.current_settings(), queries)
    with tenant_db() as conn:
        store = vector_stores.get(conn, tenant, store_id(vector_store_id), shared=True)
        vector_stores.require_active(store, objects.now())
        hits = search(conn, tenant, [store], queries, embedder=deps.embedder(), settings=deps.current_settings(),
                      limit=body.max_num_results, filters=body.filters, ranking=ranking)
        vector_stores.touch(conn, tenant, [store])
        include = frozenset(body.include or ())
        spans = highlight.matches(conn, queries, [h.text for h in hits]) if "score_details" in include else None
    observability.record(observability.SEARCH_LATENCY, (time.perf_counter() - started) * 1000.0)
    observability.record(observability.RESULTS_RETURNED, len(hits), "Count")
    return objects.search_page(queries, hits, include, matches=spans)
