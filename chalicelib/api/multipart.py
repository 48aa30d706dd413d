"""``multipart/form-data`` bodies (Files API uploads, upload parts), parsed with python-multipart."""

from __future__ import annotations

import io
from dataclasses import dataclass

from chalicelib.errors import InvalidRequestError

# Bytes a file part may hold in memory before python-multipart spills it to a temporary file.
_MAX_MEMORY_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class UploadedFile:
    """A file part: the client's file name (may be empty) and its bytes."""

    filename: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Form:
    """A parsed form: text fields by name (the last value when repeated) and file parts by field name."""

    fields: dict[str, str]
    files: dict[str, UploadedFile]


def parse(content_type: str | None, body: bytes) -> Form:
    """Parse a multipart body. Field names keep their brackets (``expires_after[anchor]``).

    Raises:
        InvalidRequestError: not ``multipart/form-data``, no boundary, or a malformed body.
    """
    from python_multipart import parse_form
    from python_multipart.exceptions import FormParserError

    if not content_type or not content_type.lower().startswith("multipart/form-data"):
        raise InvalidRequestError("This endpoint expects a multipart/form-data body.", code="invalid_content_type")
    fields: dict[str, str] = {}
    files: dict[str, UploadedFile] = {}

    def on_field(field) -> None:
        name = (field.field_name or b"").decode("utf-8", "replace")
        fields[name] = (field.value or b"").decode("utf-8", "replace")

    def on_file(part) -> None:
        name = (part.field_name or b"").decode("utf-8", "replace")
        part.file_object.seek(0)
        raw_name = part.file_name or b""
        filename = raw_name.decode("utf-8", "replace") if isinstance(raw_name, bytes) else str(raw_name)
        files[name] = UploadedFile(filename=filename, data=part.file_object.read())

    headers = {"Content-Type": content_type.encode("latin-1", "replace"), "Content-Length": str(len(body)).encode()}
    try:
        parse_form(headers, io.BytesIO(body), on_field, on_file)
    except (FormParserError, ValueError, KeyError) as exc:
        raise InvalidRequestError(f"Malformed multipart/form-data body: {str(exc)[:200]}",
                                  code="invalid_multipart") from None
    return Form(fields=fields, files=files)
