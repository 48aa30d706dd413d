"""The memory service's own promises, over HTTP: updates that change nothing write nothing, message parts are held
to the per-message cap, every model-written memory records the prompts that wrote it (asked for with a JSON
schema), and one definition of "active" serves every reader."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import BOTH_BACKENDS
from tests.memory.conftest import decisions, facts

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

REPO = Path(__file__).resolve().parents[2]


def _add(client, **body):
    response = client.post("/memories", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_an_update_that_changes_nothing_writes_nothing(api):
    client = api("noop-update")
    memory_id = _add(client, messages="Ivy grows basil", user_id="ivy", infer=False)["results"][0]["id"]
    before = client.get(f"/memories/{memory_id}").json()
    for body in ({}, {"memory": "Ivy grows basil"}, {"memory": "  ivy grows BASIL. "}):
        response = client.post(f"/memories/{memory_id}", json=body)
        assert response.status_code == 200, response.text
        assert response.json() == before
    assert [e["event"] for e in client.get(f"/memories/{memory_id}/history").json()["data"]] == ["ADD"]
    changed = client.post(f"/memories/{memory_id}", json={"pinned": True}).json()
    assert changed["pinned"] is True
    history = client.get(f"/memories/{memory_id}/history").json()["data"]
    assert [(e["event"], e["details"]) for e in history] == [("ADD", {}), ("UPDATE", {"fields": ["pinned"]})]


def test_content_parts_are_held_to_the_message_cap(api):
    client = api("parts-cap")
    part = {"type": "text", "text": "x" * 20_000}
    response = client.post("/memories", json={"messages": [{"role": "user", "content": [part, part, part]}],
                                              "user_id": "joe", "infer": False})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "messages[0].content" and "32768" in error["message"]
    assert client.get("/memories", params={"user_id": "joe"}).json()["data"] == []
    fits = client.post("/memories", json={"messages": [{"role": "user", "content": [part, {"type": "text",
                                                                                            "text": "y" * 12_000}]}],
                                          "user_id": "joe", "infer": False})
    assert fits.status_code == 200, fits.text
    assert len(client.get("/memories", params={"user_id": "joe"}).json()["data"][0]["memory"]) == 32_001


def test_model_written_memories_record_their_prompts_and_json_is_asked_for(api, fake):
    client = api("prompt-versions")
    fake.push(facts("Kim swims on Mondays"))
    first = _add(client, messages="I swim every Monday", user_id="kim")
    assert first["usage"]["prompts"] == ["memory.extraction@1"]
    memory_id = first["results"][0]["id"]
    assert client.get(f"/memories/{memory_id}").json()["prompt_version"] == "memory.extraction@1"
    assert fake.requests[0]["response_format"]["json_schema"]["name"] == "memory_extraction"

    fake.push(facts("Kim swims on Mondays and Thursdays"),
              decisions({"fact": "n0", "event": "UPDATE", "target": "0",
                         "text": "Kim swims on Mondays and Thursdays"}))
    second = _add(client, messages="Now I swim on Thursdays too", user_id="kim")
    assert second["usage"]["prompts"] == ["memory.extraction@1", "memory.decision@1"]
    assert fake.requests[-1]["response_format"]["json_schema"]["name"] == "memory_decision"
    updated = client.get(f"/memories/{memory_id}").json()
    assert updated["memory"] == "Kim swims on Mondays and Thursdays"
    assert updated["prompt_version"] == "memory.extraction@1 memory.decision@1"
    by_hand = client.post(f"/memories/{memory_id}", json={"memory": "Kim swims daily"}).json()
    assert by_hand["prompt_version"] is None
    verbatim = _add(client, messages="Kim owns goggles", user_id="kim", infer=False)["results"][0]["id"]
    assert client.get(f"/memories/{verbatim}").json()["prompt_version"] is None


def test_active_is_defined_once():
    """The SQL of "active" (open, not merged, archived or expired) lives in chalicelib/memory/active.py only."""
    pieces = ("superseded_by IS NULL", "consolidated_into IS NULL", "archived_at IS NULL")
    holders = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "chalicelib").rglob("*.py")
                     if any(piece in p.read_text() for piece in pieces))
    assert holders == ["chalicelib/memory/active.py"]
