"""Errors on the wire (OPENAI-COMPAT.md §0): the SDK's exception classes, OpenAI's envelope with exactly
``message, type, param, code``, and ``x-should-retry: false`` on deterministic 4xx so the SDK never retries them."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from chalicelib.errors import ConflictError

ENVELOPE_KEYS = {"message", "type", "param", "code"}


def _error(response: httpx.Response) -> dict:
    """The ``error`` object of an error response, after checking the envelope's exact shape."""
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == ENVELOPE_KEYS, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    assert error["param"] is None or isinstance(error["param"], str)
    assert error["code"] is None or isinstance(error["code"], str)
    return error


@pytest.fixture(scope="module")
def http(server, make_key):
    """An ``httpx.Client`` on the ``/v1`` root with a valid key for tenant ``acme``."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {make_key('acme')}"},
                      timeout=30) as client:
        yield client


# ---- authentication ---------------------------------------------------------------------------------------------


def test_missing_key_is_401(server):
    response = httpx.get(f"{server.url}/vector_stores")
    assert response.status_code == 401
    error = _error(response)
    assert error["type"] == "invalid_request_error" and error["code"] == "missing_api_key"
    assert response.headers.get("x-should-retry") == "false"


@pytest.mark.parametrize("authorization", ["", "Bearer", "Basic dXNlcjpwYXNz", "sk-engram-raw"])
def test_malformed_authorization_is_401(server, authorization):
    response = httpx.get(f"{server.url}/files", headers={"Authorization": authorization})
    assert response.status_code == 401
    _error(response)


@pytest.mark.parametrize("key", ["garbage", "sk-engram-" + "x" * 43])
def test_unknown_key_is_401(server, key):
    client = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, _strict_response_validation=True)
    with pytest.raises(openai.AuthenticationError) as exc:
        client.vector_stores.list()
    assert exc.value.status_code == 401 and exc.value.code == "invalid_api_key"
    assert set(exc.value.body) == ENVELOPE_KEYS
    assert key not in exc.value.message  # only a hint of the key is echoed


def test_revoked_key_is_401(server, api_settings):
    from chalicelib.api.context import forget_keys
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect

    with connect(api_settings) as conn:
        row, secret = api_keys.create_key(conn, "revokee")
    client = openai.OpenAI(base_url=server.url, api_key=secret, max_retries=0, _strict_response_validation=True)
    store = client.vector_stores.create(name="before-revocation")
    with connect(api_settings) as conn:
        assert api_keys.revoke_key(conn, row.id) is True
    forget_keys()
    with pytest.raises(openai.AuthenticationError) as exc:
        client.vector_stores.retrieve(store.id)
    assert exc.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client.files.create(file=("x.txt", b"x"), purpose="assistants")


def test_health_needs_no_key(server):
    response = httpx.get(server.url.removesuffix("/v1") + "/health")
    assert response.status_code == 200 and response.json()["status"] == "ok"
    assert response.json()["database"]["status"] == "ok"
    live = httpx.get(server.url.removesuffix("/v1") + "/health/live")
    assert live.status_code == 200 and live.json() == {"status": "ok"}


# ---- malformed bodies -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{not json", b'{"name": "x"', b"\xff\xfe", b"NaN", b'{"name": Infinity}'])
def test_malformed_json_is_400(http, raw):
    response = http.post("/vector_stores", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = _error(response)
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_json"
    assert response.headers.get("x-should-retry") == "false"


@pytest.mark.parametrize("raw", [b"[]", b'[{"name": "x"}]', b'"name"', b"42", b"null"])
def test_non_object_json_is_400(http, raw):
    response = http.post("/vector_stores", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    _error(response)


def test_malformed_json_changes_nothing(http):
    before = http.get("/vector_stores", params={"limit": 100}).json()["data"]
    http.post("/vector_stores", content=b'{"name": "half', headers={"Content-Type": "application/json"})
    http.post("/vector_stores", content=b'[{"name": "arr"}]', headers={"Content-Type": "application/json"})
    assert http.get("/vector_stores", params={"limit": 100}).json()["data"] == before


@pytest.mark.parametrize("field, value", [
    ("name", 123),
    ("name", ["a"]),
    ("metadata", "not-a-map"),
    ("file_ids", "file-abc"),
    ("expires_after", 7),
    ("chunking_strategy", "auto"),
])
def test_wrong_types_are_400_naming_the_field(client, field, value):
    with pytest.raises(openai.BadRequestError) as exc:
        client.vector_stores.create(extra_body={field: value})
    assert exc.value.param is not None and exc.value.param.startswith(field)
    assert set(exc.value.body) == ENVELOPE_KEYS


def test_wrong_type_over_raw_http(http):
    response = http.post("/vector_stores", json={"name": 123})
    assert response.status_code == 400
    assert _error(response)["param"] == "name"


def test_nul_in_a_string_is_400(http):
    response = http.post("/vector_stores", json={"name": "a\u0000b"})
    assert response.status_code == 400
    assert _error(response)["param"] == "name"


def test_json_to_the_multipart_route_is_4xx(http):
    response = http.post("/files", json={"purpose": "assistants"})
    assert response.status_code == 415
    _error(response)


def test_garbled_multipart_is_400(http):
    response = http.post("/files", content=b"--nope\r\nnot a form",
                         headers={"Content-Type": "multipart/form-data; boundary=XYZ"})
    assert response.status_code == 400
    _error(response)


# ---- routing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, path", [
    ("GET", "/no_such_resource"),
    ("GET", "/vector_stores/vs_x/nope"),
    ("POST", "/assistants"),
])
def test_unknown_route_is_4xx(http, method, path):
    response = http.request(method, path)
    assert 400 <= response.status_code < 500, response.text


def test_unknown_route_uses_the_envelope_and_hides_the_key(http):
    """Unknown paths never reach the app: the local server answers them as OpenAI does (404, envelope), not with
    the gateway's 403 that echoes the Authorization header. (Deployed, API Gateway's gateway responses do the
    same — infra/.)"""
    response = http.get("/no_such_resource")
    assert response.status_code == 404
    _error(response)
    assert http.headers["authorization"].split()[-1] not in response.text


@pytest.mark.parametrize("method, path", [
    ("PUT", "/vector_stores"),
    ("PATCH", "/files"),
    ("DELETE", "/vector_stores"),
    ("PUT", "/files/file-abc"),
])
def test_wrong_method_is_404_invalid_url_as_openai_answers(http, method, path):
    response = http.request(method, path, json={})
    assert response.status_code == 404, response.text
    _error(response)
    assert response.json()["error"]["message"] == f"Invalid URL ({method} /v1{path})"


def test_the_request_log_records_the_status_the_client_got(http, capfd):
    """A wrong method used to be logged as Chalice's 405 while the client got 404."""
    import json

    capfd.readouterr()
    assert http.request("PUT", "/vector_stores", json={}).status_code == 404
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("message") == "request" and line.get("method") == "PUT"]
    assert logged and all(line["status"] == 404 for line in logged), logged


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"FROB /v1/files HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1/vector_stores HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
    b"GET /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
])
def test_malformed_http_gets_a_400_envelope(server, raw):
    import json
    import socket
    import urllib.parse

    url = urllib.parse.urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(raw)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", reply[:300]
    assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}


