"""Responses API: ``/v1/responses`` (OPENAI-COMPAT.md §4), over :mod:`chalicelib.responses.service`.

``stream: true`` answers ``text/event-stream`` with every event at once: API Gateway's REST integration cannot
stream, and the SDK parses the body the same way. Incremental streaming is the streaming front's job
(:mod:`chalicelib.api.streaming_front`).
"""

from __future__ import annotations

from chalice import Blueprint
from chalice.app import Response

from chalicelib import deps, ids
from chalicelib.api import objects, request
from chalicelib.api.context import current_access, current_tenant
from chalicelib.api.query import ARRAY, BOOLEAN, PAGE, accepts
from chalicelib.api.routes.common import respond

bp = Blueprint(__name__)


def _service():
    """``chalicelib.responses.service``, imported on first use: the loop, the chat backends and the search stay
    out of the API function's cold start (benchmarks/coldstart.py)."""
    from chalicelib.responses import service

    return service


def _sse_encode(event: dict) -> bytes:
    from chalicelib.responses.sse import encode

    return encode(event)


def _include() -> list[str]:
    return list(request.query(bp.current_request).array("include"))


@bp.route("/responses", methods=["POST"])
def create_response() -> Response:
    """``responses.create(model=, input=, tools=, ..., stream=)``: a Response object, or its SSE stream."""
    body = request.json_body(bp.current_request)
    settings, tenant = deps.current_settings(), current_tenant()
    if body.get("stream") is True:
        events = _service().stream_events(settings, tenant, body, access=current_access())
        payload = b"".join(_sse_encode(event) for event in events)
        return Response(body=payload.decode("utf-8"), status_code=200,
                        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"})
    return respond(_service().create_response(settings, tenant, body, access=current_access()))


@bp.route("/responses", methods=["GET"])
@accepts("conversation", include=ARRAY, **PAGE)
def list_responses() -> dict:
    """Engram's: a cursor page of the tenant's stored responses (``limit``, ``order`` default ``desc``, ``after``,
    ``before``; ``conversation=conv_...``: only the responses of that conversation; ``include`` as on retrieve)."""
    params = request.query(bp.current_request)
    page = request.page(params, prefix=ids.RESPONSE, default_limit=20, max_limit=100)
    data, has_more = _service().list_responses(deps.current_settings(), current_tenant(), page,
                                               conversation_id=params.get("conversation"), include=_include())
    return objects.cursor_page(data, has_more)


@bp.route("/responses/{response_id}", methods=["GET"])
@accepts(include=ARRAY, include_obfuscation=BOOLEAN)
def retrieve_response(response_id: str) -> Response:
    """``responses.retrieve(id, include=)``."""
    return respond(_service().retrieve(deps.current_settings(), current_tenant(), response_id, include=_include()))


@bp.route("/responses/{response_id}", methods=["DELETE"])
def delete_response(response_id: str) -> Response:
    """``responses.delete(id)``."""
    return respond(_service().delete(deps.current_settings(), current_tenant(), response_id))


@bp.route("/responses/{response_id}/input_items", methods=["GET"])
@accepts(include=ARRAY, **PAGE)
def list_input_items(response_id: str) -> dict:
    """``responses.input_items.list(id, limit=, order=, after=, include=)`` → a cursor page (default ``desc``)."""
    page = request.page(request.query(bp.current_request), prefix=None, default_limit=20, max_limit=100)
    data, has_more = _service().input_items(deps.current_settings(), current_tenant(), response_id, page,
                                         include=_include())
    return objects.cursor_page(data, has_more)


@bp.route("/responses/{response_id}/cancel", methods=["POST"])
def cancel_response(response_id: str) -> Response:
    """``responses.cancel(id)``: 400 — only background responses can be cancelled, and Engram runs none."""
    return respond(_service().cancel(deps.current_settings(), current_tenant(), response_id))
