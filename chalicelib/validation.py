"""Checking what clients send, in one place for every path (the HTTP routes, the streaming front, the SDK's
``extra_body`` extensions): JSON bodies decoded into storable values, and pydantic models applied with OpenAI's
400s — its ``code`` and its ``param`` path — so every route, present and future, answers alike.

- :class:`RequestBody` is the base of every request-body model: strict types, and a field the model does not
  declare is refused (``Unknown parameter: 'top_k'.``, code ``unknown_parameter``). Fields a client may send but
  Engram does not use are declared (accepted and ignored), never silently dropped by the base.
- :func:`validate` applies a model and turns pydantic's first error into OpenAI's wording and codes
  (:data:`CODES`); :func:`validate_tagged` does the same for a union told apart by its ``type`` field.
- :func:`param_path` writes a ``param`` the way OpenAI does: dots for fields, brackets for list indexes
  (``input[4].content[0].text``, ``file_ids[3]``). Hand-written errors build their ``param`` with it.
- :func:`parse_json_object` / :func:`check_storable` refuse what the database cannot hold (NUL, lone surrogates,
  non-finite numbers, absurd nesting) before any work starts.

Nothing here knows HTTP: callers hand over bytes or parsed values and get
:class:`~chalicelib.errors.InvalidRequestError` (400) for every client mistake — never a 500 from a value Postgres
or the JSON encoder cannot hold.

Wording and codes follow the errors OpenAI's API returns, as quoted in public bug reports (OPENAI-COMPAT.md,
appendix): ``Invalid 'n': integer above maximum value. Expected a value <= 128, but got 130 instead.``,
``Invalid type for 'max_tokens': expected an integer, but got a decimal number instead.``, ``Invalid value:
'input_image'. Supported values are: 'output_text' and 'refusal'.``, ``Invalid 'input[95].call_id': string too
long. Expected a string with maximum length 64, but got a string with length 116 instead.``
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic
from pydantic import ConfigDict

from chalicelib.errors import InvalidRequestError

__all__ = ["CODES", "MAX_JSON_DEPTH", "RequestBody", "check_storable", "invalid_type", "json_kind", "param_path",
           "parse_json_object", "supported_values", "unknown_parameter", "validate", "validate_tagged"]

Model = TypeVar("Model", bound=pydantic.BaseModel)

# OpenAI's wording for a body that is not JSON (what its API answers, code ``invalid_json``).
_BAD_JSON = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
             "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
# JSON nesting deeper than this is refused (compound filters nest; nothing legitimate goes this deep).
MAX_JSON_DEPTH = 32
# Characters Postgres text and jsonb cannot hold: U+0000, and lone surrogates (JSON "\ud800" escapes), which
# have no UTF-8 encoding.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The validation codes Engram answers with (400, type invalid_request_error): OpenAI's names, the README's table.
CODES = frozenset({
    "unknown_parameter", "missing_required_parameter", "invalid_type", "invalid_value", "invalid_json",
    "integer_above_max_value", "integer_below_min_value", "decimal_above_max_value", "decimal_below_min_value",
    "string_above_max_length", "string_below_min_length", "empty_string", "array_above_max_length",
    "array_below_min_length", "empty_array"})
# How long an echoed client value may be in a message (characters).
_ECHO_CHARS = 64
# The values pydantic lists in a literal or tag error ("'a', 'b' or 'c'").
_QUOTED = re.compile(r"'([^']*)'")


class RequestBody(pydantic.BaseModel):
    """Base of every request-body model: strict types (no ``"5"`` for 5) and no undeclared fields — an unknown
    one is a 400 ``unknown_parameter`` naming its path (``tools[0].frobnicate``). Subclasses declare every field
    the official SDK may send for their route, used or not, so no SDK call is ever refused."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


def param_path(*parts: str | int | None) -> str:
    """A ``param`` as OpenAI writes it: ``param_path("tools", 0, "type")`` → ``tools[0].type``. A part may itself
    be a path (``param_path("input[2]", "content")`` → ``input[2].content``); None and empty parts are skipped."""
    out = ""
    for part in parts:
        if part is None or part == "":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out or part.startswith("["):
            out += part
        else:
            out += "." + part
    return out


