"""Keys bound to a memory scope and keys without memory write (chalicelib.access), through the HTTP API and the
official ``mem0ai`` client: a key for reading knowledge and one user's memories cannot purge, cannot delete a store,
and cannot read another user's memories — not by naming the user (403), not by id (404) — and a bound key with
write access adds into its scope whether or not the request names it."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import httpx
import pytest

from chalicelib.access import Access
from chalicelib.store import api_keys
from chalicelib.store.db import connect

os.environ["MEM0_TELEMETRY"] = "false"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="engram-mem0-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)

from mem0 import MemoryClient
from mem0.exceptions import MemoryNotFoundError

TENANT = "scoped"
READER = {"files": "read", "vector_stores": "read", "responses": "none", "memories": "read"}


@pytest.fixture(scope="module")
def owner(api) -> httpx.Client:
    return api(TENANT)


@pytest.fixture(scope="module")
def seeded(owner) -> dict[str, str]:
    """Alice's and Bob's memories and a vector store, made with a full key: ``{"alice", "bob", "store"}`` ids."""
    ids = {}
    for user, text in (("alice", "Alice keeps bees on the roof"), ("bob", "Bob's locker code is 4711")):
        answer = owner.post("/memories", json={"messages": text, "user_id": user, "infer": False})
        assert answer.status_code == 200, answer.text
        ids[user] = answer.json()["results"][0]["id"]
    store = owner.post("/vector_stores", json={"name": "handbook"})
    assert store.status_code == 200, store.text
    ids["store"] = store.json()["id"]
    return ids


@pytest.fixture(scope="module")
def key_for(server, api_settings):
    def make(permissions: dict[str, str], **scope: str) -> str:
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, TENANT, grants=Access(permissions, scope))[1]

    return make


@pytest.fixture(scope="module")
def reader(server, key_for) -> httpx.Client:
    """Knowledge read-only, Alice's memories read-only."""
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key_for(READER, user_id='alice')}"},
                          timeout=30)
    yield client
    client.close()


def _refused(answer: httpx.Response, code: str, words: str) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and words in error["message"], error


def test_the_reader_cannot_purge_delete_a_store_or_read_another_user(reader, owner, seeded):
    _refused(reader.delete("/memories", params={"user_id": "alice"}), "insufficient_permissions", "memories.write")
    _refused(reader.delete(f"/vector_stores/{seeded['store']}"), "insufficient_permissions", "vector_stores.write")
    _refused(reader.delete(f"/memories/{seeded['alice']}"), "insufficient_permissions", "memories.write")
    _refused(reader.get("/memories", params={"user_id": "bob"}), "memory_scope_not_permitted", "user_id='alice'")
    _refused(reader.post("/memories/search", json={"query": "locker code", "user_id": "bob"}),
             "memory_scope_not_permitted", "user_id")
    assert reader.get(f"/memories/{seeded['bob']}").status_code == 404
    assert reader.get(f"/memories/{seeded['bob']}/history").status_code == 404
    # Bob's memory is never found through Alice's scope either.
    found = reader.post("/memories/search", json={"query": "locker code 4711"}).json()["data"]
    assert seeded["bob"] not in [m["id"] for m in found]
    # What the key may do: Alice's memories with or without naming her, and the knowledge.
    assert [m["id"] for m in reader.get("/memories").json()["data"]] == [seeded["alice"]]
    assert [m["id"] for m in reader.get("/memories", params={"user_id": "alice"}).json()["data"]] == [seeded["alice"]]
    assert reader.get(f"/memories/{seeded['alice']}").json()["memory"] == "Alice keeps bees on the roof"
    assert reader.get(f"/vector_stores/{seeded['store']}").status_code == 200
    # Nothing changed.
    assert owner.get(f"/memories/{seeded['bob']}").json()["status"] == "active"
    assert owner.get(f"/vector_stores/{seeded['store']}").status_code == 200


def test_the_reader_through_the_mem0_client(server, key_for, seeded):
    client = MemoryClient(api_key=key_for(READER, user_id="alice"), host=server.url.removesuffix("/v1") + "/mem0")
    try:
        assert [m["id"] for m in client.get_all(filters={"user_id": "alice"})["results"]] == [seeded["alice"]]
        assert [m["id"] for m in client.get_all(filters={"agent_id": "*"})["results"]] == [seeded["alice"]]
        with pytest.raises(Exception, match="403|alice"):
            client.get_all(filters={"user_id": "bob"})
        with pytest.raises(Exception, match="403|alice"):
            client.search("locker code", filters={"user_id": "bob"})
        with pytest.raises(MemoryNotFoundError):
            client.get(seeded["bob"])
        with pytest.raises(Exception, match="403|memories.write"):
            client.delete_all(user_id="alice")
        with pytest.raises(Exception, match="403|memories.write"):
            client.delete_users(user_id="bob")
        users = client.users()["results"]
        assert [(u["type"], u["name"]) for u in users] == [("user", "alice")]
    finally:
        client.client.close()


def test_a_bound_writer_adds_and_purges_only_in_its_scope(server, key_for, owner, seeded):
    key = key_for({"memories": "write"}, user_id="carol")
    writer = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    try:
        added = writer.post("/memories", json={"messages": "Carol rides a tandem", "infer": False})
        assert added.status_code == 200, added.text
        carol = added.json()["results"][0]["id"]
        assert owner.get(f"/memories/{carol}").json()["user_id"] == "carol"
        with_agent = writer.post("/memories", json={"messages": "Carol asked the bot for maps", "agent_id": "bot",
                                                    "infer": False}).json()["results"][0]["id"]
        assert owner.get(f"/memories/{with_agent}").json()["user_id"] == "carol"
        _refused(writer.post("/memories", json={"messages": "x", "user_id": "bob", "infer": False}),
                 "memory_scope_not_permitted", "user_id='carol'")
        _refused(writer.delete("/memories", params={"user_id": "bob"}), "memory_scope_not_permitted", "carol")
        _refused(writer.delete("/memories", params={"all": "true"}), "memory_scope_not_permitted", "every scope")
        assert writer.get("/memories/stats").json()["active"] >= 1  # Carol's: the key's scope
        assert writer.get("/memories/stats", params={"user_id": "bob"}).status_code == 403
        assert writer.delete(f"/memories/{seeded['bob']}").status_code == 404
        assert writer.post(f"/memories/{seeded['bob']}", json={"memory": "hijacked"}).status_code == 404
        _refused(writer.get("/vector_stores"), "insufficient_permissions", "vector_stores.read")
        # A purge naming only the agent stays inside Carol's memories.
        purged = writer.delete("/memories", params={"agent_id": "bot"}).json()
        assert purged["user_id"] == "carol" and purged["agent_id"] == "bot" and purged["counts"]["memories"] == 1
        assert owner.get(f"/memories/{carol}").json()["status"] == "active"
        assert owner.get(f"/memories/{seeded['bob']}").json()["memory"] == "Bob's locker code is 4711"
        audit = writer.get("/memories/audit").json()["data"]
        assert audit and {row["user_id"] for row in audit} == {"carol"}
    finally:
        writer.close()
