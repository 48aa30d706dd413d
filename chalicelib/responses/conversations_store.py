"""The ``conversations`` and ``conversation_items`` tables (migrations/0013_conversations.sql). Every statement
filters on the tenant; row-level security stands behind it.

Items are read in position order (``seq``). A deleted item stays as a tombstone (``item`` NULL) so a cursor naming it
keeps its place; every read of items skips tombstones, and rows holding Engram's ``memory_search_call`` item
(which earlier versions recorded with a response's turn) too: no read shows one, though a cursor naming one keeps
its place. A conversation's cached summary covers every item up to
``summary_seq``; deleting an item it covers drops the summary (the next turn condenses afresh, without it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib.errors import NotFoundError
from chalicelib.responses.turns import Summary
from chalicelib.store.paging import Page, cursor_not_in_list, keyset, trim

__all__ = [
    "Conversation",
    "HistoryRow",
    "add_items",
    "cache_summary",
    "conversation_not_found",
    "create",
    "delete",
    "delete_item",
    "get",
    "get_item",
    "history",
    "items_page",
    "list_page",
    "live_ids",
    "lock",
    "update_metadata",
]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A row of ``conversations``: its ``metadata`` (string pairs) and cached ``summary`` (covering items up to
    position ``summary_seq``), times timezone-aware UTC."""

    id: str
    tenant_id: str
    metadata: dict[str, str]
    created_at: datetime
    summary: Summary | None
    summary_seq: int | None


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """A live item as history reads it: the ``turn`` (write) that added it and the ``item`` (stored shape)."""

    turn: str
    item: dict[str, Any]


_COLUMNS = "id, tenant_id, metadata, created_at, summary, summary_seq"
_INSERT_TENANT = "INSERT INTO tenants (id) VALUES (%s) ON CONFLICT DO NOTHING"
_INSERT = f"""INSERT INTO conversations (id, tenant_id, metadata) VALUES (%(id)s, %(tenant)s, %(metadata)s)
RETURNING {_COLUMNS}"""
_GET = f"SELECT {_COLUMNS} FROM conversations WHERE tenant_id = %(tenant)s AND id = %(id)s"
_LOCK = "SELECT 1 FROM conversations WHERE tenant_id = %(tenant)s AND id = %(id)s FOR KEY SHARE"
_PAGE = f"""SELECT {_COLUMNS} FROM conversations WHERE tenant_id = %(tenant)s AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_UPDATE = f"""UPDATE conversations SET metadata = %(metadata)s WHERE tenant_id = %(tenant)s AND id = %(id)s
RETURNING {_COLUMNS}"""
_DELETE = "DELETE FROM conversations WHERE tenant_id = %(tenant)s AND id = %(id)s"
# Tombstones of ids being added again give way (the id's new item takes a new position).
_CLEAR_TOMBSTONES = """DELETE FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = ANY(%(ids)s) AND item IS NULL"""
_INSERT_ITEM = """INSERT INTO conversation_items (conversation_id, tenant_id, id, turn, item)
VALUES (%(conversation)s, %(tenant)s, %(id)s, %(turn)s, %(item)s) ON CONFLICT (conversation_id, id) DO NOTHING"""
_LIVE_IDS = """SELECT id FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = ANY(%(ids)s) AND item IS NOT NULL"""
# Rows a read shows: live (not a tombstone), and not a memory_search_call item (never a conversation item).
_SHOWN = "item IS NOT NULL AND item->>'type' IS DISTINCT FROM 'memory_search_call'"
_ITEM = f"""SELECT item FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = %(id)s AND {_SHOWN}"""
_HISTORY = f"""SELECT turn, item FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND {_SHOWN}
  AND seq > coalesce(%(after_seq)s::bigint, 0)
ORDER BY seq"""
# A cursor is an item id, live or deleted (a tombstone keeps its position); an id never seen in the conversation is
# refused (_CURSOR_SEEN).
_CURSOR_SEEN = """SELECT 1 FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = %(after)s"""
_ITEMS_PAGE = f"""SELECT item FROM conversation_items
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND {_SHOWN}
  AND (%(after)s::text IS NULL OR seq {{op}} (SELECT seq FROM conversation_items
       WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = %(after)s))
