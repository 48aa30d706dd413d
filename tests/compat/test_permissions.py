"""Keys with a permission per resource (chalicelib.access, chalicelib.api.permissions): every route of ``app.py``
declares the permission it needs, and for every permission a key without it is refused every call that needs it —
a 403 in OpenAI's envelope naming the missing scope — before the route runs (nothing is read or changed), while
the calls it may make go through. Keys made without options keep full access."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from chalicelib.access import FULL, LEVELS, RESOURCES, Access
from chalicelib.api import permissions
from chalicelib.store import api_keys
from chalicelib.store.db import connect

DUMMY = {"file_id": "file-abc123", "vector_store_id": "vs_abc123", "batch_id": "vsfb_abc123",
         "upload_id": "upload_abc123", "response_id": "resp_abc123", "conversation_id": "conv_abc123",
         "item_id": "msg_abc123", "agent_id": "agent_abc123", "memory_id": "mem_abc123", "job_id": "memjob_abc123", "exchange_id": "exch_abc123",
         "event_id": "memjob_abc123", "entity_type": "user", "entity_id": "alice", "org_id": "org", "project_id": "p",
         "webhook_id": "wh", "job_name": "no_such_job", "asset": "console.js"}


def _routes() -> list[tuple[str, str]]:
    import app

    return sorted((method, path) for path, methods in app.app.routes.items() for method in methods)


def test_every_route_declares_a_permission_and_every_declaration_names_a_route() -> None:
    routes = _routes()
    missing = [f"{m} {p}" for m, p in routes if permissions.required(p, m) is None]
    assert missing == []
    declared = {f"{m} {p}" for m, p in routes}
    assert sorted(set(permissions.ROUTES) - declared) == []
    assert {need for need in permissions.ROUTES.values() if isinstance(need, str)} <= {permissions.PUBLIC,
                                                                                       permissions.ANY_KEY}


def _needing(resource: str, level: str) -> list[tuple[str, str]]:
    return [(m, p) for m, p in _routes() if permissions.required(p, m) == (resource, level)]


@pytest.fixture(scope="module")
def key_with(server, api_settings):
    """``key_with(tenant="perm", **levels)`` → a key of ``tenant`` with those levels (others ``write``)."""

    def make(tenant: str = "perm", **levels: str) -> str:
        grants = Access({**{r: "write" for r in RESOURCES}, **levels})
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, tenant, grants=grants)[1]

    return make


def _call(base: str, key: str, method: str, path: str) -> httpx.Response:
    url = base.removesuffix("/v1") + re.sub(r"\{(\w+)\}", lambda m: DUMMY[m.group(1)], path)
    return httpx.request(method, url, headers={"Authorization": f"Bearer {key}"}, json={} if method != "GET" else None,
                         timeout=30)


@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("level", ["read", "write"])
def test_a_key_without_a_permission_is_refused_every_call_that_needs_it(server, key_with, resource, level) -> None:
    below = LEVELS[LEVELS.index(level) - 1]  # write → read, read → none
    key = key_with(**{resource: below})
    forbidden = _needing(resource, level)
    assert forbidden, (resource, level)
    for method, path in forbidden:
        answer = _call(server.url, key, method, path)
        assert answer.status_code == 403, (method, path, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "insufficient_permissions"
        assert f"Missing scopes: {resource}.{level}" in error["message"], (method, path)
        assert answer.headers.get("x-should-retry") == "false"
    # The same key is not refused what it may do: its own level on this resource, and every other resource.
    allowed = [(m, p) for m, p in _routes() if isinstance(need := permissions.required(p, m), tuple)
               and (need[0] != resource or LEVELS.index(need[1]) <= LEVELS.index(below))]
    for method, path in allowed:
        answer = _call(server.url, key, method, path)
        assert answer.status_code != 403 or answer.json()["error"]["code"] != "insufficient_permissions", \
            (method, path, answer.text)


def test_keys_without_options_keep_full_access_and_probes_need_no_key(server, api_settings) -> None:
    with connect(api_settings) as conn:
        key, secret = api_keys.create_key(conn, "perm-full")
        assert key.permissions is None and key.memory_scope is None and key.access == FULL
    operator_routes = _needing("operations", "read") + _needing("operations", "write")
    for method, path in _routes():
        if permissions.required(path, method) == permissions.PUBLIC:
            url = server.url.removesuffix("/v1") + re.sub(r"\{(\w+)\}", lambda m: DUMMY[m.group(1)], path)
            assert httpx.request(method, url).status_code == 200
            continue
        answer = _call(server.url, secret, method, path)
        if (method, path) in operator_routes:  # a full key is no operator key (engram keys create --operator)
            assert answer.status_code == 403 and "Missing scopes: operations." in answer.json()["error"]["message"]
            continue
        assert answer.status_code != 403 or answer.json()["error"]["code"] not in ("insufficient_permissions",), \
            (method, path)


def test_a_read_only_knowledge_key_with_the_sdk(server, make_client, key_with) -> None:
    owner = make_client("perm-sdk")
    store = owner.vector_stores.create(name="handbook")
    owner.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=("a.txt", b"Rotate the pager weekly."))
    reader = openai.OpenAI(base_url=server.url, api_key=key_with("perm-sdk", files="read", vector_stores="read",
                                                                 responses="none", memories="none"),
                           _strict_response_validation=True, max_retries=0)
    assert [s.id for s in reader.vector_stores.list()] == [store.id]
    assert reader.vector_stores.search(store.id, query="pager").data
    with pytest.raises(openai.PermissionDeniedError) as refused:
        reader.vector_stores.delete(store.id)
    assert "vector_stores.write" in str(refused.value)
    with pytest.raises(openai.PermissionDeniedError):
        reader.files.create(file=("b.txt", b"x"), purpose="assistants")
    with pytest.raises(openai.PermissionDeniedError):
        reader.conversations.create()
    assert owner.vector_stores.retrieve(store.id).file_counts.completed == 1  # nothing was changed
