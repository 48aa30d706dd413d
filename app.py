"""Engram's Chalice application: wiring only (middleware, blueprints, event handlers). Logic lives in chalicelib/.

Middleware runs outermost first: observability (request id, latency, EMF metrics), then the error renderer
(OpenAI's envelope for everything), then authentication (API key → tenant).
"""

from chalice import Chalice

from chalicelib.api.context import authenticate
from chalicelib.api.middleware import render_errors
from chalicelib.api.observability import observe
from chalicelib.api.routes import file_batches, files, uploads, vector_store_files, vector_stores

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
for blueprint in (files.bp, vector_stores.bp, vector_store_files.bp, file_batches.bp, uploads.bp):
    app.register_blueprint(blueprint, url_prefix=API_PREFIX)


@app.route("/health")
def health() -> dict:
    """Liveness probe: ``{"status": "ok"}`` (no API key needed)."""
    return {"status": "ok"}
