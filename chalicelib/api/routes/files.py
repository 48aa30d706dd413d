"""Files API: ``/v1/files`` (OPENAI-COMPAT.md §1)."""

from __future__ import annotations

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import multipart, objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.query import PAGE_FORWARD, accepts, choice
from chalicelib.api.routes.common import file_id as checked_file_id
from chalicelib.api.routes.common import respond, sync_vector_index
from chalicelib.api.schemas import FileExpiresAfterForm
from chalicelib.errors import InvalidRequestError, PayloadTooLargeError
from chalicelib.store import files as file_rows
from chalicelib.store import tenants
from chalicelib.wire import FILE_PURPOSES

bp = Blueprint(__name__)

# Create-side purposes the Files API accepts.
PURPOSES = FILE_PURPOSES
# Purposes a list may filter on (the create-side ones plus OpenAI's output purposes).
LIST_PURPOSES: tuple[str, ...] = PURPOSES + ("assistants_output", "batch_output", "fine-tune-results")
MAX_FILENAME_CHARS = 255
# GET /files: limit 1..10,000, default 10,000 (OpenAI).
FILES_MAX_LIMIT = 10_000


@bp.route("/files", methods=["POST"], content_types=["multipart/form-data"])
def create_file() -> Response:
    """``files.create(file=..., purpose=..., expires_after=...)`` → a ``file`` object."""
    req = bp.current_request
    form = multipart.parse(req.headers.get("content-type"), request.raw_body(req))
    upload = form.files.get("file")
    if upload is None:
        raise InvalidRequestError("Missing required parameter: 'file'.", param="file",
                                  code="missing_required_parameter")
    purpose = form.fields.get("purpose")
    if not purpose:
        raise InvalidRequestError("Missing required parameter: 'purpose'.", param="purpose",
                                  code="missing_required_parameter")
    if purpose not in PURPOSES:
        raise InvalidRequestError(f"Invalid 'purpose': expected one of {', '.join(PURPOSES)}.", param="purpose",
                                  code="invalid_value")
    expires_in = _expires_in(form.fields)
    filename = _filename(upload.filename)
    config = deps.current_settings()
    with tenant_db() as conn:
        limit, source = tenants.max_file_bytes(conn, current_tenant(), config.max_file_bytes)
        if len(upload.data) > limit:
            raise PayloadTooLargeError(f"File is {len(upload.data):,} bytes; {source} is {limit:,} bytes.",
                                       param="file")
        row = file_rows.create_file(conn, current_tenant(), filename=filename, data=upload.data, purpose=purpose,
                                    expires_in_s=expires_in, blobs=file_rows.content_blobs(deps.blob_store(config)))
    return respond(objects.file_object(row))


def _filename(raw: str) -> str:
    name = raw.replace("\\", "/").rsplit("/", 1)[-1].replace("\x00", "").strip()
    if not name:
        raise InvalidRequestError("The uploaded file has no file name.", param="file", code="invalid_value")
    return name[:MAX_FILENAME_CHARS]


def _expires_in(fields: dict[str, str]) -> float | None:
    anchor, seconds = fields.get("expires_after[anchor]"), fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    sent = {name: value for name, value in (("anchor", anchor), ("seconds", seconds)) if value is not None}
    value = request.validate(FileExpiresAfterForm, {"expires_after": sent}).expires_after
    return float(value.seconds)


@bp.route("/files", methods=["GET"])
@accepts(purpose=choice(*LIST_PURPOSES), **PAGE_FORWARD)
def list_files() -> dict:
    """``files.list(purpose=, limit=, order=, after=)`` → a cursor page of ``file`` objects."""
    params = request.query(bp.current_request)
    page = request.page(params, prefix=ids.FILE, default_limit=FILES_MAX_LIMIT, max_limit=FILES_MAX_LIMIT, before=False)
    purpose = params.get("purpose")
    with tenant_db() as conn:
        rows, has_more = file_rows.list_files(conn, current_tenant(), page, purpose=purpose)
    return objects.cursor_page([objects.file_object(r) for r in rows], has_more)


@bp.route("/files/{file_id}", methods=["GET"])
def retrieve_file(file_id: str) -> dict:
    """``files.retrieve(id)``."""
    with tenant_db() as conn:
        return objects.file_object(file_rows.get_file(conn, current_tenant(), checked_file_id(file_id)))


@bp.route("/files/{file_id}/content", methods=["GET"])
def file_content(file_id: str) -> Response:
    """``files.content(id)``: the raw bytes (``application/octet-stream``)."""
    with tenant_db() as conn:
        data = file_rows.get_content(conn, current_tenant(), checked_file_id(file_id))
    return Response(body=data, status_code=200, headers={"Content-Type": "application/octet-stream"})


@bp.route("/files/{file_id}", methods=["DELETE"])
def delete_file(file_id: str) -> dict:
    """``files.delete(id)``: the file is removed from every vector store it was attached to, with its chunks.

    Raises:
        NotFoundError: no such file.
    """
    tenant = current_tenant()
    with tenant_db() as conn:
        file_rows.get_file(conn, tenant, checked_file_id(file_id))
        file_rows.delete_file(conn, tenant, file_id)
        sync_vector_index(conn, tenant_id=tenant, file_id=file_id)
    return objects.deleted(file_id, "file")
