"""What an API key may do: a permission per resource and, optionally, the memory scope it is bound to.

Resources (:data:`RESOURCES`) are the API's families of endpoints: ``files`` (Files, Uploads), ``vector_stores``
(vector stores, their files and batches, search, the drop-folder sync), ``responses`` (Responses, Conversations,
agent profiles) and ``memories`` (``/v1/memories`` and the mem0 adapter) — the tenant's data,
:data:`DATA_RESOURCES` — and ``operations``: what the people who run Engram do (``/v1/jobs``: the scheduled jobs,
their runs, running one such as consolidation now; changing the tenant's limits). Each gets a level, ``none`` <
``read`` < ``write`` (write includes read), as OpenAI's restricted project keys have (None / Read / Write per
resource).

A key bound to a memory scope (``{"user_id": "alice"}``; any of ``user_id``, ``agent_id``, ``run_id``) acts in that
scope on every memory call, whatever the request names: a request that names none is filled in, one that names
another value for a bound id is refused (403), and a memory outside the scope is not found (404)
(:class:`chalicelib.memory.Context` enforces it in the memory service, the one front door).

Keys created before permissions existed (and keys created without options) carry :data:`FULL`: every data resource
at ``write``, no binding, and ``operations`` at ``none``: a tenant's full key cannot raise its own tenant's limits
(an operator key is asked for by name, ``engram keys create --operator``). A refusal is
:class:`~chalicelib.errors.PermissionDeniedError` (403) in OpenAI's envelope, naming the permission that is missing
(``Missing scopes: memories.write``, as OpenAI names a restricted key's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from chalicelib.errors import InvalidRequestError, PermissionDeniedError

Resource = Literal["files", "vector_stores", "responses", "memories", "operations"]
Level = Literal["none", "read", "write"]
RESOURCES: tuple[Resource, ...] = get_args(Resource)
# The tenant's data; ``operations`` is the operator's, given to no key that does not ask for it.
DATA_RESOURCES: tuple[Resource, ...] = ("files", "vector_stores", "responses", "memories")
LEVELS: tuple[Level, ...] = get_args(Level)
SCOPE_IDS = ("user_id", "agent_id", "run_id")
_RANK = {level: rank for rank, level in enumerate(LEVELS)}
# The longest scope id a key may be bound to (the memory API's own limit on scope ids).
MAX_SCOPE_ID_CHARS = 128

INSUFFICIENT = "insufficient_permissions"
SCOPE_REFUSED = "memory_scope_not_permitted"


@dataclass(frozen=True, slots=True)
class Access:
    """A key's grants: ``permissions`` (resource → level; a resource not named is ``none``) and ``memory_scope``
    (the scope ids the key is bound to; empty: unbound). The default is :data:`FULL`'s."""

    permissions: Mapping[str, Level] = field(default_factory=lambda: {r: "write" for r in DATA_RESOURCES})
    memory_scope: Mapping[str, str] = field(default_factory=dict)

    def level(self, resource: Resource) -> Level:
        """The key's level on ``resource``."""
        return self.permissions.get(resource, "none")

    def allows(self, resource: Resource, level: Level) -> bool:
        """Whether the key may act on ``resource`` at ``level`` (``write`` includes ``read``)."""
        return _RANK[self.level(resource)] >= _RANK[level]

    def require(self, resource: Resource, level: Level) -> None:
        """Refuse unless :meth:`allows`.

        Raises:
            PermissionDeniedError: (403, code ``insufficient_permissions``) naming ``<resource>.<level>``.
        """
        if not self.allows(resource, level):
            raise denied(resource, level)

    @property
    def full(self) -> bool:
        """Every data resource at ``write`` and no memory scope: what keys had before permissions existed (an
        operator key is full too, and more)."""
        return not self.memory_scope and all(self.level(r) == "write" for r in DATA_RESOURCES)

    @property
    def operator(self) -> bool:
        """Whether the key may act as an operator (``operations`` at ``write``)."""
        return self.allows("operations", "write")

    def as_dict(self) -> dict[str, Any]:
        """``{"permissions": {resource: level, ...every resource}, "memory_scope": {...} | None}`` (JSON)."""
        return {"permissions": {r: self.level(r) for r in RESOURCES},
                "memory_scope": dict(self.memory_scope) or None}


