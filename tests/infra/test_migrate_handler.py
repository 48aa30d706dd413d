"""The MigrateFunction's handler (infra/functions/engram_migrate.py) against the real embedded Postgres, answering
CloudFormation's custom-resource protocol to a real local HTTP server standing in for the presigned ResponseURL."""

from __future__ import annotations

import http.server
import importlib.util
import json
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from infra import build


def _load_handler():
    spec = importlib.util.spec_from_file_location("engram_migrate", build.FUNCTIONS_DIR / "engram_migrate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


engram_migrate = _load_handler()
CONTEXT = SimpleNamespace(log_stream_name="2026/01/01/[$LATEST]abc")


@pytest.fixture()
def response_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP server recording every PUT body (as CloudFormation's S3 response bucket would)."""
    received: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append({"content_type": self.headers.get("Content-Type"), **json.loads(body)})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/response?X-Amz-Signature=x", received
    server.shutdown()
    server.server_close()


def request(kind: str, url: str, **extra: Any) -> dict[str, Any]:
    """A custom-resource request as CloudFormation sends it."""
    return {"RequestType": kind, "ResponseURL": url, "StackId": "arn:aws:cloudformation:us-east-1:123:stack/engram/1",
            "RequestId": "req-1", "LogicalResourceId": "DatabaseMigration", "ResourceType": "Custom::EngramMigration",
            "ResourceProperties": {"Migrations": build.migration_versions()}, **extra}


def applied(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


def test_create_migrates_and_update_is_idempotent(module_database: str, response_url, monkeypatch) -> None:
    url, received = response_url
    monkeypatch.setenv("DATABASE_URL", module_database)
    engram_migrate.handler(request("Create", url), CONTEXT)
    engram_migrate.handler(request("Update", url, PhysicalResourceId="engram-database-migrations"), CONTEXT)
    first, second = received
    assert first["Status"] == "SUCCESS" and first["content_type"] == ""
    assert first["Data"]["Applied"] == ",".join(build.migration_versions())
    assert (first["StackId"], first["RequestId"], first["LogicalResourceId"]) == (
        "arn:aws:cloudformation:us-east-1:123:stack/engram/1", "req-1", "DatabaseMigration")
    assert second["Status"] == "SUCCESS" and second["Data"]["Applied"] == "none"
    assert first["PhysicalResourceId"] == second["PhysicalResourceId"] == "engram-database-migrations"
    assert applied(module_database) == build.migration_versions()
    # A manual invocation (no RequestType) migrates and returns what it applied.
    assert engram_migrate.handler({}, CONTEXT) == {"applied": []}


def test_failures_are_reported_to_cloudformation_and_delete_touches_nothing(response_url, monkeypatch) -> None:
    url, received = response_url
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:9/none?connect_timeout=2")
    engram_migrate.handler(request("Create", url), CONTEXT)
    engram_migrate.handler(request("Delete", url, PhysicalResourceId="engram-database-migrations"), CONTEXT)
    failed, deleted = received
    assert failed["Status"] == "FAILED"
    assert failed["Reason"].startswith("OperationalError") and "abc" in failed["Reason"]
    assert len(json.dumps(failed)) < 4096  # CloudFormation's cap on a response body
    assert deleted["Status"] == "SUCCESS" and deleted["Data"] == {}
