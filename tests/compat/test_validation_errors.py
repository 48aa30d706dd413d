"""OpenAI's validation errors over real HTTP (``docs/errors.md``): each code its table lists, sent as a real
request; unknown fields refused on every JSON route and at any depth; hostile numbers (``1e400``) in attributes
and function-tool parameters refused with the param named; absurdly nested bodies refused — always a 400 in
OpenAI's envelope, never a 5xx, and nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from chalicelib import ids
from chalicelib.validation import CODES
from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

ERRORS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
ENVELOPE_KEYS = {"message", "type", "param", "code"}
STORE = "{store}"  # replaced by a real store's id
FILE = "{file}"  # replaced by a real, processed file's id


@pytest.fixture(scope="module")
def http(server, make_key):
    """An ``httpx.Client`` on the ``/v1`` root with a key for tenant ``acme``."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {make_key('acme')}"},
                      timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def real(client) -> dict[str, str]:
    """A store holding one processed file: ``{"store": vs_..., "file": file-...}``."""
    store = client.vector_stores.create(name="validation")
    uploaded = client.files.create(file=("v.txt", b"validation target text"), purpose="assistants")
    attached = client.vector_stores.files.create_and_poll(file_id=uploaded.id, vector_store_id=store.id,
                                                          attributes={"k": "v"})
    assert attached.status == "completed"
    return {"store": store.id, "file": uploaded.id}


def _fill(value: Any, real: dict[str, str]) -> Any:
    text = json.dumps(value).replace(STORE, real["store"]).replace(FILE, real["file"])
    return json.loads(text)


def _send(http: httpx.Client, path: str, body: Any, real: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """POST ``body`` (a JSON value, or raw bytes) to ``path``; returns (status, error object)."""
    content = body if isinstance(body, bytes) else json.dumps(_fill(body, real)).encode()
    response = http.post(path.replace(STORE, real["store"]).replace(FILE, real["file"]), content=content,
                         headers={"Content-Type": "application/json"})
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    payload = response.json()
    assert set(payload) == {"error"} and set(payload["error"]) == ENVELOPE_KEYS, payload
    assert payload["error"]["type"] == "invalid_request_error"
    return response.status_code, payload["error"]


def _store_state(client: openai.OpenAI, store_id: str) -> Any:
    return [(f.id, f.status, f.attributes) for f in client.vector_stores.files.list(store_id)]


# ---- docs/errors.md's table, row by row ------------------------------------------------------------------------------

RESPONSE = {"model": "any-model", "input": "hi"}
# code → (path, body, param, message); the message's None parts are not checked.
TABLE = {
    "unknown_parameter": ("/vector_stores/{store}/search", {"query": "q", "top_k": 3}, "top_k",
                          "Unknown parameter: 'top_k'."),
    "missing_required_parameter": ("/vector_stores/{store}/files", {"attributes": {}}, "file_id",
                                   "Missing required parameter: 'file_id'."),
    "invalid_type": ("/vector_stores", {"name": 5}, "name",
                     "Invalid type for 'name': expected a string, but got an integer instead."),
    "invalid_value": ("/vector_stores", {"file_ids": ["abc"]}, "file_ids[0]",
                      "Invalid 'file_ids[0]': 'abc'. Expected an ID that begins with 'file'."),
    "integer_above_max_value": ("/vector_stores/{store}/search", {"query": "q", "max_num_results": 51},
                                "max_num_results", "Invalid 'max_num_results': integer above maximum value. "
                                "Expected a value <= 50, but got 51 instead."),
    "integer_below_min_value": ("/vector_stores", {"expires_after": {"anchor": "last_active_at", "days": 0}},
                                "expires_after.days", "Invalid 'expires_after.days': integer below minimum value. "
                                "Expected a value >= 1, but got 0 instead."),
    "decimal_above_max_value": ("/responses", {**RESPONSE, "temperature": 2.5}, "temperature",
                                "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but "
                                "got 2.5 instead."),
    "decimal_below_min_value": ("/vector_stores/{store}/search",
                                {"query": "q", "ranking_options": {"score_threshold": -0.1}},
                                "ranking_options.score_threshold",
                                "Invalid 'ranking_options.score_threshold': decimal below minimum value. Expected "
                                "a value >= 0, but got -0.1 instead."),
    "string_above_max_length": ("/vector_stores", {"name": "n" * 300}, "name",
                                "Invalid 'name': string too long. Expected a string with maximum length 256, but "
                                "got a string with length 300 instead."),
    "empty_string": ("/responses", {**RESPONSE, "model": ""}, "model",
                     "Invalid 'model': empty string. Expected a string with minimum length 1, but got an empty "
                     "string instead."),
    "array_above_max_length": ("/vector_stores/{store}/search", {"query": ["q"] * 17}, "query",
                               "Invalid 'query': array too long. Expected an array with maximum length 16, but got "
                               "an array with length 17 instead."),
    "empty_array": ("/responses", {**RESPONSE, "input": []}, "input",
                    "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array "
                    "instead."),
    "invalid_json": ("/vector_stores", b'{"name": ', None, None),
    "unsupported_parameter": ("/responses", {**RESPONSE, "background": True}, "background",
                              "Background responses are not supported; omit 'background' or set it to false."),
}


def _listed_codes() -> list[str]:
    section = ERRORS.read_text(encoding="utf-8")
    return [code for code in re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE) if code != "code"]


