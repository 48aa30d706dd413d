"""Reading a request: its JSON body, query parameters and multipart form, with OpenAI-style 400s.

Every helper raises :class:`~chalicelib.errors.InvalidRequestError` (400, naming the offending ``param``) or
:class:`~chalicelib.errors.PayloadTooLargeError` (413) — never lets a client mistake become a 500.
"""

from __future__ import annotations

from typing import Any, TypeVar

from chalicelib import deps
from chalicelib.errors import InvalidRequestError, PayloadTooLargeError
from chalicelib.store.paging import Page
from chalicelib.validation import parse_json_object, validate

__all__ = ["choice", "json_body", "page", "query", "raw_body", "repeated", "validate"]

OptionT = TypeVar("OptionT", bound=str)


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
    return parse_json_object(raw_body(request))


def query(request) -> dict[str, str]:
    """Query parameters, one value each (the last when repeated)."""
    return {k: v for k, v in (request.query_params or {}).items()}


def repeated(request, name: str) -> list[str]:
    """Every value of the query parameter ``name``, sent as ``name[]=a&name[]=b`` (the SDK's array format) or
    ``name=a&name=b``, in order."""
    params = request.query_params
    if not params:
        return []
    return [value for key in (f"{name}[]", name) if key in params for value in params.getlist(key)]


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


def choice(params: dict[str, str], name: str, allowed: tuple[OptionT, ...]) -> OptionT | None:
    """The query parameter ``name`` if present, checked against ``allowed`` (typed as they are, e.g. a tuple of
    a ``Literal``'s values).

    Raises:
        InvalidRequestError: a value outside ``allowed``.
    """
    value = params.get(name)
    if value is None or value == "":
        return None
    for option in allowed:
        if value == option:
            return option
    raise InvalidRequestError(f"Invalid '{name}': expected one of {', '.join(allowed)}, got {value[:40]!r}.",
                              param=name, code="invalid_value")
