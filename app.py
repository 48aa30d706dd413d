"""Engram's Chalice application: wiring only (middleware, blueprints, event handlers). Logic lives in chalicelib/.

Middleware runs outermost first: observability (request id, latency, EMF metrics), then the error renderer
(OpenAI's envelope for everything), then authentication (API key → tenant).
"""

from chalice import Chalice, Rate

from chalicelib.api.context import authenticate
from chalicelib.api.middleware import render_errors
from chalicelib.api.observability import observe
from chalicelib.api.routes import file_batches, files, responses, uploads, vector_store_files, vector_stores
from chalicelib.events.queues import EMBED_QUEUE, INGEST_QUEUE

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
for blueprint in (files.bp, vector_stores.bp, vector_store_files.bp, file_batches.bp, uploads.bp, responses.bp):
    app.register_blueprint(blueprint, url_prefix=API_PREFIX)


@app.route("/health")
def health() -> dict:
    """Liveness probe: ``{"status": "ok"}`` (no API key needed)."""
    return {"status": "ok"}


# --- serverless ingestion (chalicelib/events): handler modules are imported on first call, not at cold start ---

@app.on_sqs_message(queue=INGEST_QUEUE, batch_size=10, maximum_batching_window_in_seconds=1)
def ingest(event) -> dict:
    """S3 drop-folder events and ``ingest.file`` messages: parse, chunk, stage, fan out embedding batches."""
    from chalicelib.events import ingest_handler

    return ingest_handler.handle(event.to_dict(), event.context)


@app.on_sqs_message(queue=EMBED_QUEUE, batch_size=4)
def embed(event) -> dict:
    """``embed.batch`` messages: embed one batch; the last one swaps the file's chunks in."""
    from chalicelib.events import embed_handler

    return embed_handler.handle(event.to_dict(), event.context)


@app.schedule(Rate(5, unit=Rate.MINUTES))
def housekeeping(event) -> dict:
    """Retry or fail stuck files, expire stores and files, purge finished jobs, remove orphaned S3 objects."""
    from chalicelib import deps
    from chalicelib.events import scheduled

    return scheduled.housekeeping(deps.current_settings())


@app.schedule(Rate(1, unit=Rate.HOURS))
def memory_jobs(event) -> dict:
    """Memory consolidation, decay and summarization: the jobs registered in ``scheduled.MEMORY_JOBS``."""
    from chalicelib import deps
    from chalicelib.events import scheduled

    return scheduled.memory_jobs(deps.current_settings())
