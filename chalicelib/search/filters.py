"""Compile OpenAI attribute filters into parameterised SQL over ``chunks.attributes`` (jsonb).

Grammar (OpenAI vector-store search ``filters``, OPENAI-COMPAT.md §2):
    comparison := {"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key": str,
                   "value": str|number|bool|[str|number]}
    compound   := {"type": "and"|"or", "filters": [comparison|compound, ...]}
``type`` is required (as in the SDK's ``ComparisonFilter``); a field outside the grammar is refused
(``unknown_parameter``). Errors carry OpenAI's codes (:mod:`chalicelib.validation`). Keys and values only ever
travel as query parameters; the SQL text is built from fixed fragments, so no key or value can change the
statement.

Semantics: ``eq``/``in`` need the key present with an equal JSON value (numbers compare numerically);
``ne``/``nin`` also match chunks without the key; ``gt gte lt lte`` compare numbers with numbers and strings with
strings (a key of the other type does not match); booleans support only ``eq``/``ne``.
"""

from __future__ import annotations

import itertools
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import invalid_type, param_path, supported_values, unknown_parameter

# OpenAI: attribute keys are strings of at most 64 characters; at most 16 attributes per file.
MAX_KEY_LENGTH = 64
MAX_DEPTH = 8  # nesting of and/or
MAX_CONDITIONS = 64  # comparisons in one filter
MAX_IN_VALUES = 256
MAX_STRING_VALUE = 512  # characters; OpenAI attribute string values are at most 512

_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_TYPES = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "and", "or")
# The fields of each kind of filter (SDK ComparisonFilter, CompoundFilter); any other is a 400 unknown_parameter.
_COMPARISON_FIELDS = frozenset({"type", "key", "value"})
_COMPOUND_FIELDS = frozenset({"type", "filters"})


class CompiledFilter:
    """A SQL boolean expression over ``chunks`` (alias-free) and its named parameters; ``source`` is the validated
    filter it was compiled from (other backends compile it to their own language)."""

    def __init__(self, expression: sql.Composable, params: dict[str, Any], source: Any = None) -> None:
        self.expression = expression
        self.params = params
        self.source = source


def compile_filter(filters: Any, *, param: str = "filters", column: str = "attributes") -> CompiledFilter | None:
    """``filters`` (parsed JSON, or None) → :class:`CompiledFilter`, or None when there is no filter.

    Raises:
        InvalidRequestError: the filter does not follow the grammar (``param`` points into it, e.g.
            ``filters.filters[1].value``), or exceeds the limits above.
    """
    if filters is None:
        return None
    counter = itertools.count()
    params: dict[str, Any] = {}
    budget = [MAX_CONDITIONS]
    expression = _compile(filters, param, 0, counter, params, budget, sql.Identifier(column))
    return CompiledFilter(expression, params, filters)


