"""Hostile ``POST /v1/responses`` bodies — NUL, lone surrogates, non-finite numbers, absurd nesting, unknown
fields — streamed or not, through ``engram serve``'s server (which hands ``stream: true`` to the streaming front)
and through the standalone streaming front: the same 400 in OpenAI's JSON envelope on every path, before any
event is sent, the model is called or anything is stored."""

from __future__ import annotations

import json

import httpx
import pytest

from chalicelib.store.db import connect

# (name, body as bytes with {stream} for true/false, expected code, expected param or None to skip the check)
HOSTILE = [
    ("nul-in-input", b'{"model": "fake-model", "input": "a\\u0000b", "stream": {stream}}', "invalid_value", "input"),
    ("nul-in-item", b'{"model": "fake-model", "input": [{"role": "user", "content": [{"type": "input_text", '
                    b'"text": "x\\u0000"}]}], "stream": {stream}}', "invalid_value", "input[0].content[0].text"),
    ("nul-in-key", b'{"model": "fake-model", "input": "x", "metadata": {"k\\u0000": "v"}, "stream": {stream}}',
     "invalid_value", "metadata"),
    ("lone-surrogate", b'{"model": "fake-model", "input": "\\ud800", "stream": {stream}}', "invalid_value", "input"),
    # UTF-8 bytes of a surrogate: json.loads decodes bytes with surrogatepass, so the string holds it
    ("lone-surrogate-raw", b'{"model": "fake-model", "input": "\xed\xa0\x80", "stream": {stream}}', "invalid_value",
     "input"),
    ("huge-number", b'{"model": "fake-model", "input": "x", "temperature": 1e400, "stream": {stream}}',
     "invalid_value", "temperature"),
    ("huge-negative-in-tool", b'{"model": "fake-model", "input": "x", "stream": {stream}, "tools": [{"type": '
                              b'"function", "name": "f", "parameters": {"minimum": -1e400}}]}', "invalid_value",
     "tools[0].parameters.minimum"),
    ("nan-literal", b'{"model": "fake-model", "input": "x", "top_p": NaN, "stream": {stream}}', "invalid_json", None),
    ("infinity-literal", b'{"model": "fake-model", "input": "x", "metadata": {"a": Infinity}, "stream": {stream}}',
     "invalid_json", None),
    ("nested-40", b'{"model": "fake-model", "input": "x", "stream": {stream}, "tools": [{"type": "function", '
                  b'"name": "f", "parameters": ' + b'{"a": ' * 40 + b"1" + b"}" * 40 + b"}]}", "invalid_value", None),
    ("nested-1000", b'{"model": "fake-model", "input": "x", "stream": {stream}, "metadata": {"a": '
                    + b"[" * 1000 + b"]" * 1000 + b"}}", None, None),
    ("nested-100000", b'{"model": "fake-model", "input": "x", "stream": {stream}, "metadata": {"a": '
                      + b"[" * 100_000 + b"]" * 100_000 + b"}}", "invalid_json", None),
    ("unknown-field", b'{"model": "fake-model", "input": "x", "stream": {stream}, "top_k": 3}', "unknown_parameter",
     "top_k"),
    ("unknown-nested", b'{"model": "fake-model", "input": "x", "stream": {stream}, "tools": [{"type": "file_search",'
                       b' "vector_store_ids": ["vs_x"], "frobnicate": 1}]}', "unknown_parameter",
     "tools[0].frobnicate"),
]


def _responses(api_settings) -> int:
    with connect(api_settings) as conn:
        return conn.execute("SELECT count(*) FROM responses").fetchone()[0]


@pytest.mark.parametrize("name, template, code, param", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_bodies_are_the_same_400_on_every_path(server, front, make_key, fake, api_settings,
                                                       name, template, code, param):
    headers = {"Authorization": f"Bearer {make_key('acme')}", "Content-Type": "application/json"}
    stored = _responses(api_settings)
    seen = []
    for root in (server.url, front):
        for stream in (b"true", b"false"):
            body = template.replace(b"{stream}", stream)
            response = httpx.post(f"{root}/responses", content=body, headers=headers, timeout=60)
            assert response.status_code == 400, (root, stream, response.text[:300])
            assert response.headers["content-type"].startswith("application/json")  # not an event stream
            assert response.headers["x-should-retry"] == "false"
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
            seen.append(error)
    assert all(error == seen[0] for error in seen), seen  # one validation, whatever the path
    if code is not None:
        assert seen[0]["code"] == code
    else:
        assert seen[0]["code"] in ("invalid_json", "invalid_value")
    if param is not None:
        assert seen[0]["param"] == param
    assert fake.requests == [] and _responses(api_settings) == stored


def test_a_valid_streamed_body_still_streams(server, make_key, fake):
    """The control: the same route and headers stream when the body is fine (the hostile ones are refused for
    their content, not their shape)."""
    from tests.fakes.chat_server import text

    fake.push(text("Fine."))
    body = json.dumps({"model": "fake-model", "input": "hi", "stream": True,
                       "reasoning": {"effort": "low"}, "stream_options": {"include_obfuscation": False}})
    with httpx.stream("POST", f"{server.url}/responses", content=body, timeout=60,
                      headers={"Authorization": f"Bearer {make_key('acme')}",
                               "Content-Type": "application/json"}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        data = b"".join(response.iter_bytes())
    assert b"event: response.completed" in data and b"Fine." in data
