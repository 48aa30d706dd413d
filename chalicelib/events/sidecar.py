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

# Typed-value fields of the Bedrock format, by "type".
_TYPED = {"STRING": "stringValue", "NUMBER": "numberValue", "BOOLEAN": "booleanValue"}


def parse(data: bytes) -> dict[str, Any]:
    """The attributes a sidecar's bytes set (``{}`` for an empty ``metadataAttributes``).

    Raises:
        InvalidRequestError: not UTF-8 JSON, no ``metadataAttributes`` object, a value of another kind (lists are
            not attributes in OpenAI's API), or beyond OpenAI's limits (code ``invalid_metadata``).
    """
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _error(f"the sidecar is not UTF-8 JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("metadataAttributes"), dict):
        raise _error('the sidecar must be {"metadataAttributes": {...}}')
    attributes = {key: _value(key, value) for key, value in document["metadataAttributes"].items()}
    return _validated(attributes)


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


def _error(message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid sidecar metadata: {message}.", param="metadataAttributes",
                               code="invalid_metadata")
