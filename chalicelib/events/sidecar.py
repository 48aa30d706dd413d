"""Sidecar metadata files: ``<file>.metadata.json`` next to a dropped file sets that file's attributes.

The format is Amazon Bedrock Knowledge Bases' ("Include metadata in a data source to improve knowledge base
query"): ``{"metadataAttributes": {"genre": "fiction", "year": 1999, "draft": false}}``, values also accepted in
the typed form ``{"value": {"type": "STRING", "stringValue": "fiction"}, "includeForEmbedding": true}``. Attributes
follow OpenAI's vector-store-file limits (≤ 16 pairs, keys ≤ 64 characters, strings ≤ 512 characters; values
strings, numbers or booleans), checked by the API's own schema.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import check_storable

# Typed-value fields of the Bedrock format, by "type".
_TYPED = {"STRING": "stringValue", "NUMBER": "numberValue", "BOOLEAN": "booleanValue"}


def parse(data: bytes) -> dict[str, Any]:
    """The attributes a sidecar's bytes set (``{}`` for an empty ``metadataAttributes``).

    Every problem is the sidecar's, found here before anything is stored, so it is recorded at once as
    ``invalid_metadata`` — never retried as if the database had failed (a NUL or a non-finite number reaching
    jsonb would fail the write on every redelivery).

    Raises:
        InvalidRequestError: (code ``invalid_metadata``) not UTF-8 JSON (``NaN``/``Infinity`` literals
            included), nested too deeply, no ``metadataAttributes`` object, a value of another kind (lists are not
            attributes in OpenAI's API), a string or key the database cannot hold (NUL, lone surrogates), a number
            beyond a double's range (``1e400``), or beyond OpenAI's limits.
    """
    try:
        document = json.loads(data.decode("utf-8-sig"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _error(f"the sidecar is not UTF-8 JSON ({exc})") from None
    except RecursionError:
        raise _error("the sidecar is nested too deeply") from None
    if not isinstance(document, dict) or not isinstance(document.get("metadataAttributes"), dict):
        raise _error('the sidecar must be {"metadataAttributes": {...}}')
    attributes = {key: _value(key, value) for key, value in document["metadataAttributes"].items()}
    try:
        check_storable(attributes, "metadataAttributes")
    except InvalidRequestError as exc:
        raise _error(exc.message.removeprefix("Invalid ").rstrip("."), param=exc.param) from None
    return _validated(attributes)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _value(key: str, value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        typed = value["value"]
        field = _TYPED.get(str(typed.get("type", "")).upper())
        if field is None or field not in typed:
            raise _error(f"attribute {key!r}: unsupported typed value {typed!r}")
        value = typed[field]
    if isinstance(value, (str, bool, int, float)):
        return value
    raise _error(f"attribute {key!r}: values must be strings, numbers or booleans, got {type(value).__name__}")


def _validated(attributes: dict[str, Any]) -> dict[str, Any]:
    from pydantic import TypeAdapter, ValidationError

    from chalicelib.wire import Attributes

    try:
        return TypeAdapter(Attributes).validate_python(attributes)
    except ValidationError as exc:
        raise _error("; ".join(e["msg"] for e in exc.errors())) from None


def _error(message: str, *, param: str | None = None) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid sidecar metadata: {message}.", param=param or "metadataAttributes",
                               code="invalid_metadata")
