"""The HTTP transport to a Qdrant server (tests/fakes/qdrant_server.py: Qdrant's envelopes and statuses, bodies
checked against its OpenAPI models): what it retries, what it does not, the API key, a missing collection."""

from __future__ import annotations

import pytest

from chalicelib.qdrant import DENSE, SPARSE, QdrantError
from chalicelib.qdrant.http import MAX_ATTEMPTS, HttpTransport
from tests.fakes.qdrant_server import FakeQdrantServer

POINT = {"id": 7, "vector": {DENSE: [1.0, 0.0, 0.0], SPARSE: {"indices": [3], "values": [1.5]}},
         "payload": {"tenant_id": "acme", "vector_store_id": "vs_1", "file_id": "file-1"}}
ACME = {"must": [{"key": "tenant_id", "match": {"value": "acme"}}]}


@pytest.fixture()
def fake(tmp_path):
    with FakeQdrantServer(tmp_path, api_key="secret") as server:
        yield server


@pytest.fixture()
def qdrant(fake):
    transport = HttpTransport(fake.url, api_key="secret", timeout_s=5)
    yield transport
    transport.close()


def test_a_collection_is_made_once_and_answers_searches(fake, qdrant):
    assert qdrant.query_batch("c", [{"query": [1.0, 0.0, 0.0], "using": DENSE, "limit": 3}]) == [[]]  # missing
    assert qdrant.count("c", ACME) == 0
    qdrant.delete("c", ACME)  # a missing collection holds nothing to delete
    qdrant.ensure_collection("c", 3)
    qdrant.ensure_collection("c", 3)  # known: no request
    assert [(m, p) for m, p, _ in fake.requests if p.startswith("/collections/c") and m == "PUT"] == [
        ("PUT", "/collections/c"), ("PUT", "/collections/c/index"), ("PUT", "/collections/c/index"),
        ("PUT", "/collections/c/index")]
    qdrant.upsert("c", [POINT])
    dense, sparse = qdrant.query_batch("c", [
        {"query": [0.0, 1.0, 0.0], "using": DENSE, "filter": ACME, "limit": 3},
        {"query": {"indices": [3], "values": [2.0]}, "using": SPARSE, "filter": ACME, "limit": 3}])
    assert dense == [(7, pytest.approx(0.0, abs=1e-6))] and sparse == [(7, pytest.approx(3.0))]
    assert qdrant.count("c", ACME) == 1


def test_overload_and_server_errors_are_retried(fake, qdrant):
    qdrant.ensure_collection("c", 3)
    fake.fail(503, MAX_ATTEMPTS - 1)
    qdrant.upsert("c", [POINT])
    assert qdrant.count("c", ACME) == 1


def test_a_failure_that_outlasts_the_retries_is_a_clear_upstream_error(fake, qdrant):
    qdrant.ensure_collection("c", 3)
    fake.fail(500, MAX_ATTEMPTS)
    with pytest.raises(QdrantError) as caught:
        qdrant.count("c", ACME)
    assert caught.value.status == 502 and caught.value.qdrant_status == 500
    assert "scripted failure 500" in caught.value.message


def test_a_client_error_is_not_retried(fake, qdrant):
    qdrant.ensure_collection("c", 3)
    before = len(fake.requests)
    with pytest.raises(QdrantError) as caught:  # a body Qdrant's models reject: one request, a 400
        qdrant.query_batch("c", [{"query": [1.0, 0.0, 0.0], "using": DENSE, "limit": 3, "frobnicate": True}])
    assert caught.value.qdrant_status == 400 and len(fake.requests) == before + 1


def test_a_wrong_api_key_is_refused(fake):
    intruder = HttpTransport(fake.url, api_key="guess", timeout_s=5)
    with pytest.raises(QdrantError) as caught:
        intruder.count("c", ACME)
    assert caught.value.qdrant_status == 401
    intruder.close()


def test_an_unreachable_server_fails_within_its_attempts():
    transport = HttpTransport("http://127.0.0.1:9", timeout_s=0.5)  # the discard port: refused
    with pytest.raises(QdrantError) as caught:
        transport.count("c", ACME)
    assert "ConnectError" in caught.value.message
    transport.close()


def test_inside_lambda_qdrant_needs_a_url(monkeypatch, settings, fake):
    """The embedded engine keeps its shards on one disk: a deployed function without ENGRAM_QDRANT_URL fails with
    a configuration error naming it; with the URL (and the key from the settings) it talks HTTP."""
    import dataclasses

    from chalicelib.errors import ConfigurationError
    from chalicelib.qdrant import LAMBDA_ENV, build_transport

    monkeypatch.setenv(LAMBDA_ENV, "engram-Api")
    with pytest.raises(ConfigurationError, match="ENGRAM_QDRANT_URL"):
        build_transport(dataclasses.replace(settings, vector_backend="qdrant", qdrant_url=None))
    transport = build_transport(dataclasses.replace(settings, vector_backend="qdrant", qdrant_url=fake.url,
                                                    qdrant_api_key="secret"))
    assert isinstance(transport, HttpTransport) and transport.count("c", ACME) == 0
    transport.close()