def unknown_parameter(param: str) -> InvalidRequestError:
    """The 400 for a field no model declares (OpenAI's message and code)."""
    return InvalidRequestError(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")


def invalid_type(param: str, expected: str, value: Any) -> InvalidRequestError:
    """The 400 for a value of the wrong JSON type: ``expected`` as OpenAI words it (``"an object"``)."""
    return InvalidRequestError(f"Invalid type for '{param}': expected {expected}, but got {json_kind(value)} "
                               "instead.", param=param, code="invalid_type")


def supported_values(values: list[str] | tuple[str, ...]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b', and 'c'`` — how OpenAI lists the values it accepts."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


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
        raise InvalidRequestError(f"The request body is nested too deeply (more than {MAX_JSON_DEPTH} levels).",
                                  param=path or None, code="invalid_value")
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
    """``data`` (parsed JSON) checked against the pydantic ``model``; ``prefix`` is the path of ``data`` in the
    request (e.g. ``memory``, ``tools[0]``) for a nested object checked on its own.

    Raises:
        InvalidRequestError: the first problem, in OpenAI's terms: ``code`` one of :data:`CODES`, ``param`` the
            path of the field (``chunking_strategy.static.max_chunk_size_tokens``, ``input[1].content[0].text``).
    """
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _translate(exc, data, prefix) from None
    except RecursionError:
        raise InvalidRequestError("The request body is nested too deeply.", param=prefix,
                                  code="invalid_value") from None


def validate_tagged(models: Mapping[str, type[pydantic.BaseModel]], data: Any, *, prefix: str, tag: str = "type",
                    default: str | None = None) -> Any:
    """``data`` checked against the model its ``tag`` field names (``{"type": "function", ...}`` →
    ``models["function"]``), an instance of that model; ``default`` is the tag assumed when the field is absent
    (None: it is required).

    Raises:
        InvalidRequestError: ``data`` is not an object (``invalid_type``), the tag is missing
            (``missing_required_parameter``) or not one of ``models`` (``invalid_value``, ``param``
            ``<prefix>.type``), or what :func:`validate` raises for that model.
    """
    if not isinstance(data, dict):
        raise invalid_type(prefix, "an object", data)
    param = param_path(prefix, tag)
    kind = data.get(tag, default)
    if kind is None:
        raise InvalidRequestError(f"Missing required parameter: '{param}'.", param=param,
                                  code="missing_required_parameter")
    model = models.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InvalidRequestError(f"Invalid value: {_echo(kind)}. Supported values are: "
                                  f"{supported_values(list(models))}.", param=param, code="invalid_value")
    return validate(model, data, prefix=prefix)


# ---- pydantic's errors in OpenAI's terms ----

_EXPECTED = {"string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
             "int_from_float": "an integer", "float_type": "a number", "float_parsing": "a number",
             "bool_type": "a boolean", "bool_parsing": "a boolean", "dict_type": "an object",
             "model_type": "an object", "model_attributes_type": "an object", "list_type": "an array",
             "tuple_type": "an array", "none_required": "null", "bytes_type": "a string"}
_BOUNDS = {"greater_than_equal": ("below_min", ">=", "ge"), "greater_than": ("below_min", ">", "gt"),
           "less_than_equal": ("above_max", "<=", "le"), "less_than": ("above_max", "<", "lt")}


def _translate(exc: pydantic.ValidationError, data: Any, prefix: str | None) -> InvalidRequestError:
    """The first problem of ``exc`` as an :class:`InvalidRequestError` (see :func:`validate`)."""
    errors = [(_path(error.get("loc", ()), data, error.get("type", "")), error)
              for error in exc.errors(include_url=False)]
    field = errors[0][0]
    # A union reports one error per member; the member the value fits best says what is really wrong: a
    # problem other than the type (an empty list sent for "a string or a list" is too short, not "not a string"),
    # else the deepest one (["x", 1] for "a list of strings" fails at [1], not at the list).
    group = [(p, e) for p, e in errors if p[:len(field)] == field]
    path, error = max(group, key=lambda pe: (pe[1].get("type") not in _EXPECTED, len(pe[0])))
    kind = str(error.get("type", ""))
    if kind in ("union_tag_invalid", "union_tag_not_found"):  # a discriminated union: the fault is its tag field
        path = [*path, str((error.get("ctx") or {}).get("discriminator", "type")).strip("'")]
    param = param_path(prefix, *path) or None
    if kind in _EXPECTED:
        expected = list(dict.fromkeys(_EXPECTED[e.get("type", "")] for p, e in group
                                      if p == path and e.get("type") in _EXPECTED))
        return _type_error(param, expected, error.get("input"))
    message, code = _wording(kind, error, param)
    return InvalidRequestError(message, param=param, code=code)


def _wording(kind: str, error: Any, param: str | None) -> tuple[str, str]:
    """(message, code) for one pydantic error of type ``kind`` at ``param``."""
    ctx, value = error.get("ctx") or {}, error.get("input")
    where = f"Invalid '{param}'" if param else "Invalid request"
    if kind == "union_tag_invalid":
        choices = _QUOTED.findall(str(ctx.get("expected_tags", "")))
        return f"Invalid value: {_echo(ctx.get('tag'))}. Supported values are: {supported_values(choices)}.", \
            "invalid_value"
    if kind in ("missing", "union_tag_not_found"):
        return f"Missing required parameter: '{param}'.", "missing_required_parameter"
    if kind == "extra_forbidden":
        return f"Unknown parameter: '{param}'.", "unknown_parameter"
    if kind in _BOUNDS:
        side, op, key = _BOUNDS[kind]
        # A float field declares float bounds (le=2.0): "decimal" even when the value sent is a whole number.
        number = "decimal" if isinstance(value, float) or isinstance(ctx.get(key), float) else "integer"
        words = "above maximum" if side == "above_max" else "below minimum"
        return (f"{where}: {number} {words} value. Expected a value {op} {_number(ctx.get(key))}, but got "
                f"{_number(value)} instead.", f"{number}_{side}_value")
    if kind == "string_too_long":
        return (f"{where}: string too long. Expected a string with maximum length {ctx.get('max_length')}, but got "
                f"a string with length {_length(value)} instead.", "string_above_max_length")
    if kind == "string_too_short":
        if value == "":
            return (f"{where}: empty string. Expected a string with minimum length {ctx.get('min_length')}, but got "
                    "an empty string instead.", "empty_string")
        return (f"{where}: string too short. Expected a string with minimum length {ctx.get('min_length')}, but "
                f"got a string with length {_length(value)} instead.", "string_below_min_length")
    if kind == "too_long":
        what = "object" if isinstance(value, dict) else "array"
        return (f"{where}: {what} too long. Expected an {what} with maximum length {ctx.get('max_length')}, but got "
                f"an {what} with length {ctx.get('actual_length', _length(value))} instead.",
                "array_above_max_length")
    if kind == "too_short":
        what = "object" if isinstance(value, dict) else "array"
        if not value:
            return (f"{where}: empty {what}. Expected an {what} with minimum length {ctx.get('min_length')}, but got "
                    f"an empty {what} instead.", "empty_array")
        return (f"{where}: {what} too short. Expected an {what} with minimum length {ctx.get('min_length')}, but "
                f"got an {what} with length {ctx.get('actual_length', _length(value))} instead.",
                "array_below_min_length")
    if kind == "literal_error":
        choices = _QUOTED.findall(str(ctx.get("expected", "")))
        return f"Invalid value: {_echo(value)}. Supported values are: {supported_values(choices)}.", "invalid_value"
    if kind == "string_pattern_mismatch":
        return (f"{where}: string does not match pattern. Expected a string that matches the pattern "
                f"'{ctx.get('pattern')}'.", "invalid_value")
    if kind in CODES:  # a validator's PydanticCustomError carrying one of OpenAI's codes
        return str(error.get("msg", "")), kind
    message = str(error.get("msg") or "invalid value")
    for lead in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(lead)
    return (f"{where}: {message.rstrip('.')}." if param else f"{message[:1].upper()}{message[1:].rstrip('.')}."), \
        "invalid_value"


def _type_error(param: str | None, expected: list[str], value: Any) -> InvalidRequestError:
    wanted = expected[0] if len(expected) == 1 else f"one of {', '.join(expected[:-1])} or {expected[-1]}"
    where = f"'{param}'" if param else "the request body"
    return InvalidRequestError(f"Invalid type for {where}: expected {wanted}, but got {json_kind(value)} instead.",
                               param=param, code="invalid_type")


def _path(loc: tuple[Any, ...], data: Any, kind: str) -> list[str | int]:
    """The parts of pydantic's error location that name something in ``data``: pydantic also inserts the names of
    union members (``str``, ``list[str]``, ``constrained-str``, a model's name), which no client sent. A part is
    kept when it is a key or index of the data at that point; past the data (a missing field, a value that is
    not a container) only a missing field's name and unknown parts that cannot be member names are kept."""
    out: list[str | int] = []
    node, present = data, True
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if present and _holds(node, part):
            out.append(part)
            node = node[part]
        elif last and kind in ("missing", "union_tag_not_found"):
            out.append(part)
        elif isinstance(node, (dict, list)) and present:
            continue  # a union member's name: the value goes on being checked against that member
        elif not _is_union_tag(part):
            out.append(part)
            present = False
    return out


def _holds(node: Any, part: Any) -> bool:
    """Whether ``part`` is a key of the object or an index of the array ``node``."""
    if isinstance(node, dict):
        return isinstance(part, str) and part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _is_union_tag(part: Any) -> bool:
    # pydantic's names of union members ("str", "list[str]", "function-after[...]", "constrained-str", a model).
    return isinstance(part, str) and (part in {"str", "int", "float", "bool", "none"} or "[" in part
                                      or part.startswith("constrained-") or part[:1].isupper())


def json_kind(value: Any) -> str:
    """How OpenAI names the JSON type of ``value`` in its messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value of another type"


def _echo(value: Any) -> str:
    """``value`` quoted for a message, at most :data:`_ECHO_CHARS` characters of it."""
    if isinstance(value, str):
        text = value if len(value) <= _ECHO_CHARS else value[:_ECHO_CHARS] + "…"
        return "'" + text.replace("'", "\\'") + "'"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS] + "…"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    text = str(value)
    return text if len(text) <= 32 else text[:16] + "…" + f" ({len(text)} digits)"


def _length(value: Any) -> int | str:
    try:
        return len(value)
    except TypeError:
        return "?"
