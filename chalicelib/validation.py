"""Checking what clients send, in one place for every path (the HTTP routes, the streaming front, the SDK's
``extra_body`` extensions): JSON bodies decoded into storable values, and pydantic models applied with OpenAI-style
400s that name the offending field.

Nothing here knows HTTP: callers hand over bytes or parsed values and get
:class:`~chalicelib.errors.InvalidRequestError` (400) for every client mistake — never a 500 from a value Postgres
or the JSON encoder cannot hold.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeVar

import pydantic

from chalicelib.errors import InvalidRequestError

__all__ = ["MAX_JSON_DEPTH", "check_storable", "parse_json_object", "validate"]

Model = TypeVar("Model", bound=pydantic.BaseModel)

# OpenAI's wording for a body that is not JSON (what its API answers, code ``invalid_json``).
_BAD_JSON = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
             "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
# JSON nesting deeper than this is refused (compound filters nest; nothing legitimate goes this deep).
MAX_JSON_DEPTH = 32
# Characters Postgres text and jsonb cannot hold: U+0000, and lone surrogates (JSON "\ud800" escapes), which
# have no UTF-8 encoding.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def parse_json_object(body: bytes | str) -> dict[str, Any]:
    """The JSON object ``body`` holds (``{}`` for an empty body), checked with :func:`check_storable`.

    Raises:
        InvalidRequestError: (code ``invalid_json``) not valid JSON (``NaN``/``Infinity`` literals included), or
            not a JSON object; or what :func:`check_storable` raises.
    """
    if not body.strip():
        return {}
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise InvalidRequestError(_BAD_JSON, code="invalid_json") from None
    if not isinstance(value, dict):
        raise InvalidRequestError("The request body must be a JSON object.", code="invalid_json")
    check_storable(value)
    return value


def check_storable(value: Any, path: str = "") -> None:
    """Refuse, up front, values the database cannot store: strings or keys holding NUL (U+0000) or unpaired
    surrogates, non-finite numbers (``1e400`` decodes to infinity; jsonb has none) and nesting deeper than
    :data:`MAX_JSON_DEPTH`. ``path`` prefixes the ``param`` of the error (e.g. ``attributes``).

    Raises:
        InvalidRequestError: (code ``invalid_value``) the first such value, ``param`` its path (``a.b[2]``).
    """
    _check(value, path, 0)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check(value: Any, path: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidRequestError("The request body is nested too deeply.", param=path or None)
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            raise InvalidRequestError(f"Invalid '{path}': strings may not contain NUL (U+0000) characters or "
                                      "unpaired surrogates.", param=path or None, code="invalid_value")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequestError(f"Invalid '{path}': numbers must be finite (got a value beyond the range of "
                                      "a double).", param=path or None, code="invalid_value")
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if _UNSTORABLE.search(key):
                raise InvalidRequestError("Object keys may not contain NUL (U+0000) characters or unpaired "
                                          "surrogates.", param=path or None, code="invalid_value")
            _check(item, child, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)


def validate(model: type[Model], data: Any, *, prefix: str | None = None) -> Model:
    """``data`` checked against the pydantic ``model``; ``prefix`` is the path of ``data`` in the request (e.g.
    ``memory`` for a nested object checked on its own).

    Raises:
        InvalidRequestError: the first problem, with ``param`` the dotted path of the field (e.g.
            ``chunking_strategy.static.max_chunk_size_tokens``).
    """
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        message, param = _describe(exc, prefix)
        raise InvalidRequestError(message, param=param) from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.") from None


def _describe(exc: pydantic.ValidationError, prefix: str | None = None) -> tuple[str, str | None]:
    errors = exc.errors(include_url=False)
    error = errors[0]
    # A union reports one error per member; the member whose type the value has says what is really wrong
    # (an empty list sent for "a string or a list" is too short, not "not a string").
    field = _location(error)
    same_field = [e for e in errors if _location(e)[:len(field)] == field]
    error = next((e for e in same_field if not str(e.get("type", "")).endswith("_type")), error)
    loc = ([prefix] if prefix else []) + _location(error)
    param = ".".join(loc) or None
    message = error.get("msg", "Invalid value.")
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if error.get("type") == "missing":
        return f"Missing required parameter: '{param}'.", param
    return f"Invalid '{param}': {message}." if param else f"{message}.", param


def _location(error: Any) -> list[str]:
    return [str(part) for part in error.get("loc", ()) if not _is_union_tag(part)]


def _is_union_tag(part: Any) -> bool:
    # pydantic inserts union member names ("str", "list[str]", "function-after[...]", "constrained-str") into
    # error locations.
    return isinstance(part, str) and (part in {"str", "int", "float", "bool"} or "[" in part
                                      or part.startswith("constrained-"))
