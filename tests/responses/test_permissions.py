"""What a restricted key may do in the Responses API (chalicelib.responses.service._permitted), with the strict SDK
over real HTTP, buffered and through the streaming front: ``file_search`` needs ``vector_stores.read``, memory asked
for needs ``memories.read`` / ``write`` (403 naming it, before any model call), memory that only the tenant's
defaults turn on keeps what the key allows, and a key bound to a user recalls that user's memories whatever the
request names."""

from __future__ import annotations

import httpx
import openai
import pytest

from chalicelib.access import Access
from chalicelib.store import api_keys
from chalicelib.store.db import connect
from tests.fakes.chat_server import text

TENANT = "resp-perm"


@pytest.fixture(scope="module")
def key_for(server, api_settings):
    def make(permissions: dict[str, str], **scope: str) -> str:
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, TENANT, grants=Access(permissions, scope))[1]

    return make


@pytest.fixture(scope="module")
def owner(server, make_key) -> httpx.Client:
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {make_key(TENANT)}"}, timeout=30)
    for user, fact in (("alice", "Alice drinks rooibos tea"), ("bob", "Bob drinks espresso")):
        assert client.post("/memories", json={"messages": fact, "user_id": user, "infer": False}).status_code == 200
    yield client
    client.close()


def _sdk(root, key: str) -> openai.OpenAI:
    """A strict SDK client on ``root`` (the server, or the streaming front's ``/v1`` URL)."""
    return openai.OpenAI(base_url=getattr(root, "url", root), api_key=key, max_retries=0,
                         _strict_response_validation=True)


def test_tools_and_memory_need_their_permissions(server, front, fake, key_for, owner):
    store = owner.post("/vector_stores", json={"name": "docs"}).json()["id"]
    chat_only = key_for({"responses": "write"})
    client = _sdk(server, chat_only)
    with pytest.raises(openai.PermissionDeniedError, match="vector_stores.read"):
        client.responses.create(model="fake-model", input="hi",
                                tools=[{"type": "file_search", "vector_store_ids": [store]}])
    with pytest.raises(openai.PermissionDeniedError, match="memories.read"):
        client.responses.create(model="fake-model", input="hi", extra_body={"memory": {"user_id": "alice"}})
    recaller = _sdk(server, key_for({"responses": "write", "memories": "read"}))
    with pytest.raises(openai.PermissionDeniedError, match="memories.write"):
        recaller.responses.create(model="fake-model", input="hi", extra_body={"memory": {"user_id": "alice"}})
    streamed = _sdk(front, chat_only)
    with pytest.raises(openai.PermissionDeniedError, match="memories.read"):
        streamed.responses.create(model="fake-model", input="hi", stream=True,
                                  extra_body={"memory": {"user_id": "alice"}})
    with pytest.raises(openai.PermissionDeniedError, match="responses.write"):
        _sdk(front, key_for({"responses": "read"})).responses.create(model="fake-model", input="hi", stream=True)
    assert fake.requests == []  # refused before any model call
    fake.push(text("Hello."))
    answer = recaller.responses.create(model="fake-model", input="hi",
                                       extra_body={"memory": {"user_id": "alice", "remember": False}})
    assert answer.output_text == "Hello."


def test_a_bound_key_recalls_its_own_user_whatever_the_request_names(server, fake, key_for, owner):
    client = _sdk(server, key_for({"responses": "write", "memories": "write"}, user_id="alice"))
    fake.push(text("Tea, I think."))
    answer = client.responses.create(model="fake-model", input="What do I drink?", extra_body={"memory": True})
    system = fake.requests[-1]["messages"][0]["content"]
    assert "rooibos" in system and "espresso" not in system
    assert answer.usage.model_dump()["memory"]["memories"] == 1
    with pytest.raises(openai.PermissionDeniedError, match="user_id='alice'"):
        client.responses.create(model="fake-model", input="What does Bob drink?",
                                extra_body={"memory": {"user_id": "bob"}})


def test_memory_from_the_tenants_defaults_keeps_what_the_key_allows(server, fake, key_for, owner, api_settings):
    from chalicelib.store import tenants

    with connect(api_settings) as conn:
        tenants.set_memory_defaults(conn, TENANT, {"recall": True})
    try:
        client = _sdk(server, key_for({"responses": "write"}))
        fake.push(text("No memory here."))
        answer = client.responses.create(model="fake-model", input="What do I drink?", user="alice")
        assert answer.output_text == "No memory here." and answer.usage.model_dump().get("memory") is None
        assert "rooibos" not in str(fake.requests[-1]["messages"])
    finally:
        with connect(api_settings) as conn:
            tenants.set_memory_defaults(conn, TENANT, None)
