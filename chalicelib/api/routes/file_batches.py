"""File batches API: ``/v1/vector_stores/{id}/file_batches`` (OPENAI-COMPAT.md §3)."""

from __future__ import annotations

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import PAGE, accepts, choice
from chalicelib.api.routes.common import respond, settled_store, store_id
from chalicelib.api.routes.vector_store_files import STATUSES
from chalicelib.api.schemas import CreateFileBatch
from chalicelib.errors import InvalidRequestError
from chalicelib.store import attachments, batches, vector_stores

bp = Blueprint(__name__)


def _batch_id(value: str) -> str:
    return ids.validate_id(value, ids.FILE_BATCH, param="batch_id")


def _param(field: str, index: int, name: str) -> str:
    # file_ids[3] for a bad id in file_ids; files[3].chunking_strategy for per-file values; else the top level.
    if field == "files":
        return f"files[{index}].{name}"
    return f"file_ids[{index}]" if name == "file_id" else name


def _object(conn, tenant: str, batch) -> Response:
    body = objects.batch_object(batch, batches.file_counts(conn, tenant, batch.id))
    return respond(body, in_progress=body["status"] == "in_progress")


@bp.route("/vector_stores/{vector_store_id}/file_batches", methods=["POST"])
def create_file_batch(vector_store_id: str) -> Response:
    """``file_batches.create(vector_store_id, file_ids= | files=, attributes=, chunking_strategy=)``: every file is
    checked before anything is written; small batches are processed inside the request."""
    from chalicelib.ingest import attach  # lazy: the parsers load on the first attach, not at cold start

    body = request.validate(CreateFileBatch, request.json_body(bp.current_request))
    entries = body.entries()
    if len({e.file_id for e in entries}) != len(entries):
        raise InvalidRequestError("A file batch may not name the same file twice.",
                                  param="files" if body.files is not None else "file_ids", code="duplicate_file")
    field = "files" if body.files is not None else "file_ids"
    tenant, embedder = current_tenant(), deps.embedder()
    with tenant_db() as conn:
        store = vector_stores.get(conn, tenant, store_id(vector_store_id))
        vector_stores.require_active(store, objects.now())
        vector_stores.check_embedding(store, embedder.model, embedder.dimension)
        prepared = attach.prepare(conn, tenant, [(e.file_id, e.attributes, e.chunking_strategy) for e in entries],
                                  embedder=embedder, settings=deps.current_settings(),
                                  param=lambda i, name: _param(field, i, name))
        with conn.transaction():
            attach.attach_all(conn, tenant, store.id, prepared, param="file_ids")
            batch = batches.create(conn, tenant, store.id, [p.file.id for p in prepared])
        vector_stores.touch(conn, tenant, [store])
        attach.process_attached(conn, tenant, store, prepared, settings=deps.current_settings(),
                                dispatcher=deps.dispatcher())
        return _object(conn, tenant, batches.get(conn, tenant, store.id, batch.id))


@bp.route("/vector_stores/{vector_store_id}/file_batches/{batch_id}", methods=["GET"])
def retrieve_file_batch(vector_store_id: str, batch_id: str) -> Response:
    """``file_batches.retrieve(batch_id, vector_store_id=)``."""
    tenant = current_tenant()
    with tenant_db() as conn:
        settled_store(conn, tenant, store_id(vector_store_id))
        return _object(conn, tenant, batches.get(conn, tenant, vector_store_id, _batch_id(batch_id)))


@bp.route("/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel", methods=["POST"])
def cancel_file_batch(vector_store_id: str, batch_id: str) -> Response:
    """``file_batches.cancel(batch_id, vector_store_id=)``: files not yet processed become ``cancelled``."""
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        return _object(conn, tenant, batches.cancel(conn, tenant, vector_store_id, _batch_id(batch_id)))


@bp.route("/vector_stores/{vector_store_id}/file_batches/{batch_id}/files", methods=["GET"])
@accepts(filter=choice(*STATUSES), **PAGE)
def list_file_batch_files(vector_store_id: str, batch_id: str) -> dict:
    """``file_batches.list_files(batch_id, vector_store_id=, limit=, order=, after=, before=, filter=)``."""
    params = request.query(bp.current_request)
    page = request.page(params, prefix=ids.FILE, default_limit=20, max_limit=100)
    status = params.get("filter")
    tenant = current_tenant()
    with tenant_db() as conn:
        settled_store(conn, tenant, store_id(vector_store_id))
        batches.get(conn, tenant, vector_store_id, _batch_id(batch_id))
        rows, has_more = attachments.list_page(conn, tenant, vector_store_id, page, status=status,
                                                         batch_id=batch_id)
    return objects.cursor_page([objects.store_file_object(r) for r in rows], has_more)
