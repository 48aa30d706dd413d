"""Compile OpenAI attribute filters into parameterised SQL over ``chunks.attributes`` (jsonb).

Grammar (OpenAI vector-store search ``filters``, OPENAI-COMPAT.md §2):
    comparison := {"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key": str,
                   "value": str|number|bool|[str|number]}
    compound   := {"type": "and"|"or", "filters": [comparison|compound, ...]}
``type`` defaults to ``eq`` for a comparison. Keys and values only ever travel as query parameters; the SQL text
is built from fixed fragments, so no key or value can change the statement.

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

# OpenAI: attribute keys are strings of at most 64 characters; at most 16 attributes per file.
MAX_KEY_LENGTH = 64
MAX_DEPTH = 8  # nesting of and/or
MAX_CONDITIONS = 64  # comparisons in one filter
MAX_IN_VALUES = 256
MAX_STRING_VALUE = 512  # characters; OpenAI attribute string values are at most 512

_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


class CompiledFilter:
    """A SQL boolean expression over ``chunks`` (alias-free) and its named parameters."""

    def __init__(self, expression: sql.Composable, params: dict[str, Any]) -> None:
        self.expression = expression
        self.params = params


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
    return CompiledFilter(expression, params)


def _compile(node: Any, path: str, depth: int, counter: itertools.count, params: dict[str, Any],
             budget: list[int], column: sql.Identifier) -> sql.Composable:
    if not isinstance(node, dict):
        raise InvalidRequestError(f"Invalid '{path}': expected an object.", param=path)
    kind = node.get("type", "eq")
    if not isinstance(kind, str):
        raise InvalidRequestError(f"Invalid '{path}.type': expected a string (eq, ne, gt, gte, lt, lte, in, nin, and, "
                                  "or).", param=f"{path}.type")
    if kind in ("and", "or"):
        if depth >= MAX_DEPTH:
            raise InvalidRequestError(f"Invalid '{path}': filters nest deeper than {MAX_DEPTH} levels.", param=path)
        children = node.get("filters")
        if not isinstance(children, list) or not children:
            raise InvalidRequestError(f"Invalid '{path}.filters': expected a non-empty array.", param=f"{path}.filters")
        parts = [_compile(child, f"{path}.filters[{i}]", depth + 1, counter, params, budget, column)
                 for i, child in enumerate(children)]
        joiner = sql.SQL(" AND " if kind == "and" else " OR ")
        return sql.SQL("({})").format(joiner.join(parts))
    if kind not in ("eq", "ne", "in", "nin") and kind not in _COMPARE:
        raise InvalidRequestError(
            f"Invalid '{path}.type': {kind!r} is not one of eq, ne, gt, gte, lt, lte, in, nin, and, or.",
            param=f"{path}.type")
    budget[0] -= 1
    if budget[0] < 0:
        raise InvalidRequestError(f"Invalid '{path}': more than {MAX_CONDITIONS} conditions.", param=path)
    key = node.get("key")
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise InvalidRequestError(f"Invalid '{path}.key': expected a string of 1–{MAX_KEY_LENGTH} characters.",
                                  param=f"{path}.key")
    if "value" not in node:
        raise InvalidRequestError(f"Missing '{path}.value'.", param=f"{path}.value")
    value = node["value"]
    n = next(counter)
    key_ph = sql.Placeholder(f"fk{n}")
    params[f"fk{n}"] = key
    field = sql.SQL("({} -> {})").format(column, key_ph)
    if kind in ("in", "nin"):
        if not isinstance(value, list) or len(value) > MAX_IN_VALUES:
            raise InvalidRequestError(f"Invalid '{path}.value': '{kind}' needs an array of at most {MAX_IN_VALUES} "
                                      "values.",
                                      param=f"{path}.value")
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
                                  param=f"{path}.value")
    op = sql.SQL(_COMPARE[kind])
    params[f"fv{n}"] = value
    if isinstance(value, str):
        return sql.SQL("(jsonb_typeof({f}) = 'string' AND ({c} ->> {k}) {op} {v}::text)").format(
            f=field, c=column, k=key_ph, op=op, v=sql.Placeholder(f"fv{n}"))
    return sql.SQL("(jsonb_typeof({f}) = 'number' AND ({c} ->> {k})::numeric {op} {v}::numeric)").format(
        f=field, c=column, k=key_ph, op=op, v=sql.Placeholder(f"fv{n}"))


def _check_scalar(value: Any, path: str, *, allow_bool: bool) -> None:
    if isinstance(value, bool):
        if allow_bool:
            return
        raise InvalidRequestError(f"Invalid '{path}': expected a string or number.", param=path)
    if isinstance(value, str):
        if len(value) > MAX_STRING_VALUE:
            raise InvalidRequestError(f"Invalid '{path}': strings are limited to {MAX_STRING_VALUE} characters.",
                                      param=path)
        if "\x00" in value:
            raise InvalidRequestError(f"Invalid '{path}': NUL characters are not allowed.", param=path)
        return
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidRequestError(f"Invalid '{path}': expected a finite number.", param=path)
        return
    raise InvalidRequestError(f"Invalid '{path}': expected a string, number or boolean.", param=path)
