"""Observability middleware: JSON request logs with request id and tenant, one EMF document per request."""

from __future__ import annotations

import json
import threading

import pytest
from chalice import BadRequestError, Chalice
from chalice.app import Request, Response
from chalice.test import Client

from chalicelib import observability as obs
from chalicelib.observability import (
    ERRORS_4XX,
    ERRORS_5XX,
    REQUEST_LATENCY,
    REQUESTS,
    SEARCH_LATENCY,
    observe,
    record,
    set_tenant,
)


@pytest.fixture(autouse=True)
def _metrics_on():
    obs.configure(True)
    yield
    obs.configure(True)


@pytest.fixture()
def app() -> Chalice:
    app = Chalice(app_name="observability-test")
    app.register_middleware(observe, "http")

    @app.route("/search/{store_id}")
    def search(store_id):
        set_tenant("acme")
        record(SEARCH_LATENCY, 12.5)
        obs.get_logger().info("inside route")
        return {"store": store_id}

    @app.route("/bad")
    def bad():
        raise BadRequestError("nope")

    @app.route("/boom")
    def boom():
        raise RuntimeError("kaboom")

    return app


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def _emf(docs: list[dict]) -> list[dict]:
    return [d for d in docs if "_aws" in d]


def _request_logs(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d.get("message") == "request"]


def _v(doc: dict, name: str) -> float:
    """The single value of a metric in an EMF document (powertools writes values as a list)."""
    (value,) = doc[name]
    return value


def _metric_names(doc: dict) -> set[str]:
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    return {m["Name"] for m in directive["Metrics"]}


