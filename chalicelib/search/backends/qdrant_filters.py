"""OpenAI attribute filters (already validated by :func:`chalicelib.search.filters.compile_filter`) as a Qdrant
filter over the points' payload (:func:`~chalicelib.search.backends.qdrant_points.attribute_field`), with the
semantics of the SQL compilation:

- ``eq``: the key holds an equal value — strings by ``match.value``, booleans by their keyword field
  (:func:`~chalicelib.search.backends.qdrant_points.boolean_field`), numbers by a closed range ``[v, v]`` (so 3
  equals 3.0, as jsonb compares them); ``in``: any of the values;
- ``ne`` / ``nin``: ``must_not`` of the same test, so points without the key match too;
- ``gt gte lt lte`` on a number: a range (a string or boolean payload value never falls in it, as in SQL, which
  compares numbers with numbers only).

Qdrant has no range over strings. A string comparison (``gt`` … on a string value) is left out of the Qdrant filter
— replaced by "anything", which widens the filter, never narrows it, since compound filters here are only ``and``
and ``or`` — and :class:`QdrantFilter` says so (``exact`` False): the backend then checks its candidates against the
SQL filter in Postgres.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.search.backends.qdrant_points import attribute_field, boolean_field, boolean_keyword

__all__ = ["QdrantFilter", "compile_qdrant"]


@dataclass(frozen=True, slots=True)
class QdrantFilter:
    """A Qdrant filter (REST JSON; None: no condition) and whether it is exactly the OpenAI filter (else a wider
    one, to be checked in Postgres)."""

    filter: dict[str, Any] | None
    exact: bool


def compile_qdrant(source: Any) -> QdrantFilter:
    """The Qdrant form of a validated OpenAI filter (None → no filter)."""
    if source is None:
        return QdrantFilter(None, True)
    condition, exact = _node(source)
    if condition is None:
        return QdrantFilter(None, exact)
    return QdrantFilter(condition if "must" in condition or "should" in condition or "must_not" in condition
                        else {"must": [condition]}, exact)


def _node(node: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """(condition or None for "anything", exact)."""
    kind = node["type"]
    if kind in ("and", "or"):
        parts = [_node(child) for child in node["filters"]]
        exact = all(e for _, e in parts)
        conditions = [c for c, _ in parts if c is not None]
        if kind == "or" and len(conditions) < len(parts):
            return None, exact  # one alternative is "anything": so is the whole
        if not conditions:
            return None, exact
        return ({"must": conditions} if kind == "and" else {"should": conditions}), exact
    key, value = node["key"], node["value"]
    field = attribute_field(key)
    if kind in ("eq", "ne"):
        test = {"key": boolean_field(key), "match": {"value": boolean_keyword(value)}} if isinstance(value, bool) \
            else _equals(field, value)
        return (test if kind == "eq" else {"must_not": [test]}), True
    if kind in ("in", "nin"):
        test = _any(field, value)
        return (test if kind == "in" else {"must_not": [test]}), True
    if isinstance(value, str):
        return None, False  # no string ranges in Qdrant: checked in Postgres
    return {"key": field, "range": {kind: value}}, True


def _equals(field: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": field, "match": {"value": value}}
    return {"key": field, "range": {"gte": value, "lte": value}}


def _any(field: str, values: list[Any]) -> dict[str, Any]:
    strings = [v for v in values if isinstance(v, str)]
    numbers = [v for v in values if not isinstance(v, str)]
    alternatives: list[dict[str, Any]] = [_equals(field, n) for n in numbers]
    if strings:
        alternatives.append({"key": field, "match": {"any": strings}})
    if len(alternatives) == 1:
        return alternatives[0]
    return {"should": alternatives} if alternatives else {"has_id": []}
