"""Keyset (cursor) pagination over time-ordered ids, the way OpenAI's list endpoints page.

Ids embed their creation time (:mod:`chalicelib.ids`), so ordering by id byte-wise (``COLLATE "C"``) is ordering by
creation, and a cursor is just an id — one that keeps working after the object it names is deleted (a client that
deletes while it iterates does not lose its place). Lists ordered by position instead (a conversation's items, a
response's input items) take the id of an item that is or was in the list. A cursor that can name no place in its
list (not an id of the list's kind, or an item never in it) is a 400 on every list
(:func:`chalicelib.ids.validate_cursor`, :func:`cursor_not_in_list`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from psycopg import sql

from chalicelib.errors import InvalidRequestError

RowT = TypeVar("RowT")


@dataclass(frozen=True, slots=True)
class Page:
    """One page request: ``limit`` objects (1..max), ``order`` ``asc|desc`` by creation, and optional ``after`` /
    ``before`` cursors (ids; ``after`` continues in ``order``, ``before`` walks back towards the start)."""

    limit: int = 20
    order: str = "desc"
    after: str | None = None
    before: str | None = None


def keyset(page: Page, column: str) -> tuple[sql.Composable, sql.Composable, dict[str, object]]:
    """``(condition, order_by, params)`` for ``page`` over the id column ``column`` (e.g. ``"sf.file_id"``).

    The query must ``LIMIT %(page_limit)s`` (``page.limit + 1`` rows: the extra row tells :func:`trim` whether more
    exist). With ``before`` the rows come back in the opposite order; :func:`trim` restores it.
    """
    ident = sql.SQL(".").join(sql.Identifier(part) for part in column.split("."))
    ident_c = sql.SQL("{} COLLATE \"C\"").format(ident)
    descending = page.order == "desc"
    conditions: list[sql.Composable] = [sql.SQL("TRUE")]
    params: dict[str, object] = {"page_limit": page.limit + 1}
    if page.after is not None:
        conditions.append(sql.SQL("{} {} %(page_after)s").format(ident_c, sql.SQL("<" if descending else ">")))
        params["page_after"] = page.after
    if page.before is not None:
        conditions.append(sql.SQL("{} {} %(page_before)s").format(ident_c, sql.SQL(">" if descending else "<")))
        params["page_before"] = page.before
    backwards = page.before is not None and page.after is None
    direction = sql.SQL("DESC" if descending != backwards else "ASC")
    return sql.SQL(" AND ").join(conditions), sql.SQL("{} {}").format(ident_c, direction), params


def trim(page: Page, rows: list[RowT]) -> tuple[list[RowT], bool]:
    """``(rows of the page in the requested order, has_more)`` from the ``limit + 1`` rows :func:`keyset` fetched."""
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    if page.before is not None and page.after is None:
        rows.reverse()
    return rows, has_more


def cursor_not_in_list(param: str, cursor: str, where: str) -> InvalidRequestError:
    """The 400 (``invalid_value``, ``param`` ``after`` or ``before``) for a cursor naming no item of a list ordered
    by position; ``where`` names the list ("this conversation")."""
    return InvalidRequestError(f"Invalid '{param}': no item '{cursor[:64]}' in {where}.", param=param,
                               code="invalid_value")