# ---- retry headers ---------------------------------------------------------------------------------------------


def test_conflict_responses_tell_the_sdk_not_to_retry():
    from chalicelib.api.middleware import error_response

    response = error_response(ConflictError("Two stores share that name.", param="vector_store"))
    assert response.status_code == 409
    assert response.headers["x-should-retry"] == "false"
    assert set(json.loads(response.body)["error"]) == ENVELOPE_KEYS


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/vector_stores/abc", 400),
    ("GET", "/vector_stores/vs_" + "0" * 24, 404),
    ("GET", "/files/file-" + "0" * 24, 404),
    ("GET", "/vector_stores?limit=0", 400),
])
def test_client_errors_carry_x_should_retry_false(http, method, path, status):
    response = http.request(method, path)
    assert response.status_code == status
    assert response.headers.get("x-should-retry") == "false"
    _error(response)


def _exchange(server, raw: bytes, *, half_close: bool) -> bytes:
    import socket
    import urllib.parse

    url = urllib.parse.urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)  # the client is done sending: the body is shorter than announced
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_a_body_shorter_than_its_content_length_is_refused_not_acted_on(server, client):
    before = len(client.vector_stores.list().data)
    key = client.api_key
    body = b'{"name": "half-read"}'
    raw = (b"POST /v1/vector_stores HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
           + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body) + 50).encode() + b"\r\n\r\n"
           + body)
    reply = _exchange(server, raw, half_close=True)
    head, _, answer = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", reply[:300]
    assert "ended after" in json.loads(answer)["error"]["message"]
    assert len(client.vector_stores.list().data) == before  # nothing was created


def test_a_chunked_body_is_read_whole(server, client):
    key = client.api_key
    body = b'{"name": "chunked-store", "metadata": {"via": "chunks"}}'
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:30], body[30:]))
    raw = (b"POST /v1/vector_stores HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
           + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           + chunks + b"0\r\n\r\n")
    reply = _exchange(server, raw, half_close=False)
    head, _, answer = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"200", reply[:400]
    created = json.loads(answer)
    assert created["name"] == "chunked-store" and created["metadata"] == {"via": "chunks"}
    client.vector_stores.delete(created["id"])
    broken = (b"POST /v1/vector_stores HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
              + b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
    head = _exchange(server, broken, half_close=True).partition(b"\r\n\r\n")[0]
    assert head.split(b" ")[1] == b"400"
