"""The one query-parameter parser: every route declares the parameters it reads and their kinds, and every request
is parsed against that declaration before the route runs (the Chalice middleware :func:`enforce`; the streaming
front for ``POST /v1/responses`` calls :func:`parse` itself). What a route reads is the parsed
:class:`Query` (:func:`parsed`), never the raw query string, so no spelling of a parameter can be dropped on the
way and widen what a request does (``DELETE /v1/memories?user_id=alice&agent_id[]=x`` purging all of alice's
memories instead of refusing).

A 400 in OpenAI's envelope, naming the parameter, for:

- a name the route does not declare (``unknown_parameter``, as an unknown body field is);
- an empty value (``agent_id=`` or a bare ``agent_id``), on any kind (``invalid_value``): leave the parameter out
  instead;
- a scalar sent in array form (``agent_id[]=x``) or more than once (``limit=5&limit=500``) (``invalid_value``);
- a value its kind refuses: not an integer, not ``true`` / ``false``, not one of a choice's options, or a string
  Postgres cannot hold (NUL, a lone surrogate) (``invalid_value``).

Array parameters that OpenAI declares (``include``) arrive as ``name[]=a&name[]=b`` (the ``openai`` SDK's format)
or ``name=a&name=b``; both are the declared ``name``, in order.

A route declares its parameters with :func:`accepts` under its ``@bp.route`` (names alone are :data:`TEXT`;
``accepts("user_id", limit=INTEGER)``); a route that declares none accepts none, and one that declares :data:`ANY`
takes whatever comes (a route that refuses every request anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import check_storable, unknown_parameter

__all__ = ["ANY", "ARRAY", "BOOLEAN", "INTEGER", "PAGE", "PAGE_FORWARD", "TEXT", "Kind", "Query", "accepts",
           "allowed", "choice", "enforce", "parse", "parsed"]

F = TypeVar("F", bound=Callable[..., Any])

_ARRAY_SUFFIX = "[]"
_ATTRIBUTE = "query_parameters"
_PARSED = "_engram_query"
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


@dataclass(frozen=True, slots=True)
class Kind:
    """How a declared parameter is read: ``expected`` words the kind for error messages (``"an integer"``);
    ``convert(raw)`` returns the typed value or raises ``ValueError``; ``array`` parameters may repeat and parse to
    a ``tuple[str, ...]`` (each element converted)."""

    expected: str
    convert: Callable[[str], Any]
    array: bool = False


def _integer(raw: str) -> int:
    if not raw.lstrip("+-").isdigit() or len(raw) > 19:
        raise ValueError(raw)
    return int(raw)


def _boolean(raw: str) -> bool:
    return _BOOLEANS[raw.lower()]


TEXT = Kind("a string", str)
INTEGER = Kind("an integer", _integer)
BOOLEAN = Kind("true or false", _boolean)
ARRAY = Kind("strings", str, array=True)
# Declared by a route that reads no parameter and answers every request the same (see the module docstring).
ANY = "*"


def choice(*options: str) -> Kind:
    """A scalar that must be one of ``options`` (e.g. a ``Literal``'s values: ``choice(*get_args(Status))``)."""

    def convert(raw: str) -> str:
        if raw not in options:
            raise ValueError(raw)
        return raw

    return Kind(f"one of {', '.join(options)}", convert)


# The cursor-page parameters of OpenAI's list endpoints (``**PAGE`` in a declaration); ranges are the route's.
PAGE: Mapping[str, Kind] = {"limit": INTEGER, "order": choice("asc", "desc"), "after": TEXT, "before": TEXT}
# The same for the lists OpenAI pages forward only (files, conversation items).
PAGE_FORWARD: Mapping[str, Kind] = {name: kind for name, kind in PAGE.items() if name != "before"}


class Query(Mapping[str, Any]):
    """The parsed query of one request: declared name → typed value (``str``, ``int``, ``bool``, or a
    ``tuple[str, ...]`` for an array). Parameters not sent are absent (``.get(name)`` is None)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Query({self._values!r})"

    def array(self, name: str) -> tuple[str, ...]:
        """The values of the array parameter ``name``, in order (``()`` when not sent)."""
        return tuple(self._values.get(name, ()))


def accepts(*names: str, **kinds: Kind) -> Callable[[F], F]:
    """Declare the query parameters the decorated route reads (put it under ``@bp.route``): ``names`` are
    :data:`TEXT`, ``kinds`` map a name to its :class:`Kind`."""
    declared: dict[str, Kind] = {name: TEXT for name in names}
    declared.update(kinds)

    def declare(view: F) -> F:
        setattr(view, _ATTRIBUTE, declared)
        return view

    return declare


def allowed(view: Callable[..., Any]) -> Mapping[str, Kind]:
    """The query parameters ``view`` declared, name → kind (empty when it declared nothing)."""
    return getattr(view, _ATTRIBUTE, {})


def parse(declared: Mapping[str, Kind], params: Mapping[str, Iterable[str]] | None) -> Query:
    """Parse a request's query against a route's declaration. ``params``: each key as sent (``include[]`` too) →
    its values, in order (API Gateway's ``multiValueQueryStringParameters``; ``parse_qs(...,
    keep_blank_values=True)``).

    Raises:
        InvalidRequestError: (400) ``unknown_parameter`` for an undeclared name; ``invalid_value`` for an empty
            value, a scalar in array form or repeated, or a value its kind refuses — ``param`` names it.
    """
    if not params:
        return Query({})
    if ANY in declared:
        return Query({})
    values: dict[str, Any] = {}
    for key in params:
        name = key.removesuffix(_ARRAY_SUFFIX)
        kind = declared.get(name)
        if kind is None:
            raise unknown_parameter(key)
        raw = list(params[key])
        if not kind.array:
            if key != name:
                raise InvalidRequestError(f"Invalid '{name}': expected a single value, but got an array "
                                          f"('{key}'). Send it once as '{name}=...'.", param=name,
                                          code="invalid_value")
            if len(raw) != 1 or name in values:
                raise InvalidRequestError(f"Invalid '{name}': given {len(raw) + (name in values)} times; send it "
                                          "once.", param=name, code="invalid_value")
        converted = [_convert(name, kind, value) for value in raw]
        if kind.array:
            values[name] = (*values.get(name, ()), *converted)
        else:
            values[name] = converted[0]
    return Query(values)


def _convert(name: str, kind: Kind, raw: str) -> Any:
    if raw == "":
        raise InvalidRequestError(f"Invalid '{name}': empty value. Give a value, or leave the parameter out.",
                                  param=name, code="invalid_value")
    check_storable(raw, name)
    try:
        return kind.convert(raw)
    except (ValueError, KeyError):
        raise InvalidRequestError(f"Invalid '{name}': expected {kind.expected}, got {raw[:40]!r}.", param=name,
                                  code="invalid_value") from None


def parsed(request: Any) -> Query:
    """The :class:`Query` :func:`enforce` parsed for ``request`` (a Chalice ``Request``); an empty one for a
    request no route declaration was applied to."""
    return getattr(request, _PARSED, None) or Query({})


def enforce(routes: Mapping[str, Mapping[str, Any]]) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """The Chalice ``http`` middleware parsing every request's query against its route's declaration and keeping
    the result on the request (:func:`parsed`). ``routes``: the app's route table (``app.routes``: path → method →
    route entry with its ``view_function``).

    Raises (rendered by the error middleware):
        InvalidRequestError: see :func:`parse`.
    """

    def middleware(event: Any, get_response: Callable[[Any], Any]) -> Any:
        params = event.query_params
        if params:
            entry = routes.get(event.context.get("resourcePath") or "", {}).get(event.method)
            if entry is not None:
                setattr(event, _PARSED, parse(allowed(entry.view_function),
                                              {key: params.getlist(key) for key in params}))
        return get_response(event)

    return middleware
