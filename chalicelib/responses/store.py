"""The ``responses`` table (migrations/0007_responses.sql): stored responses, their input items, conversation
chains and cached summaries. Every statement is scoped to a tenant except :func:`unsummarized`, which the
scheduled summarization pass runs as the table owner across tenants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.errors import NotFoundError
from chalicelib.responses.turns import Summary, Turn
from chalicelib.store.paging import Page, cursor_not_in_list, keyset, trim
from chalicelib.wire import ResponseStatus

# A chain walk never follows more links than this (a guard; summaries keep real walks short).
MAX_CHAIN = 10_000


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A row of ``responses``. ``response`` is the Response object with file_search results; ``input_items`` the
    request's items; token counts are estimates (:mod:`chalicelib.responses.tokens`)."""

    id: str
    tenant_id: str
    previous_response_id: str | None
    created_at: datetime | None  # None on a row not yet inserted (the database sets it)
    status: ResponseStatus
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    turn_tokens: int
    history_tokens: int
    summary: Summary | None


_COLUMNS = ("id, tenant_id, previous_response_id, created_at, status, response, input_items, turn_tokens, "
            "history_tokens, summary")
_INSERT_TENANT = "INSERT INTO tenants (id) VALUES (%s) ON CONFLICT DO NOTHING"
_INSERT = """
INSERT INTO responses (id, tenant_id, previous_response_id, status, response, input_items, turn_tokens,
                       history_tokens, summary)
VALUES (%(id)s, %(tenant)s, %(previous)s, %(status)s, %(response)s, %(input_items)s, %(turn_tokens)s,
        %(history_tokens)s, %(summary)s)"""
_GET = f"SELECT {_COLUMNS} FROM responses WHERE tenant_id = %(tenant)s AND id = %(id)s"
_EXISTS = "SELECT 1 FROM responses WHERE tenant_id = %(tenant)s AND id = %(id)s"
_DELETE = "DELETE FROM responses WHERE tenant_id = %(tenant)s AND id = %(id)s"
_INPUT_ITEMS = "SELECT input_items FROM responses WHERE tenant_id = %(tenant)s AND id = %(id)s"
_SET_SUMMARY = """UPDATE responses SET summary = %(summary)s, history_tokens = %(history_tokens)s
WHERE tenant_id = %(tenant)s AND id = %(id)s"""
# Walk previous_response_id links from a response back to the start, or — once a row carrying a summary is
# passed — back to the turn that summary covers through (exclusive): the most recent summary wins.
_CHAIN = """
WITH RECURSIVE chain AS (
    SELECT id, previous_response_id, input_items, response -> 'output' AS output, turn_tokens, summary,
           summary ->> 'through' AS stop_at, 0 AS depth
    FROM responses WHERE tenant_id = %(tenant)s AND id = %(id)s
  UNION ALL
    SELECT r.id, r.previous_response_id, r.input_items, r.response -> 'output', r.turn_tokens, r.summary,
           coalesce(c.stop_at, r.summary ->> 'through'), c.depth + 1
    FROM chain c JOIN responses r ON r.tenant_id = %(tenant)s AND r.id = c.previous_response_id
    WHERE c.depth < %(max_depth)s AND (c.stop_at IS NULL OR r.id <> c.stop_at)
)
SELECT id, input_items, output, turn_tokens, summary FROM chain ORDER BY depth DESC"""
# Conversation heads (no stored follow-up) whose history is over the threshold and has no summary yet.
_UNSUMMARIZED = """
SELECT r.tenant_id, r.id, r.response ->> 'model' FROM responses r
WHERE r.summary IS NULL AND r.history_tokens > %(threshold)s AND r.status IN ('completed', 'incomplete')
  AND (%(tenant)s::text IS NULL OR r.tenant_id = %(tenant)s)
  AND NOT EXISTS (SELECT 1 FROM responses c WHERE c.tenant_id = r.tenant_id AND c.previous_response_id = r.id)
ORDER BY r.history_tokens DESC LIMIT %(limit)s"""


def insert(conn: psycopg.Connection, row: StoredResponse) -> None:
    """Store a finished response (its tenant row created if missing)."""
    conn.execute(_INSERT_TENANT, (row.tenant_id,))
    conn.execute(_INSERT, {"id": row.id, "tenant": row.tenant_id, "previous": row.previous_response_id,
                           "status": row.status, "response": Jsonb(row.response),
                           "input_items": Jsonb(row.input_items), "turn_tokens": row.turn_tokens,
                           "history_tokens": row.history_tokens,
                           "summary": Jsonb(row.summary) if row.summary is not None else None})


