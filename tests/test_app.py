"""The Chalice app: health route and the OpenAI error envelope from the one middleware."""

from __future__ import annotations

import json

from chalice.test import Client

from app import app
from chalicelib.errors import NotFoundError


def test_health():
    with Client(app) as client:
        response = client.http.get("/health")
    assert response.status_code == 200 and response.json_body == {"status": "ok"}


def test_errors_render_as_openai_envelope():
    @app.route("/_test/missing")
    def missing():
        raise NotFoundError("No vector store found with id 'vs_x'.", param="vector_store_id")

    @app.route("/_test/boom")
    def boom():
        raise RuntimeError("secret internals")

    with Client(app) as client:
        response = client.http.get("/_test/missing")
        assert response.status_code == 404
        assert json.loads(response.body) == {"error": {"message": "No vector store found with id 'vs_x'.",
                                                        "type": "invalid_request_error",
                                                        "param": "vector_store_id", "code": "not_found"}}
        response = client.http.get("/_test/boom")
        assert response.status_code == 500
        body = json.loads(response.body)
        assert body["error"]["type"] == "server_error" and "secret" not in response.body.decode()