def test_the_errors_table_lists_exactly_the_tested_codes():
    listed = _listed_codes()
    assert len(listed) == len(set(listed)) and set(listed) == set(TABLE)
    # Every validation code is in the table, except the two no field of today's models can produce.
    assert CODES - set(listed) == {"string_below_min_length", "array_below_min_length"}


@pytest.mark.parametrize("code", sorted(TABLE))
def test_each_code_of_the_errors_table(http, real, client, code):
    path, body, param, message = TABLE[code]
    before = [s.id for s in client.vector_stores.list()]
    status, error = _send(http, path, body, real)
    assert (status, error["code"], error["param"]) == (400, code, param)
    if message is not None:
        assert error["message"] == message
    if code == "missing_required_parameter":
        assert message in ERRORS.read_text(encoding="utf-8")
    assert [s.id for s in client.vector_stores.list()] == before


# ---- unknown fields, every JSON route, any depth -----------------------------------------------------------------

MEMORY_ID = ids.new_id(ids.MEMORY)
UNKNOWN = [
    ("/vector_stores", {"name": "x", "frobnicate": 1}, "frobnicate"),
    ("/vector_stores", {"expires_after": {"anchor": "last_active_at", "days": 1, "hours": 2}}, "expires_after.hours"),
    ("/vector_stores", {"file_ids": [FILE], "chunking_strategy": {"type": "auto", "size": 5}},
     "chunking_strategy.size"),
    ("/vector_stores/{store}", {"name": "y", "frobnicate": 1}, "frobnicate"),
    ("/vector_stores/{store}/search", {"query": "q", "ranking_options": {"ranker": "auto", "x": 1}},
     "ranking_options.x"),
    ("/vector_stores/{store}/search", {"query": "q", "ranking_options": {"hybrid_search": {"bm25": 1}}},
     "ranking_options.hybrid_search.bm25"),
    ("/vector_stores/{store}/search", {"query": "q", "filters": {"type": "eq", "key": "k", "value": "v", "x": 1}},
     "filters.x"),
    ("/vector_stores/{store}/search",
     {"query": "q", "filters": {"type": "and", "filters": [{"type": "eq", "key": "k", "value": "v"},
                                                          {"type": "in", "key": "k", "value": ["v"], "y": 2}]}},
     "filters.filters[1].y"),
    ("/vector_stores/{store}/files", {"file_id": FILE, "frobnicate": 1}, "frobnicate"),
    ("/vector_stores/{store}/files", {"file_id": FILE, "chunking_strategy": {
        "type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 10, "x": 1}}},
     "chunking_strategy.static.x"),
    ("/vector_stores/{store}/files/{file}", {"attributes": {"k": "w"}, "frobnicate": 1}, "frobnicate"),
    ("/vector_stores/{store}/file_batches", {"file_ids": [FILE], "frobnicate": 1}, "frobnicate"),
    ("/vector_stores/{store}/file_batches", {"files": [{"file_id": FILE}, {"file_id": FILE, "x": 1}]},
     "files[1].x"),
    ("/uploads", {"bytes": 1, "filename": "a.txt", "mime_type": "text/plain", "purpose": "assistants",
                  "frobnicate": 1}, "frobnicate"),
    (f"/uploads/{ids.new_id(ids.UPLOAD)}/complete", {"part_ids": [], "frobnicate": 1}, "frobnicate"),
    ("/responses", {**RESPONSE, "top_k": 3}, "top_k"),
    ("/responses", {**RESPONSE, "tools": [{"type": "function", "name": "f", "parameters": {}, "frobnicate": 1}]},
     "tools[0].frobnicate"),
    ("/responses", {**RESPONSE, "tools": [{"type": "file_search", "vector_store_ids": [STORE],
                                           "ranking_options": {"ranker": "auto", "x": 1}}]},
     "tools[0].ranking_options.x"),
    ("/responses", {**RESPONSE, "tools": [{"type": "file_search", "vector_store_ids": [STORE],
                                           "filters": {"type": "eq", "key": "k", "value": 1, "x": 1}}]},
     "tools[0].filters.x"),
    ("/responses", {**RESPONSE, "input": [{"role": "user", "content": "a"},
                                          {"role": "user", "content": [{"type": "input_text", "text": "b",
                                                                        "x": 1}]}]},
     "input[1].content[0].x"),
    ("/responses", {**RESPONSE, "text": {"format": {"type": "text"}, "x": 1}}, "text.x"),
    ("/responses", {**RESPONSE, "tool_choice": {"type": "file_search", "x": 1}}, "tool_choice.x"),
    ("/responses", {**RESPONSE, "memory": {"user_id": "u", "x": 1}}, "memory.x"),
    ("/memories", {"messages": "remember this", "user_id": "u", "frobnicate": 1}, "frobnicate"),
    ("/memories/search", {"query": "q", "user_id": "u", "top_n": 3}, "top_n"),
    (f"/memories/{MEMORY_ID}", {"memory": "new text", "frobnicate": 1}, "frobnicate"),
    ("/agents", {"name": "a", "frobnicate": 1}, "frobnicate"),
    ("/agents", {"name": "a", "memory": {"top_k": 3, "x": 1}}, "memory.x"),
]


@pytest.mark.parametrize("path, body, param", UNKNOWN, ids=[f"{p}-{q}" for p, _, q in UNKNOWN])
def test_unknown_fields_are_refused_everywhere(http, real, client, path, body, param):
    before = _store_state(client, real["store"])
    status, error = _send(http, path, body, real)
    assert (status, error["code"], error["param"]) == (400, "unknown_parameter", param)
    assert error["message"] == f"Unknown parameter: '{param}'."
    assert _store_state(client, real["store"]) == before


def test_the_sdks_own_response_fields_are_accepted(http, real):
    """Fields the SDK documents and Engram does not use pass validation (the compat server has no chat backend,
    so the request then stops at the model with 400 model_not_available — after every field was accepted)."""
    body = {**RESPONSE, "reasoning": {"effort": "low", "summary": "auto"}, "service_tier": "auto",
            "text": {"format": {"type": "text"}, "verbosity": "low"}, "prompt_cache_key": "k",
            "prompt_cache_retention": "24h", "safety_identifier": "user-hash", "store": False, "top_logprobs": 2,
            "truncation": "disabled", "include": ["file_search_call.results"], "metadata": {"a": "b"},
            "user": "u", "max_output_tokens": 64, "parallel_tool_calls": False, "max_tool_calls": 2,
            "temperature": 1, "top_p": 1, "instructions": "be brief", "background": False,
            "tool_choice": "auto",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True,
                       "description": "d", "defer_loading": False},
                      {"type": "file_search", "vector_store_ids": [STORE], "max_num_results": 3,
                       "ranking_options": {"ranker": "auto", "score_threshold": 0.1,
                                           "hybrid_search": {"embedding_weight": 1, "text_weight": 0.5}},
                       "filters": {"type": "eq", "key": "k", "value": "v"}}]}
    status, error = _send(http, "/responses", body, real)
    assert (status, error["code"], error["param"]) == (400, "model_not_available", "model")
    streamed = {**body, "stream": True, "stream_options": {"include_obfuscation": False}}
    status, error = _send(http, "/responses", streamed, real)
    assert (status, error["code"], error["param"]) == (400, "model_not_available", "model")


