"""What mem0's clients send to the mem0 adapter (:mod:`chalicelib.api.routes.mem0`), read leniently, and its
translation into the native request bodies of ``/v1/memories`` (:mod:`chalicelib.api.memory_schemas`), which then
validate it strictly.

Lenient here, and only here: fields mem0 sends that Engram has no use for (``output_format``, ``version``,
``custom_instructions``, ``custom_categories``, ``rerank``, ``org_id``, ``project_id``, ...) are accepted and
ignored. Anything whose meaning Engram cannot honour is a 400 naming it rather than an answer that would be wrong:
an ``app_id``, ``OR`` / ``NOT`` filters, category filters, ``show_expired: true``.

**Scope.** mem0 names a user, agent and/or run at the top level (add, delete_all) or inside ``filters`` (search,
get_all; add too in newer clients): ``{"user_id": "u"}`` or ``{"AND": [{"user_id": "u"}, {"run_id": "r"}]}``.
``"*"`` (mem0's wildcard) means any, i.e. the id is not named: a scope naming only ``user_id`` already sees that
user's memories of every agent and run. At least one id must be named.

**Filters** beyond the scope, for search only (the same AND of conditions): ``metadata`` ``{"key": value}`` or
``{"key": {"in"|"ne"|"gt"|"gte"|"lt"|"lte"|"nin"|"eq": value}}`` (Engram's metadata filter grammar), and
``created_at`` ``{"gte"|"gt"|"lte"|"lt": date}``.

**Times** are Unix seconds (int or float), ``YYYY-MM-DD`` (UTC) or ISO 8601 date-times (UTC unless they carry an
offset). mem0's ``expiration_date`` ``YYYY-MM-DD`` keeps a memory visible through that day: it expires at the next
midnight UTC.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chalicelib.api.memory_schemas import MAX_ID_CHARS, MAX_TOP_K
from chalicelib.errors import InvalidRequestError

__all__ = ["ENTITY_IDS", "MAX_BATCH", "Mem0Add", "Mem0BatchDelete", "Mem0BatchUpdate", "Mem0Feedback", "Mem0List",
           "Mem0ProfileJob", "Mem0Search", "Mem0Update", "Selection", "clamp_top_k", "expires_at", "filters_param",
           "memory_ref", "metadata_conditions", "select", "unix_seconds"]

ENTITY_IDS = ("user_id", "agent_id", "run_id")
WILDCARD = "*"
# Metadata comparisons mem0 shares with Engram's filter grammar (mem0's contains / icontains have no equivalent).
METADATA_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"})
MAX_FILTER_DEPTH = 8  # nesting of AND
MAX_FILTER_CONDITIONS = 64
MAX_PAGE_SIZE = 200  # mem0's get_all page_size maximum
MAX_FILTERS_CHARS = 8192  # a filters query parameter
MAX_BATCH = 1000  # memories per batch update or delete (mem0's platform limit)
# A memory id as mem0's clients may send one: Engram's mem_ ids, mem0's UUIDs, any id-like token.
MEMORY_REF = re.compile(r"[A-Za-z0-9_-]{1,128}")

EntityId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
When = int | float | str


class _Mem0Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)


class _Entities(_Mem0Body):
    user_id: EntityId | None = None
    agent_id: EntityId | None = None
    run_id: EntityId | None = None
    app_id: str | None = None
    filters: dict[str, Any] | None = None


class Mem0Add(_Entities):
    """``POST /v3/memories/add/`` (``messages`` and the other native fields are checked by the native schema)."""

    messages: Any = None
    metadata: dict[str, Any] | None = None
    infer: bool = True
    timestamp: When | None = None
    expiration_date: str | None = None
    async_mode: bool | None = None


class Mem0Search(_Entities):
    """``POST /v3/memories/search/``."""

    query: str = Field(min_length=1)
    top_k: int | None = Field(default=None, ge=1)
    threshold: float | int | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    fields: list[str] | None = None
    keyword_search: bool | None = None
    latest_only: bool | None = None
    show_expired: bool | None = None
    reference_date: When | None = None


class Mem0List(_Entities):
    """``POST /v3/memories/`` (mem0's get_all); ``page`` / ``page_size`` in the query string win over the body."""

    page: int | None = Field(default=None, ge=1)
    page_size: int | None = Field(default=None, ge=1, le=MAX_PAGE_SIZE)
    categories: list[str] | None = None
    fields: list[str] | None = None
    latest_only: bool | None = None
    show_expired: bool | None = None
    start_date: str | None = None
    end_date: str | None = None
    keywords: str | None = None


class Mem0Update(_Mem0Body):
    """``PUT /v1/memories/{id}/``: ``text``, ``metadata``, ``timestamp``, ``expiration_date`` (null clears it)."""

    text: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: When | None = None
    expiration_date: str | None = None


class _BatchItem(_Mem0Body):
    memory_id: str = Field(min_length=1, max_length=256)


class _BatchUpdateItem(_BatchItem):
    text: str | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _something(self) -> _BatchUpdateItem:
        if self.text is None and self.metadata is None:
            raise ValueError("each memory needs 'text' or 'metadata' to update")
        return self


class Mem0BatchUpdate(_Mem0Body):
    """``PUT /v1/batch/``: ``{"memories": [{"memory_id", "text"?, "metadata"?}]}``, 1 to :data:`MAX_BATCH`."""

    memories: list[_BatchUpdateItem] = Field(min_length=1, max_length=MAX_BATCH)


class Mem0BatchDelete(_Mem0Body):
    """``DELETE /v1/batch/``: ``{"memories": [{"memory_id"}]}``, 1 to :data:`MAX_BATCH`."""

    memories: list[_BatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class Mem0Feedback(_Mem0Body):
    """``POST /v1/feedback/``: ``memory_id``, ``feedback`` (``POSITIVE``, ``NEGATIVE``, ``VERY_NEGATIVE`` or
    null) and ``feedback_reason``."""

    memory_id: str = Field(min_length=1, max_length=256)
    feedback: str | None = None
    feedback_reason: str | None = Field(default=None, max_length=4096)


class Mem0ProfileJob(_Mem0Body):
    """``POST /v2/profiles/jobs/``: ``operation`` (``trigger`` one user now; ``sample`` is refused),
    ``entity_type`` (``user``), ``entity_id``."""

    operation: str
    entity_type: str = "user"
    entity_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    limit: int | None = None


def memory_ref(value: str, param: str = "memory_id") -> str | None:
    """A memory id a mem0 client sent: the id when it is one of Engram's (``mem_…``), None when it is well formed
    but cannot be Engram's (a mem0 UUID: the memory does not exist here, a 404 for the caller).

    Raises:
        InvalidRequestError: (400, ``param``) not an id at all, or a malformed ``mem_`` id.
    """
    from chalicelib import ids

    if value.startswith(ids.MEMORY):
        return ids.validate_id(value, ids.MEMORY, param=param)
    if not MEMORY_REF.fullmatch(value):
        raise InvalidRequestError(f"Invalid '{param}': expected a memory id (1 to 128 letters, digits, '_' or "
                                  "'-').", param=param, code="invalid_value")
    return None


def filters_param(raw: str, param: str = "filters") -> dict[str, Any]:
    """A ``filters`` query parameter: JSON, or the Python literal mem0's client writes when it puts a dict in the
    query string (``{'user_id': 'alice'}``, read with :func:`ast.literal_eval`, which evaluates literals only).

    Raises:
        InvalidRequestError: (400, ``param``) neither parses to an object.
    """
    if len(raw) > MAX_FILTERS_CHARS:
        raise InvalidRequestError(f"Invalid '{param}': longer than {MAX_FILTERS_CHARS} characters.", param=param,
                                  code="invalid_value")
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    raise InvalidRequestError(f"Invalid '{param}': expected an object of filters, e.g. {{\"user_id\": \"alice\"}}.",
                              param=param, code="invalid_value")


@dataclass(slots=True)
class Selection:
    """What a mem0 request selects: the scope ids it names, metadata comparisons (Engram's filter grammar) and a
    ``created_at`` range (Unix seconds, inclusive)."""

    ids: dict[str, str] = field(default_factory=dict)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    created_after: int | None = None
    created_before: int | None = None

    def metadata_filter(self) -> dict[str, Any] | None:
        """The metadata comparisons as one filter (None when there are none)."""
        if not self.metadata:
            return None
        return self.metadata[0] if len(self.metadata) == 1 else {"type": "and", "filters": list(self.metadata)}


def select(body: _Entities, *, metadata: bool = False, created: bool = False) -> Selection:
    """The :class:`Selection` of a body's top-level ids and ``filters``; ``metadata`` / ``created`` allow those
    filters (search, get_all) — elsewhere they are refused.

    Raises:
        InvalidRequestError: (400, ``param`` ``filters`` or the field) an ``app_id``, OR / NOT, an unknown or
            unsupported filter, two different values for one id, or no id named at all (an API key bound to a
            memory scope names its ids wherever the request does not: chalicelib.access).
    """
    out = Selection()
    if body.app_id not in (None, WILDCARD):
        raise _unsupported("app_id", "Engram scopes memories by 'user_id', 'agent_id' and 'run_id' only; "
                                     "'app_id' is not supported.")
    for name in ENTITY_IDS:
        value = getattr(body, name)
        if value is not None:
            _entity(out, name, value, name)
    if body.filters is not None:
        _walk(out, body.filters, "filters", 0, [MAX_FILTER_CONDITIONS], metadata=metadata, created=created)
    from chalicelib.api.context import current_access

    for name, value in current_access().memory_scope.items():  # a key bound to a scope: its ids where none named
        out.ids.setdefault(name, value)
    if not out.ids:
        raise InvalidRequestError("Name a scope: at least one of 'user_id', 'agent_id', 'run_id' (at the top level "
                                  "or in 'filters', e.g. {\"user_id\": \"alice\"}) is required.", param="filters",
                                  code="invalid_value")
    return out


def _walk(out: Selection, node: Any, path: str, depth: int, budget: list[int], *, metadata: bool,
          created: bool) -> None:
    if not isinstance(node, dict):
        raise InvalidRequestError(f"Invalid '{path}': expected an object.", param=path, code="invalid_type")
    if depth > MAX_FILTER_DEPTH:
        raise InvalidRequestError(f"Invalid '{path}': AND nested deeper than {MAX_FILTER_DEPTH}.", param=path,
                                  code="invalid_value")
    for key, value in node.items():
        budget[0] -= 1
        if budget[0] < 0:
            raise InvalidRequestError(f"Invalid 'filters': more than {MAX_FILTER_CONDITIONS} conditions.",
                                      param="filters", code="invalid_value")
        where = f"{path}.{key}"
        if key == "AND":
            if not isinstance(value, list) or not value:
                raise InvalidRequestError(f"Invalid '{where}': expected a non-empty list of filters.", param=where,
                                          code="invalid_value")
            for i, item in enumerate(value):
                _walk(out, item, f"{where}[{i}]", depth + 1, budget, metadata=metadata, created=created)
        elif key in ("OR", "NOT"):
            raise _unsupported(where, f"'{key}' filters are not supported by Engram: filters are joined by AND "
                                      "(search each scope separately).")
        elif key in ENTITY_IDS:
            _entity(out, key, value, where)
        elif key == "app_id":
            if value != WILDCARD:
                raise _unsupported(where, "Engram scopes memories by 'user_id', 'agent_id' and 'run_id' only; "
                                          "'app_id' is not supported.")
        elif key == "metadata" and metadata:
            _metadata(out, value, where)
        elif key == "created_at" and created:
            _created(out, value, where)
        else:
            raise _unsupported(where, f"Unsupported filter '{key}': Engram filters on 'user_id', 'agent_id', "
                                      f"'run_id'{', metadata' if metadata else ''}"
                                      f"{' and created_at' if created else ''} (joined by AND).")


def _entity(out: Selection, name: str, value: Any, where: str) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise InvalidRequestError(f"Invalid '{where}': expected an id (a string of 1 to {MAX_ID_CHARS} characters) "
                                  "or \"*\".", param=where, code="invalid_value")
    if value == WILDCARD:
        return
    if out.ids.setdefault(name, value) != value:
        raise InvalidRequestError(f"Invalid '{where}': '{name}' is given two different values.", param=where,
                                  code="invalid_value")


def _metadata(out: Selection, value: Any, where: str) -> None:
    out.metadata.extend(metadata_conditions(value, where))


def metadata_conditions(value: Any, param: str) -> list[dict[str, Any]]:
    """mem0's metadata filter ``{"key": value}`` or ``{"key": {operator: value}}`` as Engram comparisons
    ``{"type", "key", "value"}`` (their values are checked where they are compiled, by the native search).

    Raises:
        InvalidRequestError: (400, ``param``) not an object, or an operator Engram does not have.
    """
    if not isinstance(value, dict) or not value:
        raise InvalidRequestError(f"Invalid '{param}': expected an object of metadata keys and values.",
                                  param=param, code="invalid_type")
    out = []
    for key, wanted in value.items():
        if isinstance(wanted, dict):
            if len(wanted) != 1 or next(iter(wanted)) not in METADATA_OPERATORS:
                raise _unsupported(f"{param}.{key}", "Expected a value or one comparison "
                                                     f"({', '.join(sorted(METADATA_OPERATORS))}).")
            operator, operand = next(iter(wanted.items()))
            out.append({"type": operator, "key": key, "value": operand})
        else:
            out.append({"type": "eq", "key": key, "value": wanted})
    return out


def _created(out: Selection, value: Any, where: str) -> None:
    if not isinstance(value, dict) or not value:
        raise InvalidRequestError(f"Invalid '{where}': expected {{\"gte\"|\"gt\"|\"lte\"|\"lt\": date}}.",
                                  param=where, code="invalid_type")
    for operator, when in value.items():
        start, end = _span(when, f"{where}.{operator}")
        if operator == "gte":
            out.created_after = max(out.created_after or 0, start)
        elif operator == "gt":
            out.created_after = max(out.created_after or 0, end + 1)
        elif operator == "lte":
            out.created_before = end if out.created_before is None else min(out.created_before, end)
        elif operator == "lt":
            out.created_before = start - 1 if out.created_before is None else min(out.created_before, start - 1)
        else:
            raise _unsupported(f"{where}.{operator}", "Expected one of gte, gt, lte, lt.")


def unix_seconds(value: When, param: str, *, end_of_day: bool = False) -> int:
    """A mem0 time (Unix seconds, ``YYYY-MM-DD`` or ISO 8601) as integer Unix seconds; a bare date is its first
    second (its last with ``end_of_day``).

    Raises:
        InvalidRequestError: (400, ``param``) not a time, or outside 1970–9999.
    """
    start, end = _span(value, param)
    return end if end_of_day else start


def expires_at(expiration_date: str, param: str = "expiration_date") -> int:
    """mem0's ``expiration_date`` (``YYYY-MM-DD``: visible through that day, UTC) → Engram's ``expires_at``, the
    next midnight UTC in Unix seconds.

    Raises:
        InvalidRequestError: (400, ``param``) not a ``YYYY-MM-DD`` date.
    """
    try:
        day = date.fromisoformat(expiration_date)
    except ValueError:
        raise InvalidRequestError(f"Invalid '{param}': expected a date YYYY-MM-DD, got {expiration_date[:40]!r}.",
                                  param=param, code="invalid_value") from None
    if day >= date.max:
        raise InvalidRequestError(f"Invalid '{param}': out of range.", param=param, code="invalid_value")
    return int(datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC).timestamp())


def _span(value: Any, param: str) -> tuple[int, int]:
    """``(first, last)`` Unix second a mem0 time covers: one second for an instant, the whole day for a date."""
    bad = InvalidRequestError(f"Invalid '{param}': expected Unix seconds, a date YYYY-MM-DD or an ISO 8601 "
                              f"date-time, got {str(value)[:40]!r}.", param=param, code="invalid_value")
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise bad
        if isinstance(value, int | float):
            instant = datetime.fromtimestamp(value, UTC)
            return int(instant.timestamp()), int(instant.timestamp())
        if len(value) == 10:
            day = datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
            start = int(day.timestamp())
            return start, start + 86_399
        instant = datetime.fromisoformat(value)
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        return int(instant.timestamp()), int(instant.timestamp())
    except (ValueError, OverflowError, OSError):
        raise bad from None


def clamp_top_k(top_k: int | None) -> int | None:
    """mem0 allows ``top_k`` up to 1000; Engram returns at most :data:`MAX_TOP_K` results."""
    return None if top_k is None else min(top_k, MAX_TOP_K)


def _unsupported(param: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid '{param}': {message}", param=param, code="unsupported_parameter")
