"""``/v1/memories`` over HTTP: adds with and without the model, dedup, contradictions kept with validity, updates
as versions, search, history, validation."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import BOTH_BACKENDS
from tests.fakes.chat_server import error, text
from tests.memory.conftest import MEMORY_MODEL, decisions, facts

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

def _add(client, **body):
    response = client.post("/memories", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _search(client, **body):
    response = client.post("/memories/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def test_verbatim_add_stores_each_message_once(api, fake):
    client = api("verbatim")
    messages = [{"role": "user", "content": "I keep my bike in the garage."},
                {"role": "assistant", "content": "Noted, the bike is in the garage."}]
    first = _add(client, messages=messages, user_id="u1", infer=False)
    assert [r["event"] for r in first["results"]] == ["ADD", "ADD"]
    assert first["usage"]["model_calls"] == 0 and fake.requests == []
    again = _add(client, messages=messages, user_id="u1", infer=False)
    assert [r["event"] for r in again["results"]] == ["NOOP", "NOOP"]
    listed = client.get("/memories", params={"user_id": "u1"}).json()
    assert len(listed["data"]) == 2 and listed["object"] == "list"
    hit = _search(client, query="where is the bike", user_id="u1", top_k=1)[0]
    assert "bike" in hit["memory"] and 0 < hit["score"] <= 1
    assert set(hit["score_details"]) >= {"relevance", "recency", "importance", "decay"}
    assert hit["metadata"]["role"] in ("user", "assistant")


def test_same_fact_twice_is_one_memory_and_the_second_add_calls_no_model(api, fake):
    client = api("dedup")
    fake.push(facts("Likes green tea"))
    first = _add(client, messages="I like green tea", user_id="u1")
    assert [r["event"] for r in first["results"]] == ["ADD"]
    assert first["usage"]["model_calls"] == 1 and first["usage"]["total_tokens"] > 0
    second = _add(client, messages="Likes green tea.", user_id="u1")  # same once normalised
    assert [r["event"] for r in second["results"]] == ["NOOP"]
    assert second["usage"]["model_calls"] == 0 and len(fake.requests) == 1
    memories = client.get("/memories", params={"user_id": "u1"}).json()["data"]
    assert len(memories) == 1 and memories[0]["confidence"] > 0.9


def test_contradiction_invalidates_and_keeps_the_old_memory_visible_as_of_before(api, fake):
    client = api("contradiction")
    fake.push(facts("Likes sushi"))
    old = _add(client, messages="I really like sushi", user_id="u1", timestamp=1_700_000_000)["results"][0]
    fake.push(facts("Dislikes sushi"), decisions({"fact": "n0", "event": "INVALIDATE", "target": "0"}))
    result = _add(client, messages="Actually I can't stand sushi any more", user_id="u1", timestamp=1_710_000_000)
    change = result["results"][0]
    assert change["event"] == "INVALIDATE" and change["previous_id"] == old["id"]
    assert result["usage"]["model_calls"] == 2
    # the decision call saw the existing memory under a short id, never its real id
    shown = fake.requests[-1]["messages"][-1]["content"]
    assert '"id": "0"' in shown and old["id"] not in shown
    kept = client.get(f"/memories/{old['id']}").json()
    assert kept["status"] == "invalidated" and kept["invalidated_by"] == change["id"]
    assert kept["valid_to"] == 1_710_000_000
    now = [m["memory"] for m in _search(client, query="sushi", user_id="u1")]
    assert now == ["Dislikes sushi"]
    before = [m["memory"] for m in _search(client, query="sushi", user_id="u1", as_of=1_705_000_000)]
    assert before == ["Likes sushi"]
    both = {m["memory"] for m in _search(client, query="sushi", user_id="u1", include_invalidated=True)}
    assert both == {"Likes sushi", "Dislikes sushi"}
    events = [e["event"] for e in client.get(f"/memories/{old['id']}/history").json()["data"]]
    assert events == ["ADD", "INVALIDATE"]


def test_model_update_keeps_the_id_and_the_old_version(api, fake):
    client = api("model-update")
    fake.push(facts("Works at Acme"))
    old = _add(client, messages="I work at Acme", user_id="u1")["results"][0]
    fake.push(facts("Works at Acme as a data engineer"),
              decisions({"fact": "n0", "event": "UPDATE", "target": "0",
                         "text": "Works at Acme as a data engineer"}))
    change = _add(client, messages="I'm a data engineer at Acme", user_id="u1")["results"][0]
    assert change["event"] == "UPDATE" and change["id"] == old["id"]
    current = client.get(f"/memories/{old['id']}").json()
    assert current["memory"] == "Works at Acme as a data engineer" and current["status"] == "active"
    history = client.get(f"/memories/{old['id']}/history").json()["data"]
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in history][-1] == (
        "UPDATE", "Works at Acme", "Works at Acme as a data engineer")


def test_update_by_hand_makes_a_version_visible_with_as_of(api):
    client = api("hand-update")
    created = _add(client, messages="Lives in Lisbon", user_id="u1", infer=False)["results"][0]
    time.sleep(1.1)
    between = int(time.time())
    time.sleep(1.1)
    response = client.post(f"/memories/{created['id']}", json={"memory": "Lives in Porto", "importance": 0.9})
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["id"] == created["id"] and updated["memory"] == "Lives in Porto"
    assert updated["importance"] == pytest.approx(0.9)
    assert [m["memory"] for m in _search(client, query="lives", user_id="u1")] == ["Lives in Porto"]
    assert [m["memory"] for m in _search(client, query="lives", user_id="u1", as_of=between)] == ["Lives in Lisbon"]
    history = client.get(f"/memories/{created['id']}/history").json()["data"]
    assert [e["event"] for e in history] == ["ADD", "UPDATE"]
    pinned = client.post(f"/memories/{created['id']}", json={"pinned": True}).json()
    assert pinned["pinned"] is True and pinned["memory"] == "Lives in Porto"


def test_malformed_model_output_is_retried_once_then_fails_with_nothing_written(api, fake):
    client = api("malformed")
    fake.push(text("not json at all"), facts("Owns a cat"))
    ok = _add(client, messages="I have a cat", user_id="u1")
    assert [r["event"] for r in ok["results"]] == ["ADD"] and ok["usage"]["model_calls"] == 2
    assert "invalid" in fake.requests[1]["messages"][-1]["content"]
    fake.push(text("{\"facts\": 3}"), text("still wrong"))
    response = client.post("/memories", json={"messages": "I have a dog", "user_id": "u1"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "memory_model_output_invalid"
    assert len(client.get("/memories", params={"user_id": "u1"}).json()["data"]) == 1


def test_backend_down_inline_is_502_and_nothing_written(api, fake):
    client = api("down")
    fake.push(error(503, "overloaded"))
    response = client.post("/memories", json={"messages": "I play chess", "user_id": "u1"})
    assert response.status_code == 502, response.text
    assert client.get("/memories", params={"user_id": "u1"}).json()["data"] == []


def test_infer_without_a_model_names_the_setting(api, configure):
    configure(memory_model=None, chat_model=None)
    response = api("nomodel").post("/memories", json={"messages": "I like tea", "user_id": "u1"})
    assert response.status_code == 400
    error_body = response.json()["error"]
    assert "ENGRAM_MEMORY_MODEL" in error_body["message"] and error_body["param"] == "infer"


def test_users_never_see_each_others_memories(api):
    client = api("scopes")
    _add(client, messages="My locker code is 4711", user_id="alice", infer=False)
    _add(client, messages="My locker code is 1234", user_id="bob", infer=False)
    for user, secret in (("alice", "4711"), ("bob", "1234")):
        found = _search(client, query="locker code", user_id=user, top_k=10)
        assert [m["user_id"] for m in found] == [user] and secret in found[0]["memory"]
    assert [m["user_id"] for m in client.get("/memories", params={"user_id": "bob"}).json()["data"]] == ["bob"]


def test_agent_and_run_scopes_narrow_a_user(api):
    client = api("narrow")
    _add(client, messages="Prefers dark mode", user_id="u1", agent_id="agent_a", infer=False)
    _add(client, messages="Prefers light mode", user_id="u1", agent_id="agent_b", infer=False)
    assert len(_search(client, query="mode", user_id="u1")) == 2
    only = _search(client, query="mode", user_id="u1", agent_id="agent_a")
    assert [m["memory"] for m in only] == ["Prefers dark mode"]


def test_filters_types_and_time_range(api):
    client = api("filters")
    _add(client, messages="Flight to Oslo on Friday", user_id="u1", infer=False, metadata={"topic": "travel"},
         memory_type="episode")
    _add(client, messages="Flight simulator is a hobby", user_id="u1", infer=False, metadata={"topic": "hobby"})
    travel = _search(client, query="flight", user_id="u1",
                     filters={"type": "eq", "key": "topic", "value": "travel"})
    assert [m["memory"] for m in travel] == ["Flight to Oslo on Friday"]
    episodes = _search(client, query="flight", user_id="u1", memory_types=["episode"])
    assert [m["memory_type"] for m in episodes] == ["episode"]
    assert _search(client, query="flight", user_id="u1", created_before=1_000_000) == []
    keyword = _search(client, query="simulator", user_id="u1", ranking="keyword", top_k=1)
    assert keyword[0]["memory"] == "Flight simulator is a hobby"
    weights = _search(client, query="flight", user_id="u1", ranking={"vector": 1, "text": 1, "importance": 2})
    assert len(weights) == 2


def test_delete_scrubs_history_text(api):
    client = api("delete")
    created = _add(client, messages="Secret plan: move to Mars", user_id="u1", infer=False)["results"][0]
    client.post(f"/memories/{created['id']}", json={"memory": "Secret plan: move to Venus"})
    response = client.delete(f"/memories/{created['id']}")
    assert response.json() == {"id": created["id"], "object": "memory.deleted", "deleted": True}
    assert client.get(f"/memories/{created['id']}").status_code == 404
    history = client.get(f"/memories/{created['id']}/history").json()["data"]
    assert [e["event"] for e in history] == ["ADD", "UPDATE", "DELETE"]
    assert all(e["old_memory"] is None and e["new_memory"] is None for e in history)
    assert client.delete(f"/memories/{created['id']}").status_code == 404


@pytest.mark.parametrize(("method", "path", "body", "param"), [
    ("post", "/memories", {"messages": "x"}, None),
    ("post", "/memories", {"messages": "x", "user_id": "u", "bogus": 1}, "bogus"),
    ("post", "/memories", {"messages": [], "user_id": "u"}, "messages"),
    ("post", "/memories", {"messages": [{"role": "tool", "content": "x"}], "user_id": "u"}, "messages[0].role"),
    ("post", "/memories", {"messages": "x", "user_id": "u", "memory_type": "gossip"}, "memory_type"),
    ("post", "/memories", {"messages": "x", "user_id": "u", "importance": 2}, "importance"),
    ("post", "/memories", {"messages": "x", "user_id": "u", "timestamp": "yesterday"}, "timestamp"),
    ("post", "/memories", {"messages": "   ", "user_id": "u", "infer": False}, "messages"),
    ("post", "/memories/search", {"query": "x"}, None),
    ("post", "/memories/search", {"query": "x", "user_id": "u", "filters": {"key": "k", "value": 1}}, "filters.type"),
    ("post", "/memories/search", {"query": "x", "user_id": "u", "top_k": 0}, "top_k"),
    ("post", "/memories/search", {"query": "x", "user_id": "u", "ranking": "fastest"}, "ranking"),
    ("post", "/memories/search", {"query": "x", "user_id": "u", "filters": {"type": "zz"}}, "filters.type"),
    ("post", "/memories/search", {"query": "x", "user_id": "u", "filters": {"key": "k", "type": []}}, "filters.type"),
    ("get", "/memories?user_id=a%00b", None, "user_id"),
    ("get", "/memories", None, None),
    ("delete", "/memories", None, None),
    ("get", "/memories?user_id=a%00b", None, "user_id"),
    ("delete", "/memories?run_id=%00", None, "run_id"),
    ("get", "/memories/vs_123", None, "memory_id"),
    ("post", "/memories/mem_abc", {"memory": ""}, "memory"),
])
def test_bad_requests_are_400_and_change_nothing(api, method, path, body, param):
    client = api("validation")
    response = client.request(method.upper(), path, json=body) if body is not None else getattr(client, method)(path)
    assert response.status_code == 400, response.text
    error_body = response.json()["error"]
    assert error_body["type"] == "invalid_request_error"
    if param is not None:
        assert error_body["param"] == param
    assert client.get("/memories", params={"user_id": "u"}).json()["data"] == []


def test_idempotency_key_replays_the_first_answer(api, fake):
    client = api("idempotent")
    headers = {"Idempotency-Key": "add-1"}
    body = {"messages": "Birthday is 4 May", "user_id": "u1", "infer": False}
    first = client.post("/memories", json=body, headers=headers)
    second = client.post("/memories", json=body, headers=headers)
    assert first.status_code == second.status_code == 200 and first.json() == second.json()
    assert len(client.get("/memories", params={"user_id": "u1"}).json()["data"]) == 1
    other = client.post("/memories", json={**body, "messages": "Other"}, headers=headers)
    assert other.status_code == 400 and other.json()["error"]["code"] == "idempotency_key_reused"


def test_model_name_is_the_configured_memory_model(api, fake):
    fake.push(facts())
    result = _add(api("model"), messages="hello there", user_id="u1")
    assert result["results"] == [] and fake.requests[0]["model"] == MEMORY_MODEL


def test_restore_and_audit_over_http_never_show_text(api):
    client = api("audit")
    created = _add(client, messages="Secret garden code 5150", user_id="u1", infer=False)["results"][0]
    assert client.post(f"/memories/{created['id']}/restore").status_code == 400  # not archived
    from chalicelib import deps
    from chalicelib.store.db import connect

    with connect(deps.current_settings()) as conn:
        conn.execute("UPDATE memories SET archived_at = now() WHERE id = %s", (created["id"],))
    assert _search(client, query="garden code", user_id="u1") == []
    restored = client.post(f"/memories/{created['id']}/restore")
    assert restored.status_code == 200 and restored.json()["status"] == "active"
    assert [m["id"] for m in _search(client, query="garden code", user_id="u1")] == [created["id"]]
    client.delete("/memories", params={"user_id": "u1"})
    audit = client.get("/memories/audit", params={"limit": 1}).json()
    assert audit["object"] == "list" and audit["has_more"] is True and audit["data"][0]["event"] == "purge"
    rest = client.get("/memories/audit", params={"after": audit["data"][0]["id"]}).json()["data"]
    assert [e["event"] for e in rest] == ["restore"]
    assert "5150" not in json.dumps(audit) + json.dumps(rest)
    assert client.get("/memories/audit", params={"event": "nope"}).status_code == 400
    assert api("audit-other").get("/memories/audit").json()["data"] == []


def test_working_memory_needs_a_run_and_expires_in_a_day(api):
    client = api("working")
    response = client.post("/memories", json={"messages": "Draft plan", "user_id": "u1", "infer": False,
                                              "memory_type": "working"})
    assert response.status_code == 400 and "run_id" in response.json()["error"]["message"]
    created = _add(client, messages="Draft plan", user_id="u1", run_id="r1", infer=False, memory_type="working")
    memory = client.get(f"/memories/{created['results'][0]['id']}").json()
    assert 86_000 < memory["expires_at"] - memory["created_at"] <= 86_400
