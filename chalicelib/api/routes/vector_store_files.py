"""Vector store files API: ``/v1/vector_stores/{id}/files`` (OPENAI-COMPAT.md §3)."""

from __future__ import annotations

from typing import get_args

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import ARRAY, INTEGER, PAGE, accepts, choice
from chalicelib.api.routes.common import file_id, respond, settled_store, store_id, sync_vector_index
from chalicelib.api.schemas import CreateVectorStoreFile, UpdateVectorStoreFile
from chalicelib.errors import InvalidRequestError
from chalicelib.store import attachments, chunks, vector_stores
from chalicelib.wire import FileStatus

bp = Blueprint(__name__)

# The values of the ``filter`` query parameter: a vector-store file's statuses.
STATUSES: tuple[FileStatus, ...] = get_args(FileStatus)
# Engram's ``include`` values on the list and retrieve routes: ``details`` adds the file's name and chunk count
# (chalicelib.api.objects.store_file_details).
INCLUDE = ("details",)


def _object(row) -> Response:
    return respond(objects.store_file_object(row), in_progress=row.status == "in_progress")


@bp.route("/vector_stores/{vector_store_id}/files", methods=["POST"])
def create_vector_store_file(vector_store_id: str) -> Response:
    """``vector_stores.files.create(vector_store_id=, file_id=, attributes=, chunking_strategy=)``: small files
    come back ``completed`` (processed in the request), larger ones ``in_progress``."""
    from chalicelib.ingest import attach  # lazy: the parsers load on the first attach, not at cold start

    body = request.validate(CreateVectorStoreFile, request.json_body(bp.current_request))
    tenant, embedder = current_tenant(), deps.embedder()
    with tenant_db() as conn:
        store = vector_stores.get(conn, tenant, store_id(vector_store_id))
        vector_stores.require_active(store, objects.now())
        vector_stores.check_embedding(store, embedder.model, embedder.dimension)
        prepared = attach.prepare(conn, tenant, [(body.file_id, body.attributes, body.chunking_strategy)],
                                  embedder=embedder, settings=deps.current_settings(), param=lambda i, field: field)
        with conn.transaction():
            attach.attach_all(conn, tenant, store.id, prepared)
        vector_stores.touch(conn, tenant, [store])
        attach.process_attached(conn, tenant, store, prepared, settings=deps.current_settings(),
                                dispatcher=deps.dispatcher())
        return _object(attachments.get(conn, tenant, store.id, body.file_id))


@bp.route("/vector_stores/{vector_store_id}/files", methods=["GET"])
@accepts(filter=choice(*STATUSES), include=ARRAY, **PAGE)
def list_vector_store_files(vector_store_id: str) -> dict:
    """``vector_stores.files.list(vector_store_id, limit=, order=, after=, before=, filter=)`` (Engram's
    ``include=details``: each file's name and chunk count too)."""
    params = request.query(bp.current_request)
    details = "details" in request.includes(params, INCLUDE)
    page = request.page(params, prefix=ids.FILE, default_limit=20, max_limit=100)
    status = params.get("filter")
    tenant = current_tenant()
    with tenant_db() as conn:
        settled_store(conn, tenant, store_id(vector_store_id))
        rows, has_more = attachments.list_page(conn, tenant, vector_store_id, page, status=status)
    return objects.cursor_page([_body(r, details) for r in rows], has_more)


@bp.route("/vector_stores/{vector_store_id}/files/{file_id}", methods=["GET"])
@accepts(include=ARRAY)
def retrieve_vector_store_file(vector_store_id: str, file_id: str) -> Response:
    """``vector_stores.files.retrieve(file_id, vector_store_id=)`` (what ``poll`` calls; ``include=details`` as on
    the list)."""
    details = "details" in request.includes(request.query(bp.current_request), INCLUDE)
    tenant = current_tenant()
    with tenant_db() as conn:
        settled_store(conn, tenant, store_id(vector_store_id))
        row = attachments.get(conn, tenant, vector_store_id, _file(file_id))
    return respond(_body(row, details), in_progress=row.status == "in_progress")


