"""Query parameters a route accepts, declared on the route and enforced for every route and method: a parameter
the route does not declare is a 400 ``unknown_parameter`` naming it (as an unknown body field is), before the route
runs — so a typo (``DELETE /v1/memories?user_id=alice&agnet_id=x``) can never widen what a request does.

A route declares its parameters with :func:`accepts` under its ``@bp.route``; a route that declares none accepts
none, and one that declares :data:`ANY` takes whatever comes (a route that refuses every request anyway). Array
parameters may arrive as ``name[]`` (the ``openai`` SDK's format) or ``name``: both are the declared ``name``.
:func:`enforce` is the Chalice middleware (``app.py``), reading each route's declaration from the app's route
table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chalicelib.validation import unknown_parameter

__all__ = ["ANY", "PAGE", "accepts", "allowed", "enforce"]

F = TypeVar("F", bound=Callable[..., Any])

# Declared by a route that reads no parameter and answers every request the same (see the module docstring).
ANY = "*"
# The cursor-page parameters of OpenAI's list endpoints.
PAGE = ("limit", "order", "after", "before")
_ATTRIBUTE = "query_parameters"


def accepts(*names: str) -> Callable[[F], F]:
    """Declare the query parameters the decorated route reads (put it under ``@bp.route``)."""

    def declare(view: F) -> F:
        setattr(view, _ATTRIBUTE, frozenset(names))
        return view

    return declare


def allowed(view: Callable[..., Any]) -> frozenset[str]:
    """The query parameters ``view`` declared (none when it declared nothing)."""
    return getattr(view, _ATTRIBUTE, frozenset())


def enforce(routes: Mapping[str, Mapping[str, Any]]) -> Callable[[Any, Callable[[Any], Any]], Any]:
    """The Chalice ``http`` middleware refusing undeclared query parameters. ``routes``: the app's route table
    (``app.routes``: path → method → route entry with its ``view_function``).

    Raises (rendered by the error middleware):
        InvalidRequestError: (400, code ``unknown_parameter``, param the parameter's name) an undeclared parameter.
    """

    def middleware(event: Any, get_response: Callable[[Any], Any]) -> Any:
        params = event.query_params or {}
        if params:
            entry = routes.get(event.context.get("resourcePath") or "", {}).get(event.method)
            if entry is not None:
                declared = allowed(entry.view_function)
                for name in () if ANY in declared else params:
                    if name.removesuffix("[]") not in declared:
                        raise unknown_parameter(name)
        return get_response(event)

    return middleware