# ---- hostile numbers: 1e400 / -1e400 -----------------------------------------------------------------------------

HUGE = b"1e400"
HOSTILE_NUMBERS = [
    ("/vector_stores/{store}/files", b'{"file_id": "{file}", "attributes": {"n": %s}}', "attributes.n"),
    ("/vector_stores/{store}/files/{file}", b'{"attributes": {"n": %s}}', "attributes.n"),
    ("/vector_stores/{store}/file_batches", b'{"file_ids": ["{file}"], "attributes": {"a": 1, "n": %s}}',
     "attributes.n"),
    ("/vector_stores/{store}/file_batches", b'{"files": [{"file_id": "{file}", "attributes": {"n": %s}}]}',
     "files[0].attributes.n"),
    ("/vector_stores", b'{"metadata": {"n": %s}}', "metadata.n"),
    ("/vector_stores/{store}/search", b'{"query": "q", "filters": {"type": "gt", "key": "n", "value": %s}}',
     "filters.value"),
    ("/vector_stores/{store}/search", b'{"query": "q", "max_num_results": %s}', "max_num_results"),
    ("/responses", b'{"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": '
                   b'{"type": "object", "properties": {"n": {"type": "number", "maximum": %s}}}}]}',
     "tools[0].parameters.properties.n.maximum"),
    ("/responses", b'{"model": "m", "input": "x", "stream": true, "tools": [{"type": "function", "name": "f", '
                   b'"parameters": {"minimum": %s}}]}', "tools[0].parameters.minimum"),
    ("/responses", b'{"model": "m", "input": "x", "temperature": %s}', "temperature"),
    ("/uploads", b'{"bytes": %s, "filename": "a.txt", "mime_type": "text/plain", "purpose": "assistants"}', "bytes"),
]


@pytest.mark.parametrize("sign", [b"", b"-"], ids=["plus", "minus"])
@pytest.mark.parametrize("path, template, param", HOSTILE_NUMBERS,
                         ids=[f"{p}-{q}" for p, _, q in HOSTILE_NUMBERS])
def test_numbers_beyond_a_double_are_a_400_naming_the_param(http, real, client, path, template, param, sign):
    before = _store_state(client, real["store"])
    body = (template % (sign + HUGE)).replace(b"{file}", real["file"].encode())
    status, error = _send(http, path, body, real)
    assert (status, error["code"], error["param"]) == (400, "invalid_value", param)
    assert _store_state(client, real["store"]) == before


# ---- absurd nesting ---------------------------------------------------------------------------------------------


def _nested(depth: int, stream: bool) -> bytes:
    head = b'{"model": "m", "input": "x", "stream": %s, "metadata": {"a": ' % (b"true" if stream else b"false")
    return head + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_deeply_nested_bodies_are_a_400(http, real, depth, stream):
    status, error = _send(http, "/responses", _nested(depth, stream), real)
    assert status == 400 and error["code"] in ("invalid_json", "invalid_value")
