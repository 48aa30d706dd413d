"""Reading a request: its JSON body, query parameters and multipart form, with OpenAI-style 400s.

Every helper raises :class:`~chalicelib.errors.InvalidRequestError` (400, naming the offending ``param``) or
:class:`~chalicelib.errors.PayloadTooLargeError` (413) — never lets a client mistake become a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import pydantic

from chalicelib import deps
from chalicelib.errors import InvalidRequestError, PayloadTooLargeError
from chalicelib.store.paging import Page

Model = TypeVar("Model", bound=pydantic.BaseModel)

_BAD_JSON = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
             "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")


def raw_body(request) -> bytes:
    """The request body as bytes (``b""`` when absent).

    Raises:
        PayloadTooLargeError: the body exceeds ``settings.max_request_bytes`` (API Gateway's cap).
    """
    body = request.raw_body or b""
    if isinstance(body, str):
        body = body.encode("utf-8")
    limit = deps.current_settings().max_request_bytes
    if len(body) > limit:
        raise PayloadTooLargeError(
            f"Request body is {len(body):,} bytes; the limit is {limit:,} bytes. Upload larger files in parts "
            "with the Uploads API (POST /v1/uploads).", param=None, code="request_too_large")
    return body


def json_body(request) -> dict[str, Any]:
    """The JSON object the request carries (``{}`` for an empty body).

    Raises:
        InvalidRequestError: the body is not valid JSON, or not a JSON object.
        PayloadTooLargeError: see :func:`raw_body`.
    """
    body = raw_body(request)
    if not body.strip():
        return {}
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise InvalidRequestError(_BAD_JSON, code="invalid_json") from None
    if not isinstance(value, dict):
        raise InvalidRequestError("The request body must be a JSON object.", code="invalid_json")
    _check_values(value, "", 0)
    return value


# JSON nesting deeper than this is refused (compound filters nest; nothing legitimate goes this deep).
MAX_JSON_DEPTH = 32


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Characters Postgres text and jsonb cannot hold: U+0000, and lone surrogates (JSON "\ud800" escapes), which
# have no UTF-8 encoding.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _check_values(value: Any, path: str, depth: int) -> None:
    # Refuse unstorable characters up front rather than fail in the database.
    if depth > MAX_JSON_DEPTH:
        raise InvalidRequestError("The request body is nested too deeply.", param=path or None)
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            raise InvalidRequestError(f"Invalid '{path}': strings may not contain NUL (U+0000) characters or "
                                      "unpaired surrogates.", param=path or None, code="invalid_value")
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if _UNSTORABLE.search(key):
                raise InvalidRequestError("Object keys may not contain NUL (U+0000) characters or unpaired "
                                          "surrogates.", param=path or None, code="invalid_value")
            _check_values(item, child, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_values(item, f"{path}[{index}]", depth + 1)


def validate(model: type[Model], data: Any) -> Model:
    """``data`` checked against the pydantic ``model`` (unknown fields ignored, as OpenAI does).

    Raises:
        InvalidRequestError: the first problem, with ``param`` the dotted path of the field (e.g.
            ``chunking_strategy.static.max_chunk_size_tokens``).
    """
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        message, param = _describe(exc)
        raise InvalidRequestError(message, param=param) from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.") from None


def _describe(exc: pydantic.ValidationError) -> tuple[str, str | None]:
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error.get("loc", ()) if not _is_union_tag(part)]
    param = ".".join(loc) or None
    message = error.get("msg", "Invalid value.")
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if error.get("type") == "missing":
        return f"Missing required parameter: '{param}'.", param
    return f"Invalid '{param}': {message}." if param else f"{message}.", param


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts union member names ("str", "list[str]", "function-after[...]") into error locations.
    return isinstance(part, str) and (part in {"str", "int", "float", "bool"} or "[" in part)


def query(request) -> dict[str, str]:
    """Query parameters, one value each (the last when repeated)."""
    return {k: v for k, v in (request.query_params or {}).items()}


def page(params: dict[str, str], *, default_limit: int = 20, max_limit: int = 100, before: bool = True) -> Page:
    """The cursor :class:`~chalicelib.store.paging.Page` from ``limit`` (1..max), ``order`` (``asc|desc``, default
    ``desc``), ``after`` and ``before``.

    Raises:
        InvalidRequestError: a value out of range or of the wrong kind (``param`` names it).
    """
    raw_limit = params.get("limit")
    if raw_limit is None or raw_limit == "":
        limit = default_limit
    else:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise InvalidRequestError(f"Invalid 'limit': expected an integer, got {raw_limit[:40]!r}.",
                                      param="limit", code="invalid_value") from None
        if not 1 <= limit <= max_limit:
            raise InvalidRequestError(f"Invalid 'limit': must be between 1 and {max_limit}, got {limit}.",
                                      param="limit", code="invalid_value")
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise InvalidRequestError(f"Invalid 'order': expected 'asc' or 'desc', got {order[:40]!r}.",
                                  param="order", code="invalid_value")
    after = _cursor(params, "after")
    before_id = _cursor(params, "before") if before else None
    return Page(limit=limit, order=order, after=after, before=before_id)


def _cursor(params: dict[str, str], name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if len(value) > 128 or not value.isascii() or not value.replace("-", "").replace("_", "").isalnum():
        raise InvalidRequestError(f"Invalid '{name}': not an object id.", param=name, code="invalid_value")
    return value


def choice(params: dict[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    """The query parameter ``name`` if present, checked against ``allowed``.

    Raises:
        InvalidRequestError: a value outside ``allowed``.
    """
    value = params.get(name)
    if value is None or value == "":
        return None
    if value not in allowed:
        raise InvalidRequestError(f"Invalid '{name}': expected one of {', '.join(allowed)}, got {value[:40]!r}.",
                                  param=name, code="invalid_value")
    return value