ORDER BY seq {{direction}} LIMIT %(page_limit)s"""
# Deleting: the text goes, the position stays; a summary covering the item goes too.
_TOMBSTONE = f"""UPDATE conversation_items SET item = NULL
WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND id = %(id)s AND {_SHOWN}
RETURNING seq"""
_DROP_SUMMARY = """UPDATE conversations SET summary = NULL, summary_seq = NULL
WHERE tenant_id = %(tenant)s AND id = %(conversation)s AND summary_seq >= %(seq)s"""
# A summary is cached only when it reaches further than the one in place (concurrent turns may race).
_CACHE_SUMMARY = """UPDATE conversations c SET summary = %(summary)s, summary_seq = i.seq
FROM conversation_items i
WHERE c.tenant_id = %(tenant)s AND c.id = %(conversation)s AND i.tenant_id = %(tenant)s
  AND i.conversation_id = %(conversation)s AND i.id = %(through)s
  AND (c.summary_seq IS NULL OR c.summary_seq < i.seq)"""


def conversation_not_found(conversation_id: str, param: str) -> NotFoundError:
    """The 404 for a conversation the tenant does not have (``param`` names the field that held the id)."""
    return NotFoundError(f"No conversation found with id '{conversation_id}'.", param=param)


def create(conn: psycopg.Connection, tenant_id: str, conversation_id: str, metadata: dict[str, str]) -> Conversation:
    """Insert a conversation (its tenant row created if missing); add its first items with :func:`add_items`."""
    conn.execute(_INSERT_TENANT, (tenant_id,))
    with conn.cursor(row_factory=class_row(Conversation)) as cur:
        row = cur.execute(_INSERT, {"id": conversation_id, "tenant": tenant_id,
                                    "metadata": Jsonb(metadata)}).fetchone()
    assert row is not None  # INSERT ... RETURNING
    return row


def get(conn: psycopg.Connection, tenant_id: str, conversation_id: str, *,
        param: str = "conversation_id") -> Conversation:
    """The tenant's conversation.

    Raises:
        NotFoundError: no such conversation for this tenant (``param`` names the field that held the id).
    """
    with conn.cursor(row_factory=class_row(Conversation)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": conversation_id}).fetchone()
    if row is None:
        raise conversation_not_found(conversation_id, param)
    return row


def lock(conn: psycopg.Connection, tenant_id: str, conversation_id: str) -> bool:
    """Inside a transaction: hold the conversation against deletion until commit; False when it does not exist."""
    return conn.execute(_LOCK, {"tenant": tenant_id, "id": conversation_id}).fetchone() is not None


def list_page(conn: psycopg.Connection, tenant_id: str, page: Page) -> tuple[list[Conversation], bool]:
    """One page of the tenant's conversations by creation (ids are time-ordered): ``(rows, has_more)``."""
    where, order, params = keyset(page, "id")
    with conn.cursor(row_factory=class_row(Conversation)) as cur:
        rows = cur.execute(sql.SQL(_PAGE).format(keyset=where, order=order), {"tenant": tenant_id, **params}).fetchall()
    return trim(page, rows)


def update_metadata(conn: psycopg.Connection, tenant_id: str, conversation_id: str,
                    metadata: dict[str, str]) -> Conversation:
    """Replace a conversation's metadata.

    Raises:
        NotFoundError: no such conversation for this tenant.
    """
    with conn.cursor(row_factory=class_row(Conversation)) as cur:
        row = cur.execute(_UPDATE, {"tenant": tenant_id, "id": conversation_id, "metadata": Jsonb(metadata)}).fetchone()
    if row is None:
        raise conversation_not_found(conversation_id, "conversation_id")
    return row


def delete(conn: psycopg.Connection, tenant_id: str, conversation_id: str) -> None:
    """Delete a conversation and its items.

    Raises:
        NotFoundError: no such conversation for this tenant.
    """
    if conn.execute(_DELETE, {"tenant": tenant_id, "id": conversation_id}).rowcount == 0:
        raise conversation_not_found(conversation_id, "conversation_id")


def live_ids(conn: psycopg.Connection, tenant_id: str, conversation_id: str, item_ids: Sequence[str]) -> set[str]:
    """Which of ``item_ids`` name live (not deleted) items of the conversation."""
    rows = conn.execute(_LIVE_IDS, {"tenant": tenant_id, "conversation": conversation_id, "ids": list(item_ids)})
    return {row[0] for row in rows}


