"""The Chalice app: health route and the OpenAI error envelope from the one middleware."""

from __future__ import annotations

import dataclasses
import json

import pytest
from chalice.test import Client

from app import app
from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.errors import NotFoundError

DEV_KEY = {"Authorization": "Bearer anything"}


@pytest.fixture()
def dev_mode():
    """Development auth: any bearer token acts as the local tenant."""
    deps.set_settings(dataclasses.replace(Settings(), auth_mode="dev"))
    yield
    deps.set_settings(None)


def test_health(settings):
    """/health is readiness (the database answers), /health/live liveness; neither needs a key."""
    deps.set_settings(settings)
    try:
        with Client(app) as client:
            response = client.http.get("/health")
            live = client.http.get("/health/live")
    finally:
        deps.set_settings(None)
    assert response.status_code == 200 and response.json_body["status"] == "ok"
    assert response.json_body["database"]["status"] == "ok"
    assert live.status_code == 200 and live.json_body == {"status": "ok"}


def test_missing_key_is_401_in_the_envelope(dev_mode):
    with Client(app) as client:
        response = client.http.get("/v1/vector_stores")
    assert response.status_code == 401
    error = json.loads(response.body)["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "missing_api_key"
    assert "Authorization" in error["message"]


def test_errors_render_as_openai_envelope(dev_mode):
    @app.route("/_test/missing")
    def missing():
        raise NotFoundError("No vector store found with id 'vs_x'.", param="vector_store_id")

    @app.route("/_test/boom")
    def boom():
        raise RuntimeError("secret internals")

    with Client(app) as client:
        response = client.http.get("/_test/missing", headers=DEV_KEY)
        assert response.status_code == 404
        assert json.loads(response.body) == {"error": {"message": "No vector store found with id 'vs_x'.",
                                                        "type": "invalid_request_error",
                                                        "param": "vector_store_id", "code": "not_found"}}
        response = client.http.get("/_test/boom", headers=DEV_KEY)
        assert response.status_code == 500
        body = json.loads(response.body)
        assert body["error"]["type"] == "server_error" and "secret" not in response.body.decode()
