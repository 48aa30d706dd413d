"""Reading a request: its JSON body, query parameters and multipart form, with OpenAI-style 400s.

Every helper raises :class:`~chalicelib.errors.InvalidRequestError` (400, naming the offending ``param``) or
:class:`~chalicelib.errors.PayloadTooLargeError` (413) — never lets a client mistake become a 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib import deps, ids
from chalicelib.api.query import Query, parsed
from chalicelib.errors import InvalidRequestError, PayloadTooLargeError
from chalicelib.store.paging import Page
from chalicelib.validation import parse_json_object, validate

__all__ = ["includes", "json_body", "page", "query", "raw_body", "validate"]


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


def query(request) -> Query:
    """The request's parsed query parameters (:mod:`chalicelib.api.query`: declared by its route, typed, each
    scalar given once and non-empty)."""
    return parsed(request)


def includes(params: Query, allowed: tuple[str, ...]) -> frozenset[str]:
    """The values of the ``include`` array parameter (declared ``include=ARRAY``), each one of ``allowed``.

    Raises:
        InvalidRequestError: (400, ``invalid_value``, param ``include``) a value not in ``allowed``.
    """
    values = params.array("include")
    for value in values:
        if value not in allowed:
            raise InvalidRequestError(f"Invalid 'include': {value[:64]!r} is not one of {', '.join(allowed)}.",
                                      param="include", code="invalid_value")
    return frozenset(values)


def page(params: Mapping[str, Any], *, prefix: str | None, default_limit: int = 20, max_limit: int = 100,
         before: bool = True) -> Page:
    """The cursor :class:`~chalicelib.store.paging.Page` from parsed ``limit`` (1..max), ``order`` (``asc|desc``,
    default ``desc``), ``after`` and ``before`` (declared as :data:`~chalicelib.api.query.PAGE`). ``prefix``: the
    id prefix of the list's objects (``vs_``): a cursor must be such an id (:func:`chalicelib.ids.validate_cursor`);
    None for lists ordered by position (a conversation's items), whose store checks the cursor names an item.

    Raises:
        InvalidRequestError: a value out of range or not a cursor of this list (``param`` names it).
    """
    limit = params.get("limit")
    if limit is None:
        limit = default_limit
    elif not 1 <= limit <= max_limit:
        raise InvalidRequestError(f"Invalid 'limit': must be between 1 and {max_limit}, got {limit}.",
                                  param="limit", code="invalid_value")
    after = _cursor(params, "after", prefix)
    before_id = _cursor(params, "before", prefix) if before else None
    return Page(limit=limit, order=params.get("order") or "desc", after=after, before=before_id)


def _cursor(params: Mapping[str, Any], name: str, prefix: str | None) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if prefix is not None:
        return ids.validate_cursor(value, prefix, param=name)
    if len(value) > 128 or not value.isascii() or not value.replace("-", "").replace("_", "").isalnum():
        raise InvalidRequestError(f"Invalid '{name}': not an object id.", param=name, code="invalid_value")
    return value