def test_success_emits_one_emf_document_and_one_log_line(app, capsys):
    with Client(app) as client:
        response = client.http.get("/search/vs_1")
    assert response.status_code == 200
    request_id = response.headers["x-request-id"]
    assert request_id

    docs = _lines(capsys.readouterr().out)
    (emf,) = _emf(docs)
    directive = emf["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Engram"
    assert directive["Dimensions"] == [["service"]]
    assert isinstance(emf["_aws"]["Timestamp"], int)
    assert {REQUEST_LATENCY, SEARCH_LATENCY, REQUESTS, ERRORS_4XX, ERRORS_5XX} <= _metric_names(emf)
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units[REQUEST_LATENCY] == "Milliseconds" and units[REQUESTS] == "Count"
    assert _v(emf, SEARCH_LATENCY) == 12.5
    assert _v(emf, REQUEST_LATENCY) >= 0
    assert (_v(emf, REQUESTS), _v(emf, ERRORS_4XX), _v(emf, ERRORS_5XX)) == (1, 0, 0)
    assert emf["route"] == "/search/{store_id}" and emf["method"] == "GET" and emf["status"] == 200
    assert emf["request_id"] == request_id and emf["tenant"] == "acme" and emf["service"] == "engram"

    (line,) = _request_logs(docs)
    assert line["request_id"] == request_id
    assert line["tenant"] == "acme"
    assert line["status"] == 200
    assert line["method"] == "GET"
    assert line["route"] == "/search/{store_id}"
    assert line["path"] == "/search/vs_1"
    assert line["latency_ms"] >= 0
    assert line["service"] == "engram" and line["level"] == "INFO"

    (inside,) = [d for d in docs if d.get("message") == "inside route"]
    assert inside["request_id"] == request_id and inside["tenant"] == "acme"


def test_request_id_comes_from_header_and_keys_do_not_leak(app, capsys):
    with Client(app) as client:
        first = client.http.get("/search/vs_1", headers={"x-request-id": "req-123"})
        second = client.http.get("/bad")
    assert first.headers["x-request-id"] == "req-123"
    assert second.headers["x-request-id"] not in ("", "req-123")

    docs = _lines(capsys.readouterr().out)
    lines = _request_logs(docs)
    assert [d["request_id"] for d in lines] == ["req-123", second.headers["x-request-id"]]
    assert "tenant" not in lines[1]  # tenant of the previous request is gone
    assert len(_emf(docs)) == 2


def test_4xx_and_5xx_counters(app, capsys):
    with Client(app) as client:
        bad = client.http.get("/bad")
        boom = client.http.get("/boom")
    assert bad.status_code == 400 and boom.status_code == 500
    assert "x-request-id" in bad.headers and "x-request-id" in boom.headers

    docs = _lines(capsys.readouterr().out)
    emf_bad, emf_boom = _emf(docs)
    assert (_v(emf_bad, ERRORS_4XX), _v(emf_bad, ERRORS_5XX), emf_bad["status"]) == (1, 0, 400)
    assert (_v(emf_boom, ERRORS_4XX), _v(emf_boom, ERRORS_5XX), emf_boom["status"]) == (0, 1, 500)
    assert SEARCH_LATENCY not in _metric_names(emf_bad)
    log_bad, log_boom = _request_logs(docs)
    assert (log_bad["status"], log_bad["level"]) == (400, "INFO")
    assert (log_boom["status"], log_boom["level"]) == (500, "ERROR")


def test_metrics_failure_never_changes_the_response(app, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("metrics backend exploded")

    monkeypatch.setattr(obs, "_emit_metrics", broken)
    monkeypatch.setattr(obs, "_request_id", broken)  # even a failing start phase is harmless
    monkeypatch.setattr(obs, "_publish_outside_requests", True)  # as in Lambda
    with Client(app) as client:
        response = client.http.get("/search/vs_1")
    assert response.status_code == 200
    assert json.loads(response.body) == {"store": "vs_1"}
    emfs = _emf(_lines(capsys.readouterr().out))
    # no request document; the route's own metric was published on its own (no request context was set up)
    assert [_metric_names(d) for d in emfs] == [{SEARCH_LATENCY}]


def test_exception_escaping_the_route_is_counted_and_reraised(capsys):
    class Teapot(Exception):
        status = 418

    event = _event("/x")

    def handler(_):
        raise Teapot()

    with pytest.raises(Teapot):
        observe(event, handler)
    docs = _lines(capsys.readouterr().out)
    (emf,) = _emf(docs)
    assert (emf["status"], _v(emf, ERRORS_4XX)) == (418, 1)
    (line,) = _request_logs(docs)
    assert line["error_type"] == "Teapot"


def test_each_rendered_error_carries_its_own_request_id(capsys):
    """Errors rendered by the error middleware get a fresh header dict each: the request id observability adds to
    one response must not show up on the next."""
    from chalicelib.api.middleware import render_errors
    from chalicelib.errors import RateLimitError

    app = Chalice(app_name="observability-errors-test")
    app.register_middleware(observe, "http")
    app.register_middleware(render_errors, "http")

    @app.route("/limited")
    def limited():
        raise RateLimitError("slow down")

    with Client(app) as client:
        first = client.http.get("/limited", headers={"x-request-id": "req-a"})
        second = client.http.get("/limited", headers={"x-request-id": "req-b"})
    assert (first.status_code, second.status_code) == (429, 429)
    assert (first.headers["x-request-id"], second.headers["x-request-id"]) == ("req-a", "req-b")


def test_disabled_metrics_emit_no_emf_but_still_log(app, capsys):
    obs.configure(False)
    with Client(app) as client:
        assert client.http.get("/search/vs_1").status_code == 200
    captured = capsys.readouterr()
    docs = _lines(captured.out)
    assert _emf(docs) == []
    assert len(_request_logs(docs)) == 1
    assert captured.err == ""


def test_record_outside_a_request_is_dropped_off_lambda(capsys):
    record(obs.RESULTS_RETURNED, 7, unit="Count")
    assert capsys.readouterr().out == ""  # the CLI's stdout stays its own


def test_record_outside_a_request_publishes_immediately_in_lambda(capsys, monkeypatch):
    monkeypatch.setattr(obs, "_publish_outside_requests", True)
    record(obs.RESULTS_RETURNED, 7, unit="Count")
    record("Bad", 1, unit="NotAUnit")  # dropped, never raises
    (emf,) = _emf(_lines(capsys.readouterr().out))
    assert _v(emf, obs.RESULTS_RETURNED) == 7
    assert _metric_names(emf) == {obs.RESULTS_RETURNED}


def test_no_warnings_on_stderr(app, capsys, recwarn):
    with Client(app) as client:
        client.http.get("/search/vs_1")
        client.http.get("/bad")
    assert capsys.readouterr().err == ""
    assert not [w for w in recwarn if "metrics" in str(w.message).lower()]


def _event(path: str, request_id: str | None = None) -> Request:
    context = {"httpMethod": "GET", "resourcePath": path, "path": path}
    if request_id:
        context["requestId"] = request_id
    return Request(
        {
            "multiValueQueryStringParameters": None,
            "headers": {},
            "pathParameters": None,
            "requestContext": context,
            "body": None,
            "stageVariables": None,
        }
    )


def test_tenants_do_not_leak_across_threads(capsys):
    barrier = threading.Barrier(2, timeout=5)
    errors: list[BaseException] = []

    def handler_for(tenant: str):
        def handler(event):
            set_tenant(tenant)
            barrier.wait()  # both tenants are set before either logs
            obs.get_logger().info("work")
            barrier.wait()  # both have logged before either finishes (and clears its keys)
            record(SEARCH_LATENCY, 1.0)
            return Response(body="ok")

        return handler

    def run(tenant: str) -> None:
        try:
            response = observe(_event("/t", request_id=f"req-{tenant}"), handler_for(tenant))
            assert response.headers["x-request-id"] == f"req-{tenant}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in ("acme", "globex")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

    docs = _lines(capsys.readouterr().out)
    work = [d for d in docs if d.get("message") in ("work", "request")]
    assert len(work) == 4
    for doc in work:
        assert doc["request_id"] == f"req-{doc['tenant']}"
    emfs = _emf(docs)
    assert len(emfs) == 2
    for doc in emfs:
        assert doc["request_id"] == f"req-{doc['tenant']}"
        assert _v(doc, SEARCH_LATENCY) == 1.0 and _v(doc, REQUESTS) == 1


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, chalicelib.observability; print(any(m.startswith('aws_lambda_powertools') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