def add_items(conn: psycopg.Connection, tenant_id: str, conversation_id: str, items: Sequence[dict[str, Any]], *,
              turn: str) -> None:
    """Append ``items`` (each with an ``id``, unique among the conversation's live items: check with
    :func:`live_ids`) in order, as one ``turn``. Run it in a transaction that holds :func:`lock` (or created the
    conversation). An id that became live concurrently is skipped."""
    params = {"tenant": tenant_id, "conversation": conversation_id}
    conn.execute(_CLEAR_TOMBSTONES, {**params, "ids": [item["id"] for item in items]})
    with conn.cursor() as cur:
        cur.executemany(_INSERT_ITEM, [{**params, "id": item["id"], "turn": turn, "item": Jsonb(item)}
                                       for item in items])


def history(conn: psycopg.Connection, tenant_id: str, conversation_id: str,
            after_seq: int | None) -> list[HistoryRow]:
    """The conversation's live items after position ``after_seq`` (all when None), in order."""
    with conn.cursor(row_factory=class_row(HistoryRow)) as cur:
        return cur.execute(_HISTORY, {"tenant": tenant_id, "conversation": conversation_id,
                                      "after_seq": after_seq}).fetchall()


def items_page(conn: psycopg.Connection, tenant_id: str, conversation_id: str,
               page: Page) -> tuple[list[dict[str, Any]], bool]:
    """One page of the conversation's live items in ``page.order`` of position, after the item ``page.after``
    (an item id, possibly deleted since): ``(items, has_more)``. The conversation's existence is the caller's
    check.

    Raises:
        InvalidRequestError: (400, param ``after``) ``page.after`` was never an item of the conversation.
    """
    params = {"tenant": tenant_id, "conversation": conversation_id, "after": page.after}
    if page.after is not None and conn.execute(_CURSOR_SEEN, params).fetchone() is None:
        raise cursor_not_in_list("after", page.after, "this conversation")
    ascending = page.order == "asc"
    query = sql.SQL(_ITEMS_PAGE).format(op=sql.SQL(">" if ascending else "<"),
                                        direction=sql.SQL("ASC" if ascending else "DESC"))
    rows = conn.execute(query, {"tenant": tenant_id, "conversation": conversation_id, "after": page.after,
                                "page_limit": page.limit + 1}).fetchall()
    return [row[0] for row in rows[:page.limit]], len(rows) > page.limit


def get_item(conn: psycopg.Connection, tenant_id: str, conversation_id: str, item_id: str) -> dict[str, Any]:
    """A live item of the conversation.

    Raises:
        NotFoundError: no such item (or it was deleted).
    """
    row = conn.execute(_ITEM, {"tenant": tenant_id, "conversation": conversation_id, "id": item_id}).fetchone()
    if row is None:
        raise _item_not_found(conversation_id, item_id)
    return row[0]


def delete_item(conn: psycopg.Connection, tenant_id: str, conversation_id: str, item_id: str) -> None:
    """Delete an item (its row stays as a tombstone) and the cached summary if it covers the item; run it in a
    transaction.

    Raises:
        NotFoundError: no such live item (a hidden ``memory_search_call`` row counts as none).
    """
    params = {"tenant": tenant_id, "conversation": conversation_id, "id": item_id}
    row = conn.execute(_TOMBSTONE, params).fetchone()
    if row is None:
        raise _item_not_found(conversation_id, item_id)
    conn.execute(_DROP_SUMMARY, {**params, "seq": row[0]})


def cache_summary(conn: psycopg.Connection, tenant_id: str, conversation_id: str, summary: Summary) -> None:
    """Cache ``summary`` (covering items up to ``summary["through"]``) on the conversation, unless a summary
    reaching as far or further is already there."""
    conn.execute(_CACHE_SUMMARY, {"tenant": tenant_id, "conversation": conversation_id, "summary": Jsonb(summary),
                                  "through": summary["through"]})


def _item_not_found(conversation_id: str, item_id: str) -> NotFoundError:
    return NotFoundError(f"No item found with id '{item_id}' in conversation '{conversation_id}'.", param="item_id")