@bp.route("/vector_stores/{vector_store_id}/files/{file_id}/chunks", methods=["GET"])
@accepts(limit=INTEGER, after=INTEGER)
def list_file_chunks(vector_store_id: str, file_id: str) -> dict:
    """Engram's: a page of the file's chunks as they are searched, in file order (``limit`` 1..100, default 20;
    ``after``: the ``index`` of the last chunk of the previous page) → ``{"object": "list", "data":
    [vector_store.file.chunk], "first_id", "last_id" (chunk indexes), "has_more"}``; empty for a file that is not
    ``completed``.

    Raises:
        NotFoundError: no such store, or the file is not attached to it.
        InvalidRequestError: ``limit`` out of range, ``after`` negative.
    """
    params = request.query(bp.current_request)
    limit = params.get("limit", 20)
    if not 1 <= limit <= 100:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and 100, got {limit}.", param="limit",
                                  code="invalid_value")
    after = params.get("after", -1)
    if "after" in params and after < 0:
        raise InvalidRequestError("Invalid 'after': expected the index (0 or more) of a chunk.", param="after",
                                  code="invalid_value")
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        attachments.get(conn, tenant, vector_store_id, _file(file_id))
        rows, has_more = chunks.file_chunks(conn, tenant, vector_store_id, file_id, after=after, limit=limit)
    data = [objects.chunk_object(row) for row in rows]
    return {"object": "list", "data": data, "first_id": data[0]["index"] if data else None,
            "last_id": data[-1]["index"] if data else None, "has_more": has_more}


def _body(row, details: bool) -> dict:
    body = objects.store_file_object(row)
    if details:
        body["details"] = objects.store_file_details(row)
    return body


def _file(value: str) -> str:
    return file_id(value)


@bp.route("/vector_stores/{vector_store_id}/files/{file_id}", methods=["POST"])
def update_vector_store_file(vector_store_id: str, file_id: str) -> Response:
    """``vector_stores.files.update(file_id, vector_store_id=, attributes=)``: replaces the attributes on the file
    and on its chunks, so filters and search results see them at once."""
    body = request.validate(UpdateVectorStoreFile, request.json_body(bp.current_request))
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        row = attachments.update_attributes(conn, tenant, vector_store_id, _file(file_id), body.attributes or {})
        sync_vector_index(conn, store_id=vector_store_id, file_id=file_id)
        return _object(row)


@bp.route("/vector_stores/{vector_store_id}/files/{file_id}", methods=["DELETE"])
def delete_vector_store_file(vector_store_id: str, file_id: str) -> dict:
    """``vector_stores.files.delete(file_id, vector_store_id=)``: detaches (chunks go); the File stays.

    Raises:
        NotFoundError: the file is not attached to the store.
    """
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        attachments.get(conn, tenant, vector_store_id, _file(file_id))
        attachments.detach(conn, tenant, vector_store_id, file_id)
        sync_vector_index(conn, store_id=vector_store_id, file_id=file_id)
    return objects.deleted(file_id, "vector_store.file.deleted")


@bp.route("/vector_stores/{vector_store_id}/files/{file_id}/content", methods=["GET"])
def vector_store_file_content(vector_store_id: str, file_id: str) -> dict:
    """``vector_stores.files.content(file_id, vector_store_id=)`` → ``vector_store.file_content.page`` holding the
    file's parsed text as one item (empty for a file that is not ``completed``), put back together from its chunks
    (:func:`chalicelib.store.chunks.file_text`): the API never parses."""
    tenant = current_tenant()
    with tenant_db() as conn:
        vector_stores.get(conn, tenant, store_id(vector_store_id))
        row = attachments.get(conn, tenant, vector_store_id, _file(file_id))
        text = chunks.file_text(conn, tenant, vector_store_id, row.file_id) if row.status == "completed" else ""
    items = [{"type": "text", "text": text}] if text else []
    return {"object": "vector_store.file_content.page", "data": items, "has_more": False, "next_page": None}
