"""The official ``mem0ai`` client, unchanged, against Engram's mem0 adapter over real HTTP (``host`` = the server's
``/mem0`` root): add with and without the (scripted) model, search, get, get_all with pages, update, delete,
delete_all, history, queued adds, scopes kept apart, and errors raised as mem0's own exceptions."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from datetime import datetime

import httpx
import pytest

# Before mem0 is imported: no telemetry, and its settings folder (created at import) out of the home directory.
os.environ["MEM0_TELEMETRY"] = "false"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="engram-mem0-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)

from mem0 import MemoryClient
from mem0.exceptions import AuthenticationError, MemoryNotFoundError, ValidationError

from tests.conftest import BOTH_BACKENDS
from tests.memory.conftest import MEMORY_MODEL, decisions, facts

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

@pytest.fixture(scope="module")
def mem0_host(server) -> str:
    """The root a mem0 client is given as ``host``."""
    return server.url.removesuffix("/v1") + "/mem0"


@pytest.fixture(scope="module")
def mem0(mem0_host, make_key):
    """``mem0(tenant)`` → a ``mem0.MemoryClient`` with a new key of that tenant."""
    clients: list[MemoryClient] = []

    def make(tenant: str = "acme") -> MemoryClient:
        client = MemoryClient(api_key=make_key(tenant), host=mem0_host)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.client.close()


def _texts(results: list[dict]) -> set[str]:
    return {r["memory"] for r in results}


def test_construction_pings_with_the_token_scheme(mem0):
    client = mem0("ping")
    assert client.org_id == "ping" and client.project_id == "ping"
    assert client.client.headers["authorization"].startswith("Token ")


def test_verbatim_add_then_get_all_search_and_get(mem0, fake):
    client = mem0("verbatim")
    messages = [{"role": "user", "content": "I keep my bike in the garage."},
                {"role": "assistant", "content": "Noted, the bike is in the garage."}]
    added = client.add(messages, user_id="alice", infer=False, metadata={"source": "chat"})
    assert [r["event"] for r in added["results"]] == ["ADD", "ADD"] and fake.requests == []
    assert all(r["id"].startswith("mem_") and r["data"]["memory"] == r["memory"] for r in added["results"])
    assert _texts(added["results"]) == {m["content"] for m in messages}
    again = client.add(messages, user_id="alice", infer=False)
    assert again["results"] == []  # nothing new: mem0 reports no NOOPs

    listed = client.get_all(filters={"user_id": "alice"})
    assert listed["count"] == 2 and listed["next"] is None and listed["previous"] is None
    assert _texts(listed["results"]) == _texts(added["results"])
    first = listed["results"][0]
    assert first["user_id"] == "alice" and first["agent_id"] is None and first["metadata"]["source"] == "chat"
    assert datetime.fromisoformat(first["created_at"]).tzinfo is not None

    found = client.search("where is the bike", filters={"AND": [{"user_id": "alice"}]}, top_k=1)["results"]
    assert len(found) == 1 and "bike" in found[0]["memory"] and 0 < found[0]["score"] <= 1
    fetched = client.get(found[0]["id"])
    assert fetched["id"] == found[0]["id"] and fetched["memory"] == found[0]["memory"]
    assert "score" not in fetched and fetched["expiration_date"] is None


def test_inferred_add_uses_the_memory_model_and_contradictions_replace(mem0, fake):
    client = mem0("inferred")
    fake.push(facts("Likes green tea"))
    first = client.add("I like green tea", user_id="bob")["results"]
    assert [(r["event"], r["memory"]) for r in first] == [("ADD", "Likes green tea")]
    assert len(fake.requests) == 1 and fake.requests[0]["model"] == MEMORY_MODEL
    assert "I like green tea" in fake.requests[0]["messages"][-1]["content"]

    fake.push(facts("Dislikes green tea"), decisions({"fact": "n0", "event": "INVALIDATE", "target": "0"}))
    second = client.add([{"role": "user", "content": "Actually I can't stand green tea"}], user_id="bob")["results"]
    assert [(r["event"], r["memory"]) for r in second] == [("ADD", "Dislikes green tea")]
    assert second[0]["replaces"] == first[0]["id"]
    assert _texts(client.get_all(filters={"user_id": "bob"})["results"]) == {"Dislikes green tea"}
    old = client.get(first[0]["id"])
    assert old["replaced_by"] == second[0]["id"] and old["status"] == "invalidated"
    both = client.search("green tea", filters={"user_id": "bob"}, latest_only=False)["results"]
    assert _texts(both) == {"Likes green tea", "Dislikes green tea"}

    fake.push(facts("Drinks green tea every morning"),
              decisions({"fact": "n0", "event": "UPDATE", "target": "0", "text": "Drinks green tea every morning"}))
    third = client.add("I drink green tea every morning now", user_id="bob")["results"]
    assert [(r["event"], r["id"]) for r in third] == [("UPDATE", second[0]["id"])]
    assert third[0]["previous_memory"] == "Dislikes green tea"


def test_update_and_history(mem0):
    client = mem0("updates")
    created = client.add("Lives in Lisbon", user_id="carol", infer=False)["results"][0]
    updated = client.update(created["id"], text="Lives in Porto", metadata={"city": "Porto"})
    assert updated["id"] == created["id"] and updated["memory"] == "Lives in Porto"
    assert updated["metadata"] == {"city": "Porto"}
    expiring = client.update(created["id"], expiration_date="2999-01-31")
    assert expiring["expiration_date"] == "2999-01-31" and expiring["memory"] == "Lives in Porto"
    assert client.update(created["id"], expiration_date=None)["expiration_date"] is None

    history = client.history(created["id"])
    assert isinstance(history, list) and [e["event"] for e in history] == ["ADD", "UPDATE", "UPDATE", "UPDATE"]
    assert (history[1]["old_memory"], history[1]["new_memory"]) == ("Lives in Lisbon", "Lives in Porto")
    assert all(e["memory_id"] == created["id"] and e["user_id"] == "carol" for e in history)
    assert [m["memory"] for m in client.search("where does carol live", filters={"user_id": "carol"})["results"]] \
        == ["Lives in Porto"]


def test_delete_and_delete_all(mem0):
    client = mem0("deletes")
    kept = client.add("Owns a red kayak", user_id="keeper", infer=False)["results"][0]
    gone = client.add([{"role": "user", "content": "Plays the cello"}, {"role": "user", "content": "Speaks Danish"}],
                      user_id="leaver", infer=False)["results"]
    assert client.delete(gone[0]["id"]) == {"message": "Memory deleted successfully!"}
    with pytest.raises(MemoryNotFoundError):
        client.get(gone[0]["id"])
    trail = client.history(gone[0]["id"])
    assert [e["event"] for e in trail] == ["ADD", "DELETE"] and all(e["new_memory"] is None for e in trail)
    with pytest.raises(MemoryNotFoundError):
        client.delete(gone[0]["id"])

    assert client.get_all(filters={"user_id": "leaver"})["count"] == 1
    assert "message" in client.delete_all(user_id="leaver")
    assert client.get_all(filters={"user_id": "leaver"}) == {"count": 0, "next": None, "previous": None,
                                                              "results": []}
    with pytest.raises(MemoryNotFoundError):
        client.history(gone[1]["id"])  # a purge leaves nothing, history included
    assert [m["id"] for m in client.get_all(filters={"user_id": "keeper"})["results"]] == [kept["id"]]


def test_get_all_pages(mem0):
    client = mem0("pages")
    client.add([{"role": "user", "content": f"Fact number {i} about the garden"} for i in range(5)],
               user_id="dana", infer=False)
    pages = [client.get_all(filters={"user_id": "dana"}, page=p, page_size=2) for p in (1, 2, 3)]
    assert [p["count"] for p in pages] == [5, 5, 5]
    assert [len(p["results"]) for p in pages] == [2, 2, 1]
    assert [p["next"] for p in pages] == ["?page=2&page_size=2", "?page=3&page_size=2", None]
    assert [p["previous"] for p in pages] == [None, "?page=1&page_size=2", "?page=2&page_size=2"]
    seen = [m["id"] for p in pages for m in p["results"]]
    assert len(set(seen)) == 5 and seen == sorted(seen, reverse=True)  # newest first, each once
    assert client.get_all(filters={"user_id": "dana"}, page=4, page_size=2)["results"] == []


def test_scopes_and_tenants_are_kept_apart(mem0):
    client = mem0("scopes")
    mine = client.add("Allergic to peanuts", user_id="erin", infer=False)["results"][0]
    client.add("Allergic to shellfish", filters={"user_id": "frank"}, infer=False)  # newer clients' way
    client.add("Prefers aisle seats", user_id="erin", agent_id="travel", run_id="trip-1", infer=False)
    client.add("Prefers window seats", user_id="erin", agent_id="travel", run_id="trip-2", infer=False)

    found = client.search("allergic", filters={"user_id": "frank"})["results"]
    assert _texts(found) == {"Allergic to shellfish"}
    assert _texts(client.get_all(filters={"user_id": "erin"})["results"]) == {
        "Allergic to peanuts", "Prefers aisle seats", "Prefers window seats"}
    trip = client.get_all(filters={"AND": [{"user_id": "erin"}, {"agent_id": "travel"}, {"run_id": "trip-1"}]})
    assert _texts(trip["results"]) == {"Prefers aisle seats"} and trip["results"][0]["session_id"] == "trip-1"
    any_run = client.search("seats", filters={"AND": [{"agent_id": "travel"}, {"run_id": "*"}]})["results"]
    assert _texts(any_run) == {"Prefers aisle seats", "Prefers window seats"}

    other = mem0("another-tenant")
    assert other.get_all(filters={"user_id": "erin"})["results"] == []
    assert other.search("allergic", filters={"user_id": "erin"})["results"] == []
    with pytest.raises(MemoryNotFoundError):
        other.get(mine["id"])
    with pytest.raises(MemoryNotFoundError):
        other.delete(mine["id"])
    other.delete_all(user_id="erin")
    assert client.get(mine["id"])["memory"] == "Allergic to peanuts"


def test_metadata_and_date_filters_reach_the_native_search(mem0):
    client = mem0("filters")
    client.add("Booked a flight to Oslo", user_id="gus", metadata={"kind": "travel", "year": 2024}, infer=False)
    client.add("Booked a dentist visit", user_id="gus", metadata={"kind": "health", "year": 2025}, infer=False)
    travel = client.search("booked", filters={"AND": [{"user_id": "gus"}, {"metadata": {"kind": "travel"}}]})
    assert _texts(travel["results"]) == {"Booked a flight to Oslo"}
    recent = client.search("booked", filters={"user_id": "gus"}, metadata={"year": {"gte": 2025}})
    assert _texts(recent["results"]) == {"Booked a dentist visit"}
    future = client.search("booked", filters={"AND": [{"user_id": "gus"}, {"created_at": {"gte": "2999-01-01"}}]})
    assert future["results"] == []
    today = client.search("booked", filters={"user_id": "gus", "created_at": {"lte": time.strftime("%Y-%m-%d")}},
                          fields=["memory"])
    assert len(today["results"]) == 2 and all(set(r) == {"id", "memory"} for r in today["results"])


def test_queued_add_is_an_event_to_poll(mem0, fake, configure):
    configure(memory_queue="engram-memory")
    client = mem0("queued")
    fake.push(facts("Collects vinyl records"))
    queued = client.add("I collect vinyl records", user_id="hana")
    assert queued["status"] == "PENDING" and queued["event_id"].startswith("memjob_")
    deadline = time.monotonic() + 30
    while True:
        event = client.client.get(f"/v1/event/{queued['event_id']}/").raise_for_status().json()
        if event["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert event["status"] == "SUCCEEDED", event
    assert [(r["event"], r["memory"]) for r in event["results"]] == [("ADD", "Collects vinyl records")]
    inline = client.add("I also collect stamps", user_id="hana", infer=False, async_mode=False)
    assert [r["event"] for r in inline["results"]] == ["ADD"]


@pytest.mark.parametrize(("call", "words"), [
    (lambda c: c.search("x", filters={"OR": [{"user_id": "a"}, {"user_id": "b"}]}), "'OR' filters"),
    (lambda c: c.get_all(filters={"user_id": "a", "colour": "red"}), "Unsupported filter 'colour'"),
    (lambda c: c.get_all(filters={"AND": [{"user_id": "a"}, {"user_id": "b"}]}), "two different values"),
    (lambda c: c.add("hello", app_id="shop", user_id="a"), "'app_id' is not supported"),
    (lambda c: c.add("hello", infer=False), "Name a scope"),
    (lambda c: c.delete_all(user_id="*"), "Name a scope"),
    (lambda c: c.search("x", filters={"user_id": "a"}, categories=["food"]), "categories"),
    (lambda c: c.get_all(filters={"user_id": "a"}, show_expired=True), "show_expired"),
    (lambda c: c.get("not an id!"), "memory_id"),
])
def test_unsupported_requests_are_400s_that_say_why(mem0, call, words):
    client = mem0("errors")
    with pytest.raises(ValidationError) as raised:
        call(client)
    assert words in str(raised.value)
    assert client.get_all(filters={"user_id": "a"})["count"] == 0  # nothing was written


def test_unknown_key_fails_construction_and_bearer_works_too(mem0_host, make_key):
    with pytest.raises(ValueError, match="401"):  # the client reads mem0's "detail", Engram keeps its envelope
        MemoryClient(api_key="sk-engram-not-a-key", host=mem0_host)
    key = make_key("bearer")
    response = httpx.post(f"{mem0_host}/v3/memories/", json={"filters": {"user_id": "x"}},
                          headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200 and response.json()["count"] == 0
    denied = httpx.post(f"{mem0_host}/v3/memories/", json={"filters": {"user_id": "x"}},
                        headers={"Authorization": "Basic " + key})
    assert denied.status_code == 401


def test_client_errors_map_to_mem0_exceptions(mem0_host, make_key):
    client = MemoryClient(api_key=make_key("exceptions"), host=mem0_host)
    with pytest.raises(MemoryNotFoundError):
        client.update("mem_" + "0" * 26, text="anything")
    for foreign in ("vs_not_a_memory", "6f0e8c2a-7f3d-4b8e-9a55-0c1d2e3f4a5b"):  # well formed, not Engram's: 404
        with pytest.raises(MemoryNotFoundError):
            client.get(foreign)
    client.client.headers["Authorization"] = "Token sk-engram-revoked-or-never-was"
    with pytest.raises(AuthenticationError):
        client.get_all(filters={"user_id": "a"})
