"""Engram's Chalice application: wiring only (middleware, blueprints, queue consumers, schedules). Logic lives in
chalicelib/.

Middleware runs outermost first: observability (request id, latency, EMF metrics), then the error renderer
(OpenAI's envelope for everything; a database that cannot be reached is a 503 with Retry-After, also from inside a
route: every route is wrapped once all are registered, :func:`chalicelib.api.middleware.guard_routes`), then
authentication (API key → tenant and what the key may do), then the route's permission
(:mod:`chalicelib.api.permissions`: 403 for a key without it), then the query-parameter check (a parameter the
route does not declare is a 400: :mod:`chalicelib.api.query`).

One SQS consumer per queue of the message table (``chalicelib.dispatch.table.QUEUES``) and one schedule per lane of
the jobs table (``chalicelib.jobs.table.LANES``) are generated below; each becomes a Lambda function named after
it. Their modules are imported on the first event, not at cold start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chalice import Chalice, Rate, Response

from chalicelib.api import health as checks
from chalicelib.api.context import authenticate
from chalicelib.api.middleware import guard_routes, render_errors
from chalicelib.api.permissions import authorize
from chalicelib.api.query import enforce
from chalicelib.api.routes import (
    agents,
    console,
    conversations,
    drop_folder,
    file_batches,
    files,
    mcp,
    mem0,
    memories,
    operations,
    responses,
    uploads,
    vector_store_files,
    vector_stores,
)
from chalicelib.dispatch.table import QUEUES
from chalicelib.jobs.table import LANES, tick_s
from chalicelib.observability import observe

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

API_PREFIX = "/v1"

app = Chalice(app_name="engram", configure_logs=False)  # powertools owns the "engram" logger
# Multipart uploads must reach the function as bytes (API Gateway base64-encodes binary media types).
app.api.binary_types.append("multipart/form-data")
# The SDK's files.content() sends "Accept: application/binary"; Chalice (and API Gateway) only return a binary body
# when the Accept header names a binary media type.
app.api.binary_types.append("application/binary")
app.register_middleware(observe, "http")
app.register_middleware(render_errors, "http")
app.register_middleware(authenticate, "http")
app.register_middleware(authorize(app.routes), "http")
app.register_middleware(enforce(app.routes), "http")
for blueprint in (files.bp, vector_stores.bp, vector_store_files.bp, file_batches.bp, uploads.bp, responses.bp,
                  conversations.bp, memories.bp, agents.bp, drop_folder.bp, operations.bp):
    app.register_blueprint(blueprint, url_prefix=API_PREFIX)
# mem0's client paths, under their own prefix (chalicelib/api/routes/mem0.py says why).
app.register_blueprint(mem0.bp, url_prefix=mem0.URL_PREFIX)
# Engram as an MCP server (Streamable HTTP, stateless): /mcp, beside the API.
app.register_blueprint(mcp.bp)
# The console (/console): a page and its files, no key needed; everything it shows comes through /v1 with the key
# the user typed.
app.register_blueprint(console.bp)


@app.route(checks.HEALTH_PATH)
def health() -> Response:
    """Readiness probe (no API key needed): 200 ``{"status": "ok", "database": {...}}`` when the database answers,
    else 503 ``{"status": "unavailable", ...}`` with Retry-After (:func:`chalicelib.api.health.readiness`)."""
    from chalicelib import deps

    status, body, headers = checks.readiness(deps.current_settings())
    return Response(body=body, status_code=status, headers={**headers})


@app.route(checks.LIVE_PATH)
def live() -> dict:
    """Liveness probe (no API key needed): ``{"status": "ok"}`` whenever the process answers; touches nothing."""
    return dict(checks.LIVE)


guard_routes(app.routes)


def _consumer(name: str) -> Callable[[Any], PartialItemFailureResponse]:
    def consume(event: Any) -> PartialItemFailureResponse:
        from chalicelib.events import consumer

        return consumer.handle(event.to_dict(), event.context)

    consume.__name__ = consume.__qualname__ = name  # Chalice names the Lambda handler "app.<__name__>"
    consume.__doc__ = f"SQS consumer of {name}: every record through the message table."
    return consume


def _lane(name: str) -> Callable[[Any], dict]:
    def tick(event: Any) -> dict:
        from chalicelib import deps
        from chalicelib.jobs import runner

        outcomes = runner.run_lane(deps.current_settings(), name)
        return {job: {"status": o.status, "counts": o.counts} for job, o in outcomes.items()}

    tick.__name__ = tick.__qualname__ = name
    tick.__doc__ = f"Scheduled lane {name}: its due jobs, bounded, exclusive and recorded."
    return tick


for _queue in QUEUES:
    globals()[_queue.function] = app.on_sqs_message(
        queue=_queue.name, batch_size=_queue.batch_size, name=_queue.function,
        maximum_batching_window_in_seconds=_queue.batching_window_s)(_consumer(_queue.function))
for _lane_row in LANES:
    _minutes = int(tick_s(_lane_row.name) // 60)
    _rate = Rate(_minutes // 60, unit=Rate.HOURS) if _minutes % 60 == 0 else Rate(_minutes, unit=Rate.MINUTES)
    globals()[_lane_row.name] = app.schedule(_rate, name=_lane_row.name)(_lane(_lane_row.name))
