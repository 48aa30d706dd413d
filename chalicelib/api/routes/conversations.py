"""Conversations API: ``/v1/conversations`` (SDK ``client.conversations`` and ``client.conversations.items``), over
:mod:`chalicelib.responses.conversations`. ``GET /v1/conversations`` (a cursor page of the tenant's conversations)
is Engram's addition."""

from __future__ import annotations

from types import ModuleType

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import objects, request
from chalicelib.api.context import current_tenant
from chalicelib.api.query import ARRAY, PAGE, PAGE_FORWARD, accepts
from chalicelib.api.routes.common import respond

bp = Blueprint(__name__)


def _conversations() -> ModuleType:
    """``chalicelib.responses.conversations``, imported on first use (the Responses code stays out of the API
    function's cold start, as in :mod:`chalicelib.api.routes.responses`)."""
    from chalicelib.responses import conversations

    return conversations


@bp.route("/conversations", methods=["POST"])
def create_conversation() -> Response:
    """``conversations.create(items=, metadata=)``."""
    body = request.json_body(bp.current_request)
    return respond(_conversations().create(deps.current_settings(), current_tenant(), body))


@bp.route("/conversations", methods=["GET"])
@accepts(**PAGE)
def list_conversations() -> dict:
    """Engram's: a cursor page of the tenant's conversations (``limit``, ``order`` default ``desc``, ``after``,
    ``before``)."""
    page = request.page(request.query(bp.current_request), prefix=ids.CONVERSATION, default_limit=20,
                        max_limit=100)
    data, has_more = _conversations().list_conversations(deps.current_settings(), current_tenant(), page)
    return objects.cursor_page(data, has_more)


@bp.route("/conversations/{conversation_id}", methods=["GET"])
def retrieve_conversation(conversation_id: str) -> Response:
    """``conversations.retrieve(id)``."""
    return respond(_conversations().retrieve(deps.current_settings(), current_tenant(), conversation_id))


@bp.route("/conversations/{conversation_id}", methods=["POST"])
def update_conversation(conversation_id: str) -> Response:
    """``conversations.update(id, metadata=)``."""
    body = request.json_body(bp.current_request)
    return respond(_conversations().update(deps.current_settings(), current_tenant(), conversation_id, body))


@bp.route("/conversations/{conversation_id}", methods=["DELETE"])
def delete_conversation(conversation_id: str) -> Response:
    """``conversations.delete(id)``."""
    return respond(_conversations().delete(deps.current_settings(), current_tenant(), conversation_id))


@bp.route("/conversations/{conversation_id}/items", methods=["GET"])
@accepts(include=ARRAY, **PAGE_FORWARD)
def list_items(conversation_id: str) -> dict:
    """``conversations.items.list(id, after=, include=, limit=, order=)`` → a cursor page (default ``desc``)."""
    page = request.page(request.query(bp.current_request), prefix=None, default_limit=20, max_limit=100,
                        before=False)
    data, has_more = _conversations().list_items(deps.current_settings(), current_tenant(), conversation_id, page,
                                                 include=_include())
    return objects.cursor_page(data, has_more)


@bp.route("/conversations/{conversation_id}/items", methods=["POST"])
@accepts(include=ARRAY)
def create_items(conversation_id: str) -> dict:
    """``conversations.items.create(id, items=, include=)`` → the list of items added."""
    body = request.json_body(bp.current_request)
    data = _conversations().add_items(deps.current_settings(), current_tenant(), conversation_id, body,
                                      include=_include())
    return objects.cursor_page(data, False)


@bp.route("/conversations/{conversation_id}/items/{item_id}", methods=["GET"])
@accepts(include=ARRAY)
def retrieve_item(conversation_id: str, item_id: str) -> Response:
    """``conversations.items.retrieve(item_id, conversation_id=, include=)``."""
    return respond(_conversations().retrieve_item(deps.current_settings(), current_tenant(), conversation_id,
                                                  item_id, include=_include()))


@bp.route("/conversations/{conversation_id}/items/{item_id}", methods=["DELETE"])
def delete_item(conversation_id: str, item_id: str) -> Response:
    """``conversations.items.delete(item_id, conversation_id=)`` → the conversation."""
    return respond(_conversations().delete_item(deps.current_settings(), current_tenant(), conversation_id,
                                                item_id))


def _include() -> list[str]:
    """The request's ``include`` values (``include[]=a&include[]=b`` or ``include=a``), in order."""
    return list(request.query(bp.current_request).array("include"))