def get(conn: psycopg.Connection, tenant_id: str, response_id: str, *, param: str = "response_id") -> StoredResponse:
    """The tenant's stored response.

    Raises:
        NotFoundError: no such response for this tenant (``param`` names the field that held the id).
    """
    with conn.cursor(row_factory=class_row(StoredResponse)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": response_id}).fetchone()
    if row is None:
        raise not_found(response_id, param)
    return row


def not_found(response_id: str, param: str) -> NotFoundError:
    """OpenAI's 404 for an unknown response id."""
    return NotFoundError(f"Response with id '{response_id}' not found.", param=param)


def delete(conn: psycopg.Connection, tenant_id: str, response_id: str) -> None:
    """Delete the tenant's response (its follow-ups stay; their chains now start after the gap).

    Raises:
        NotFoundError: no such response for this tenant.
    """
    if conn.execute(_DELETE, {"tenant": tenant_id, "id": response_id}).rowcount == 0:
        raise not_found(response_id, "response_id")


def input_items_page(conn: psycopg.Connection, tenant_id: str, response_id: str,
                     page: Page) -> tuple[list[dict[str, Any]], bool]:
    """One page of a response's input items (``order`` over their position; ``after``/``before`` are item ids):
    ``(items, has_more)``.

    Raises:
        NotFoundError: no such response for this tenant.
    """
    row = conn.execute(_INPUT_ITEMS, {"tenant": tenant_id, "id": response_id}).fetchone()
    if row is None:
        raise not_found(response_id, "response_id")
    items = list(row[0]) if page.order == "asc" else list(reversed(row[0]))
    positions = {item.get("id"): i for i, item in enumerate(items)}
    for name, cursor in (("after", page.after), ("before", page.before)):
        if cursor is not None and cursor not in positions:
            raise cursor_not_in_list(name, cursor, "this response's input items")
    start, end = 0, len(items)
    if page.after is not None:
        start = positions[page.after] + 1
    if page.before is not None:
        end = positions[page.before]
    window = items[start:end]
    if page.before is not None and page.after is None:
        return window[-page.limit:], len(window) > page.limit
    return window[:page.limit], len(window) > page.limit


def chain(conn: psycopg.Connection, tenant_id: str, response_id: str) -> list[Turn]:
    """The conversation ending with ``response_id``, oldest turn first; when a summary was passed, the turns
    after the one it covers through (the first turn returned is then the most recent row carrying a summary, or
    an older turn of that summary's verbatim window). Empty when ``response_id`` does not exist."""
    with conn.cursor(row_factory=class_row(Turn)) as cur:
        return cur.execute(_CHAIN, {"tenant": tenant_id, "id": response_id, "max_depth": MAX_CHAIN}).fetchall()


def exists(conn: psycopg.Connection, tenant_id: str, response_id: str) -> bool:
    """Whether the tenant has a stored response ``response_id``."""
    return conn.execute(_EXISTS, {"tenant": tenant_id, "id": response_id}).fetchone() is not None


def set_summary(conn: psycopg.Connection, tenant_id: str, response_id: str, summary: Summary,
                history_tokens: int) -> None:
    """Cache a conversation summary on a response (and the shorter history it leaves)."""
    conn.execute(_SET_SUMMARY, {"tenant": tenant_id, "id": response_id, "summary": Jsonb(summary),
                                "history_tokens": history_tokens})


def unsummarized(conn: psycopg.Connection, threshold_tokens: int, limit: int,
                 tenant_id: str | None = None) -> list[tuple[str, str, str]]:
    """``(tenant_id, response_id, model)`` of conversation heads whose history exceeds ``threshold_tokens`` and
    has no summary yet, longest first (one tenant's, or every tenant's as the table owner)."""
    return [tuple(r) for r in conn.execute(_UNSUMMARIZED, {"threshold": threshold_tokens, "limit": limit,
                                                            "tenant": tenant_id})]


# A page of the tenant's responses by creation (ids are time-ordered), optionally only those one conversation's
# turns recorded (conversation_items.turn: the response that added an item).
_PAGE = f"""SELECT {_COLUMNS} FROM responses WHERE tenant_id = %(tenant)s AND {{keyset}}
AND (%(conversation)s::text IS NULL OR id IN (SELECT turn FROM conversation_items
                                               WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s))
ORDER BY {{order}} LIMIT %(page_limit)s"""


def list_page(conn: psycopg.Connection, tenant_id: str, page: Page, *,
              conversation_id: str | None = None) -> tuple[list[StoredResponse], bool]:
    """One page of the tenant's stored responses (those of ``conversation_id`` only, when given): ``(rows,
    has_more)``."""
    where, order, params = keyset(page, "id")
    with conn.cursor(row_factory=class_row(StoredResponse)) as cur:
        rows = cur.execute(sql.SQL(_PAGE).format(keyset=where, order=order),
                           {"tenant": tenant_id, "conversation": conversation_id, **params}).fetchall()
    return trim(page, rows)
