"""Engram's Chalice application: wiring only (routes, middleware, event handlers). Logic lives in chalicelib/."""

from chalice import Chalice

from chalicelib.api.middleware import render_errors

app = Chalice(app_name="engram")
app.register_middleware(render_errors, "http")


@app.route("/health")
def health() -> dict:
    """Liveness probe: ``{"status": "ok"}``."""
    return {"status": "ok"}