def _compile(node: Any, path: str, depth: int, counter: itertools.count, params: dict[str, Any],
             budget: list[int], column: sql.Identifier) -> sql.Composable:
    if not isinstance(node, dict):
        raise invalid_type(path, "an object", node)
    if "type" not in node:
        raise InvalidRequestError(f"Missing required parameter: '{path}.type'.", param=f"{path}.type",
                                  code="missing_required_parameter")
    kind = node["type"]
    if not isinstance(kind, str):
        raise invalid_type(f"{path}.type", "a string", kind)
    if kind not in _TYPES:
        raise InvalidRequestError(f"Invalid value: {kind[:64]!r}. Supported values are: {supported_values(_TYPES)}.",
                                  param=f"{path}.type", code="invalid_value")
    allowed = _COMPOUND_FIELDS if kind in ("and", "or") else _COMPARISON_FIELDS
    for name in node:
        if name not in allowed:
            raise unknown_parameter(param_path(path, name))
    if kind in ("and", "or"):
        if depth >= MAX_DEPTH:
            raise InvalidRequestError(f"Invalid '{path}': filters nest deeper than {MAX_DEPTH} levels.", param=path,
                                      code="invalid_value")
        if "filters" not in node:
            raise InvalidRequestError(f"Missing required parameter: '{path}.filters'.", param=f"{path}.filters",
                                      code="missing_required_parameter")
        children = node["filters"]
        if not isinstance(children, list):
            raise invalid_type(f"{path}.filters", "an array", children)
        if not children:
            raise InvalidRequestError(f"Invalid '{path}.filters': empty array. Expected an array with minimum length "
                                      "1, but got an empty array instead.", param=f"{path}.filters",
                                      code="empty_array")
        parts = [_compile(child, f"{path}.filters[{i}]", depth + 1, counter, params, budget, column)
                 for i, child in enumerate(children)]
        joiner = sql.SQL(" AND " if kind == "and" else " OR ")
        return sql.SQL("({})").format(joiner.join(parts))
    budget[0] -= 1
    if budget[0] < 0:
        raise InvalidRequestError(f"Invalid '{path}': more than {MAX_CONDITIONS} conditions.", param=path,
                                  code="invalid_value")
    _check_key(node, path)
    if "value" not in node:
        raise InvalidRequestError(f"Missing required parameter: '{path}.value'.", param=f"{path}.value",
                                  code="missing_required_parameter")
    key, value = node["key"], node["value"]
    n = next(counter)
    key_ph = sql.Placeholder(f"fk{n}")
    params[f"fk{n}"] = key
    field = sql.SQL("({} -> {})").format(column, key_ph)
    if kind in ("in", "nin"):
        if not isinstance(value, list):
            raise invalid_type(f"{path}.value", f"an array ('{kind}' compares with a list of values)", value)
        if len(value) > MAX_IN_VALUES:
            raise InvalidRequestError(f"Invalid '{path}.value': array too long. Expected an array with maximum length "
                                      f"{MAX_IN_VALUES}, but got an array with length {len(value)} instead.",
                                      param=f"{path}.value", code="array_above_max_length")
        for i, item in enumerate(value):
            _check_scalar(item, f"{path}.value[{i}]", allow_bool=False)
        params[f"fv{n}"] = [Jsonb(item) for item in value]
        test = sql.SQL("{} = ANY({}::jsonb[])").format(field, sql.Placeholder(f"fv{n}"))
        return test if kind == "in" else sql.SQL("NOT coalesce({}, false)").format(test)
    _check_scalar(value, f"{path}.value", allow_bool=True)
    if kind in ("eq", "ne"):
        params[f"fv{n}"] = Jsonb(value)
        test = sql.SQL("{} = {}::jsonb").format(field, sql.Placeholder(f"fv{n}"))
        return test if kind == "eq" else sql.SQL("NOT coalesce({}, false)").format(test)
    if isinstance(value, bool):
        raise InvalidRequestError(f"Invalid '{path}.value': '{kind}' compares numbers or strings, not booleans.",
                                  param=f"{path}.value", code="invalid_value")
    op = sql.SQL(_COMPARE[kind])
    params[f"fv{n}"] = value
    if isinstance(value, str):
        return sql.SQL("(jsonb_typeof({f}) = 'string' AND ({c} ->> {k}) {op} {v}::text)").format(
            f=field, c=column, k=key_ph, op=op, v=sql.Placeholder(f"fv{n}"))
    return sql.SQL("(jsonb_typeof({f}) = 'number' AND ({c} ->> {k})::numeric {op} {v}::numeric)").format(
        f=field, c=column, k=key_ph, op=op, v=sql.Placeholder(f"fv{n}"))


def _check_key(node: dict[str, Any], path: str) -> None:
    param = f"{path}.key"
    if "key" not in node:
        raise InvalidRequestError(f"Missing required parameter: '{param}'.", param=param,
                                  code="missing_required_parameter")
    key = node["key"]
    if not isinstance(key, str):
        raise invalid_type(param, "a string", key)
    if not key:
        raise InvalidRequestError(f"Invalid '{param}': empty string. Expected a string with minimum length 1, but got "
                                  "an empty string instead.", param=param, code="empty_string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidRequestError(f"Invalid '{param}': string too long. Expected a string with maximum length "
                                  f"{MAX_KEY_LENGTH}, but got a string with length {len(key)} instead.", param=param,
                                  code="string_above_max_length")
    if "\x00" in key:
        raise InvalidRequestError(f"Invalid '{param}': NUL characters are not allowed.", param=param,
                                  code="invalid_value")


def _check_scalar(value: Any, path: str, *, allow_bool: bool) -> None:
    if isinstance(value, bool):
        if allow_bool:
            return
        raise invalid_type(path, "a string or a number", value)
    if isinstance(value, str):
        if len(value) > MAX_STRING_VALUE:
            raise InvalidRequestError(f"Invalid '{path}': string too long. Expected a string with maximum length "
                                      f"{MAX_STRING_VALUE}, but got a string with length {len(value)} instead.",
                                      param=path, code="string_above_max_length")
        if "\x00" in value:
            raise InvalidRequestError(f"Invalid '{path}': NUL characters are not allowed.", param=path,
                                      code="invalid_value")
        return
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidRequestError(f"Invalid '{path}': expected a finite number.", param=path, code="invalid_value")
        return
    raise invalid_type(path, "a string, a number or a boolean" if allow_bool else "a string or a number", value)
