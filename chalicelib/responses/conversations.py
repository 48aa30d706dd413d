"""OpenAI's Conversations API (SDK ``resources/conversations``, ``types/conversations``) and conversations as the
history of responses.

A conversation (``conv_…``) holds items in the Responses API's shapes — ``message``, ``function_call``,
``function_call_output``, ``file_search_call`` — with the ids they were given (a response's ``msg_…``/``fc_…``/
``fs_…``, or the client's). Items are added by ``conversations.create(items=)`` and ``conversations.items.create``
(at most :data:`MAX_ITEMS` at a time) and by every response created with ``conversation``: its input and output
items are appended when it completes (or ends ``incomplete``), streamed or not, whether or not the response itself
is stored (``store``); a failed response adds nothing. Such a response reads the conversation's live items as its
history, condensed by the same summarization as ``previous_response_id`` chains (:mod:`history`,
:mod:`summarize`); the summary is cached on the conversation. ``conversation`` and ``previous_response_id``
together are refused, with OpenAI's error. Item ids are unique among a conversation's live items ("Duplicate item
found with id …").

``file_search_call.results`` are stored and shown only when ``include`` asks for them, as on responses. Engram's
``memory_search_call`` item is never a conversation item: a response's turn is recorded without it, one sent in
``items`` is accepted and dropped (``conversations.items.create`` with nothing else adds nothing and answers an
empty list), and reads never show one (rows written before this rule stay hidden). Listing a tenant's
conversations (``GET /v1/conversations``) is Engram's addition: OpenAI has no such endpoint.

Entry points take the settings, the tenant and the request's parts, open a tenant connection (row-level security)
and return wire objects; :func:`requested`, :func:`load_chain` and :func:`record_turn` serve
:mod:`chalicelib.responses.service`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from itertools import groupby
from typing import Any

import psycopg
from pydantic import Field

from chalicelib import ids
from chalicelib.config import Settings
from chalicelib.errors import InvalidRequestError
from chalicelib.responses import conversations_store as cstore
from chalicelib.responses import items, schemas
from chalicelib.responses.objects import hide_results, is_memory_item, visible_items
from chalicelib.responses.tokens import messages_tokens
from chalicelib.responses.turns import Chain, Summary, Turn
from chalicelib.store.db import tenant_connection
from chalicelib.store.paging import Page
from chalicelib.validation import RequestBody, validate
from chalicelib.wire import Metadata

__all__ = [
    "MAX_ITEMS",
    "MUTUALLY_EXCLUSIVE",
    "add_items",
    "conversation_object",
    "create",
    "delete",
    "delete_item",
    "list_conversations",
    "list_items",
    "load_chain",
    "record_turn",
    "requested",
    "retrieve",
    "retrieve_item",
    "transcript",
    "update",
]

logger = logging.getLogger("engram.responses")

# "You may add up to 20 items at a time." (SDK: conversations.create and conversations.items.create)
MAX_ITEMS = 20
# OpenAI's answer to a request naming both (code mutually_exclusive_parameters, param null), as OpenAI-compatible
# gateways reproduce it (e.g. SGLang's router).
MUTUALLY_EXCLUSIVE = ("Mutually exclusive parameters. Ensure you are only providing one of: 'previous_response_id' "
                      "or 'conversation'.")
# The prefix of a turn written through the Conversations API (a response's turn is its response id).
TURN = "turn_"


_Body = RequestBody  # unknown fields: 400 unknown_parameter, as on every route


class CreateConversation(_Body):
    """``conversations.create(items=, metadata=)``: both optional (``items`` checked by :func:`_parse_items`)."""

    items: list[dict[str, Any]] | None = None
    metadata: Metadata | None = None


class UpdateConversation(_Body):
    """``conversations.update(id, metadata=)``: ``metadata`` required (null clears it)."""

    metadata: Metadata | None = Field(...)


class CreateItems(_Body):
    """``conversations.items.create(id, items=)``: one to :data:`MAX_ITEMS` items."""

    items: list[dict[str, Any]]


# ---- the Responses API's side ----

def requested(conversation: Any, *, previous_response_id: str | None) -> str | None:
    """The conversation id a ``POST /v1/responses`` body names (``"conv_…"`` or ``{"id": "conv_…"}``), or None.

    Raises:
        InvalidRequestError: (400) ``previous_response_id`` given too (OpenAI's :data:`MUTUALLY_EXCLUSIVE`,
            code ``mutually_exclusive_parameters``), or a malformed value (param ``conversation`` or
            ``conversation.id``).
    """
    if conversation is None:
        return None
    if previous_response_id is not None:
        raise InvalidRequestError(MUTUALLY_EXCLUSIVE, param=None, code="mutually_exclusive_parameters")
    if isinstance(conversation, dict):
        return ids.validate_id(conversation.get("id"), ids.CONVERSATION, param="conversation.id")
    if isinstance(conversation, str):
        return ids.validate_id(conversation, ids.CONVERSATION, param="conversation")
    raise InvalidRequestError("Invalid 'conversation': expected a conversation id or an object with an 'id'.",
                              param="conversation", code="invalid_type")


def load_chain(conn: psycopg.Connection, tenant_id: str, conversation_id: str,
               new_items: list[dict[str, Any]]) -> Chain:
    """The conversation as the turns a response continues (items after the cached summary, grouped by the write
    that added them) with that summary; ``new_items`` (the request's input) must not reuse a live item's id.

    Raises:
        NotFoundError: (404, param ``conversation``) no such conversation for this tenant.
        InvalidRequestError: (400, param ``input``) a duplicate item id.
    """
    conversation = cstore.get(conn, tenant_id, conversation_id, param="conversation")
    _check_unique(conn, tenant_id, conversation_id, new_items, param="input")
    rows = cstore.history(conn, tenant_id, conversation_id, conversation.summary_seq)
    turns = []
    for _, group in groupby(rows, key=lambda row: row.turn):
        turn_items = [row.item for row in group]
        turns.append(Turn(id=turn_items[-1]["id"], input_items=turn_items, output=[],
                          turn_tokens=messages_tokens(items.to_messages(turn_items)), summary=None))
    return Chain(tuple(turns), conversation.summary)


def record_turn(conn: psycopg.Connection, tenant_id: str, conversation_id: str, *, response_id: str,
                turn_items: list[dict[str, Any]] | None, summary: Summary | None) -> None:
    """Inside the transaction that stores a response: append its input and output items (``turn_items``; None
    for a failed response, which adds nothing; ``memory_search_call`` items left out) as one turn, and cache the
    summary computed for it. A conversation deleted meanwhile is left alone (logged)."""
    if not cstore.lock(conn, tenant_id, conversation_id):
        logger.warning("conversation %s was deleted while response %s ran; its items were not added",
                       conversation_id, response_id)
        return
    if summary is not None:
        cstore.cache_summary(conn, tenant_id, conversation_id, summary)
    kept = [item for item in turn_items or [] if not is_memory_item(item)]
    if kept:
        cstore.add_items(conn, tenant_id, conversation_id, kept, turn=response_id)


# ---- the Conversations API ----

def conversation_object(row: cstore.Conversation) -> dict[str, Any]:
    """The ``conversation`` object: ``{"id", "object": "conversation", "created_at" (Unix seconds), "metadata"}``."""
    return {"id": row.id, "object": "conversation", "created_at": _unix(row.created_at), "metadata": row.metadata}


def create(settings: Settings, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/conversations``: a new conversation with ``items`` (0 to :data:`MAX_ITEMS`) and ``metadata``.

    Raises:
        InvalidRequestError: (400) an invalid body (param names the field, e.g. ``items.2.content``), too many
            items, a duplicate item id.
    """
    req = validate(CreateConversation, body)
    new_items = _parse_items(req.items, required=False)
    _unique_within(new_items, param="items")
    with tenant_connection(settings, tenant_id) as conn, conn.transaction():
        row = cstore.create(conn, tenant_id, ids.new_id(ids.CONVERSATION), req.metadata or {})
        if new_items:
            cstore.add_items(conn, tenant_id, row.id, new_items, turn=ids.new_id(TURN))
    return conversation_object(row)


def retrieve(settings: Settings, tenant_id: str, conversation_id: str) -> dict[str, Any]:
    """``GET /v1/conversations/{id}``.

    Raises:
        InvalidRequestError: (400) a malformed id. NotFoundError: (404) no such conversation for this tenant.
    """
    checked = _conversation_id(conversation_id)
    with tenant_connection(settings, tenant_id) as conn:
        return conversation_object(cstore.get(conn, tenant_id, checked))


def update(settings: Settings, tenant_id: str, conversation_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/conversations/{id}``: replace its ``metadata`` (null clears it).

    Raises:
        InvalidRequestError: (400) a malformed id or body. NotFoundError: (404) no such conversation.
    """
    checked = _conversation_id(conversation_id)
    req = validate(UpdateConversation, body)
    with tenant_connection(settings, tenant_id) as conn:
        return conversation_object(cstore.update_metadata(conn, tenant_id, checked, req.metadata or {}))


def delete(settings: Settings, tenant_id: str, conversation_id: str) -> dict[str, Any]:
    """``DELETE /v1/conversations/{id}``: ``{"id", "object": "conversation.deleted", "deleted": true}``. Its items
    go with it; responses that took part keep their own input and output items.

    Raises:
        InvalidRequestError: (400) a malformed id. NotFoundError: (404) no such conversation.
    """
    checked = _conversation_id(conversation_id)
    with tenant_connection(settings, tenant_id) as conn:
        cstore.delete(conn, tenant_id, checked)
    return {"id": checked, "object": "conversation.deleted", "deleted": True}


def list_conversations(settings: Settings, tenant_id: str, page: Page) -> tuple[list[dict[str, Any]], bool]:
    """``GET /v1/conversations`` (Engram's): one page of the tenant's conversations, ``(objects, has_more)``."""
    with tenant_connection(settings, tenant_id) as conn:
        rows, has_more = cstore.list_page(conn, tenant_id, page)
    return [conversation_object(row) for row in rows], has_more


def list_items(settings: Settings, tenant_id: str, conversation_id: str, page: Page, *,
               include: list[str] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """``GET /v1/conversations/{id}/items``: one page of items by position (``order`` default ``desc``, ``after``
    an item id), ``(items, has_more)``.

    Raises:
        InvalidRequestError: (400) a malformed id or ``include`` value. NotFoundError: (404) no such conversation.
    """
    checked = _conversation_id(conversation_id)
    shown = schemas.include_results(include)
    with tenant_connection(settings, tenant_id) as conn:
        cstore.get(conn, tenant_id, checked)
        data, has_more = cstore.items_page(conn, tenant_id, checked, page)
    return visible_items(data, include_results=shown), has_more


def add_items(settings: Settings, tenant_id: str, conversation_id: str, body: dict[str, Any], *,
              include: list[str] | None = None) -> list[dict[str, Any]]:
    """``POST /v1/conversations/{id}/items``: append 1 to :data:`MAX_ITEMS` items (one turn); the items as
    stored, in order (``memory_search_call`` items are accepted and dropped: the list may be empty).

    Raises:
        InvalidRequestError: (400) a malformed id, body or ``include``; too many items; a duplicate item id.
        NotFoundError: (404) no such conversation.
    """
    checked = _conversation_id(conversation_id)
    req = validate(CreateItems, body)
    shown = schemas.include_results(include)
    new_items = _parse_items(req.items, required=True)
    with tenant_connection(settings, tenant_id) as conn, conn.transaction():
        if not cstore.lock(conn, tenant_id, checked):
            raise cstore.conversation_not_found(checked, "conversation_id")
        _check_unique(conn, tenant_id, checked, new_items, param="items")
        if new_items:
            cstore.add_items(conn, tenant_id, checked, new_items, turn=ids.new_id(TURN))
    return visible_items(new_items, include_results=shown)


def retrieve_item(settings: Settings, tenant_id: str, conversation_id: str, item_id: str, *,
                  include: list[str] | None = None) -> dict[str, Any]:
    """``GET /v1/conversations/{id}/items/{item_id}``.

    Raises:
        InvalidRequestError: (400) a malformed id or ``include``. NotFoundError: (404) no such conversation or
            item.
    """
    checked, item = _conversation_id(conversation_id), _item_id(item_id)
    shown = schemas.include_results(include)
    with tenant_connection(settings, tenant_id) as conn:
        cstore.get(conn, tenant_id, checked)
        return hide_results(cstore.get_item(conn, tenant_id, checked, item), include_results=shown)


def delete_item(settings: Settings, tenant_id: str, conversation_id: str, item_id: str) -> dict[str, Any]:
    """``DELETE /v1/conversations/{id}/items/{item_id}``: the conversation object (as OpenAI answers). A cached
    summary covering the item is dropped.

    Raises:
        InvalidRequestError: (400) a malformed id. NotFoundError: (404) no such conversation or item.
    """
    checked, item = _conversation_id(conversation_id), _item_id(item_id)
    with tenant_connection(settings, tenant_id) as conn, conn.transaction():
        row = cstore.get(conn, tenant_id, checked)
        cstore.delete_item(conn, tenant_id, checked, item)
    return conversation_object(row)


def transcript(settings: Settings, tenant_id: str, conversation_id: str) -> tuple[dict[str, Any],
                                                                                   list[dict[str, Any]]]:
    """The conversation object and all its live items in order, ``file_search_call.results`` included (the CLI's
    ``show``; ``memory_search_call`` items never among them).

    Raises:
        InvalidRequestError: (400) a malformed id. NotFoundError: (404) no such conversation.
    """
    checked = _conversation_id(conversation_id)
    with tenant_connection(settings, tenant_id) as conn:
        row = cstore.get(conn, tenant_id, checked)
        rows = cstore.history(conn, tenant_id, checked, None)
    return conversation_object(row), [r.item for r in rows]


# ---- helpers ----

def _parse_items(raw: list[dict[str, Any]] | None, *, required: bool) -> list[dict[str, Any]]:
    """Items of a Conversations API body in their stored shape (ids assigned), at most :data:`MAX_ITEMS`;
    ``memory_search_call`` items are dropped (:func:`items.input_items`)."""
    if not raw and not required:
        return []
    return items.input_items(schemas.parse_input(raw or [], param="items", max_items=MAX_ITEMS))


def _unique_within(new_items: list[dict[str, Any]], *, param: str) -> None:
    seen: set[str] = set()
    for item in new_items:
        if item["id"] in seen:
            raise _duplicate(item["id"], param)
        seen.add(item["id"])


def _check_unique(conn: psycopg.Connection, tenant_id: str, conversation_id: str, new_items: list[dict[str, Any]],
                  *, param: str) -> None:
    """Refuse ids repeated within ``new_items`` or already naming live items of the conversation.

    Raises:
        InvalidRequestError: (400, ``param``) OpenAI's "Duplicate item found with id …".
    """
    _unique_within(new_items, param=param)
    taken = cstore.live_ids(conn, tenant_id, conversation_id, [item["id"] for item in new_items])
    if taken:
        raise _duplicate(next(item["id"] for item in new_items if item["id"] in taken), param)


def _duplicate(item_id: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(f"Duplicate item found with id {item_id}. Remove duplicate items from your input and "
                               "try again.", param=param, code="invalid_value")


def _conversation_id(value: str) -> str:
    return ids.validate_id(value, ids.CONVERSATION, param="conversation_id")


def _item_id(value: str) -> str:
    """A path's item id: what an item id may be (:data:`chalicelib.responses.schemas.ITEM_ID`, any prefix:
    clients name their items).

    Raises:
        InvalidRequestError: (400, param ``item_id``) anything else.
    """
    if not schemas.ITEM_ID.fullmatch(value):
        raise InvalidRequestError("Invalid 'item_id': expected an ID of 1 to 128 letters, numbers, underscores, or "
                                  "dashes.", param="item_id", code="invalid_id")
    return value


def _unix(value: datetime) -> int:
    return int(value.timestamp())