FULL = Access()


def denied(resource: Resource, level: Level) -> PermissionDeniedError:
    """The 403 for a key lacking ``resource`` at ``level`` (OpenAI's wording for a restricted key)."""
    return PermissionDeniedError(
        f"You have insufficient permissions for this operation. Missing scopes: {resource}.{level}. This API key "
        f"does not have {level} access to {resource.replace('_', ' ')} (see `engram keys list`).",
        code=INSUFFICIENT)


def scope_refused(name: str, bound: str, asked: str) -> PermissionDeniedError:
    """The 403 for a request naming ``name=asked`` with a key bound to ``name=bound``."""
    return PermissionDeniedError(
        f"This API key is bound to the memory scope {name}={bound!r}; the request names {name}={asked[:128]!r}. "
        f"Leave '{name}' out (the key's scope is used) or name {bound!r}.", param=name, code=SCOPE_REFUSED)


def parse(permissions: Mapping[str, Any] | None, memory_scope: Mapping[str, Any] | None) -> Access:
    """The :class:`Access` stored for a key (``api_keys.permissions`` / ``memory_scope``, JSON objects or NULL):
    NULL permissions are :data:`FULL`'s (every data resource, no ``operations``).

    Raises:
        InvalidRequestError: an unknown resource or level, or a scope id that is not a non-empty string of at
            most :data:`MAX_SCOPE_ID_CHARS` (``param`` names it).
    """
    levels: dict[str, Level] = dict(FULL.permissions)
    if permissions is not None:
        levels = {}
        for resource, level in permissions.items():
            if resource not in RESOURCES:
                raise InvalidRequestError(f"Unknown resource {resource!r}: expected one of {', '.join(RESOURCES)}.",
                                          param="permissions", code="invalid_value")
            if level not in LEVELS:
                raise InvalidRequestError(f"Invalid level {level!r} for {resource}: expected none, read or write.",
                                          param=f"permissions.{resource}", code="invalid_value")
            levels[resource] = level
    scope: dict[str, str] = {}
    for name, value in (memory_scope or {}).items():
        if name not in SCOPE_IDS:
            raise InvalidRequestError(f"Unknown memory scope id {name!r}: expected user_id, agent_id or run_id.",
                                      param="memory_scope", code="invalid_value")
        if not isinstance(value, str) or not value or len(value) > MAX_SCOPE_ID_CHARS or "\x00" in value:
            raise InvalidRequestError(f"Invalid {name}: expected 1 to {MAX_SCOPE_ID_CHARS} characters.",
                                      param=f"memory_scope.{name}", code="invalid_value")
        scope[name] = value
    return Access(levels, scope)


def hold_scope(bound: Mapping[str, str], named: Mapping[str, Any]) -> dict[str, Any]:
    """``named`` (scope ids, None for an id not named) held to the ``bound`` ids: each bound id filled in.

    Raises:
        PermissionDeniedError: (403, ``memory_scope_not_permitted``) ``named`` gives a bound id another value.
    """
    out = dict(named)
    for name, value in bound.items():
        asked = out.get(name)
        if asked not in (None, "") and asked != value:
            raise scope_refused(name, value, str(asked))
        out[name] = value
    return out


def fill_scope(access: Access, named: Mapping[str, Any]) -> dict[str, Any]:
    """``named`` (a request's scope ids, and anything else it holds) with the key's bound ids filled in where the
    request names none. A conflicting value is left for the memory service to refuse."""
    out = dict(named)
    for name, value in access.memory_scope.items():
        if out.get(name) in (None, ""):
            out[name] = value
    return out
