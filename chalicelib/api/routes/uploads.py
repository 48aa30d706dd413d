"""Uploads API: ``/v1/uploads`` — a file larger than one request sent in parts, then used like any File.

``POST /uploads`` → ``upload`` (pending, expires in an hour); ``POST /uploads/{id}/parts`` (multipart field
``data``) → ``upload.part``; ``POST /uploads/{id}/complete`` (``part_ids`` in file order, optional ``md5``) →
``upload`` with the new ``file``; ``POST /uploads/{id}/cancel``. Each request stays within API Gateway's cap
(``settings.max_request_bytes``), so a part is at most that large.
"""

from __future__ import annotations

from typing import Any

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import multipart, objects, request
from chalicelib.api.context import current_tenant, tenant_db
from chalicelib.api.routes.common import respond
from chalicelib.api.upload_schemas import MAX_FILENAME_CHARS, CompleteUpload, CreateUpload
from chalicelib.errors import InvalidRequestError
from chalicelib.store import tenants, uploads

bp = Blueprint(__name__)


def upload_object(upload: uploads.Upload) -> dict[str, Any]:
    """An ``upload`` object; ``file`` is the File object once completed, else null."""
    return {"id": upload.id, "object": "upload", "bytes": upload.bytes, "created_at": objects.unix(upload.created_at),
            "filename": upload.filename, "purpose": upload.purpose, "status": upload.status,
            "expires_at": objects.unix(upload.expires_at),
            "file": objects.file_object(upload.file) if upload.file is not None else None}


def part_object(part: uploads.UploadPart) -> dict[str, Any]:
    """An ``upload.part`` object."""
    return {"id": part.id, "object": "upload.part", "created_at": objects.unix(part.created_at),
            "upload_id": part.upload_id}


def _upload_id(value: str) -> str:
    return ids.validate_id(value, ids.UPLOAD, param="upload_id")


def _filename(raw: str) -> str:
    # As the Files API: the last path component, without NULs, at most 255 characters.
    name = raw.replace("\\", "/").rsplit("/", 1)[-1].replace("\x00", "").strip()
    if not name:
        raise InvalidRequestError("Invalid 'filename': it names no file.", param="filename", code="invalid_value")
    return name[:MAX_FILENAME_CHARS]


@bp.route("/uploads", methods=["POST"])
def create_upload() -> Response:
    """``uploads.create(bytes=, filename=, mime_type=, purpose=, expires_after=)`` → a pending ``upload``.

    Raises:
        InvalidRequestError: a missing or malformed field, or a purpose the Files API does not accept.
        PayloadTooLargeError: ``bytes`` exceeds ``settings.max_file_bytes``.
    """
    body = request.validate(CreateUpload, request.json_body(bp.current_request))
    expires = body.expires_after.seconds if body.expires_after is not None else None
    with tenant_db() as conn:
        limit, _ = tenants.max_file_bytes(conn, current_tenant(), deps.current_settings().max_file_bytes)
        upload = uploads.create(conn, current_tenant(), filename=_filename(body.filename), purpose=body.purpose,
                                bytes=body.bytes, mime_type=body.mime_type, max_bytes=limit,
                                file_expires_after_s=expires)
    return respond(upload_object(upload))


@bp.route("/uploads/{upload_id}/parts", methods=["POST"], content_types=["multipart/form-data"])
def add_upload_part(upload_id: str) -> Response:
    """``uploads.parts.create(upload_id, data=...)`` → an ``upload.part``.

    Raises:
        PayloadTooLargeError: the request exceeds ``settings.max_request_bytes``.
        InvalidRequestError: no ``data`` part, or the upload is not pending (completed, cancelled, expired).
        NotFoundError: no such upload for this tenant.
    """
    req = bp.current_request
    form = multipart.parse(req.headers.get("content-type"), request.raw_body(req))
    part = form.files.get("data")
    if part is None:
        raise InvalidRequestError("Missing required parameter: 'data'.", param="data",
                                  code="missing_required_parameter")
    checked = _upload_id(upload_id)
    with tenant_db() as conn:
        row = uploads.add_part(conn, deps.blob_store(), current_tenant(), checked, part.data)
    return respond(part_object(row))


@bp.route("/uploads/{upload_id}/complete", methods=["POST"])
def complete_upload(upload_id: str) -> Response:
    """``uploads.complete(upload_id, part_ids=, md5=)`` → the completed ``upload`` with its ``file``.

    Raises:
        InvalidRequestError: a malformed or unknown part id, a size or MD5 mismatch, or the upload is not pending.
        NotFoundError: no such upload for this tenant.
    """
    body = request.validate(CompleteUpload, request.json_body(bp.current_request))
    part_ids = [ids.validate_id(p, ids.UPLOAD_PART, param=f"part_ids[{i}]") for i, p in enumerate(body.part_ids)]
    checked = _upload_id(upload_id)
    with tenant_db() as conn:
        upload = uploads.complete(conn, deps.blob_store(), current_tenant(), checked, part_ids,
                                  md5=body.md5)
    return respond(upload_object(upload))


@bp.route("/uploads/{upload_id}/cancel", methods=["POST"])
def cancel_upload(upload_id: str) -> Response:
    """``uploads.cancel(upload_id)`` → the ``upload``, status ``cancelled``; its parts are discarded.

    Raises:
        InvalidRequestError: the upload is already completed, cancelled or expired.
        NotFoundError: no such upload for this tenant.
    """
    checked = _upload_id(upload_id)
    with tenant_db() as conn:
        upload = uploads.cancel(conn, deps.blob_store(), current_tenant(), checked)
    return respond(upload_object(upload))
