"""Engram as an MCP server (``/mcp``, stateless Streamable HTTP) through the official ``mcp`` SDK's client, in both
protocol eras it speaks (the ``initialize`` handshake and 2026-07-28), on both vector backends: every tool with its
schemas and annotations, errors as MCP's, authentication, permissions (a tool the key may not use is not listed), a
key bound to one user, and a second tenant's key seeing nothing of the first's."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import BOTH_BACKENDS
from tests.mcp.conftest import connected, run
from tests.memory.conftest import decisions, facts

VECTOR_BACKENDS = BOTH_BACKENDS

MEMORY_TOOLS = {"add_memory", "search_memories", "list_memories", "get_memory", "update_memory", "delete_memory",
                "memory_history"}
KNOWLEDGE_TOOLS = {"list_vector_stores", "search", "fetch"}
READ_TOOLS = {"search_memories", "list_memories", "get_memory", "memory_history", "list_vector_stores", "search",
              "fetch"}


def _error(result) -> dict:
    assert result.is_error, result
    return json.loads(result.content[0].text)["error"]


@pytest.fixture(scope="module")
def knowledge(api, vector_backend) -> dict:
    """A vector store of tenant ``mcp-a`` with two files (attributes ``team``)."""
    client = api("mcp-a")
    store = client.post("/vector_stores", json={"name": "handbook"}).json()["id"]
    files = {}
    for name, body, team in (("pager.txt", b"Rotate the on-call pager every Monday at nine.", "sre"),
                             ("lunch.txt", b"The canteen serves lunch from noon until two.", "ops")):
        file_id = client.post("/files", files={"file": (name, body)}, data={"purpose": "assistants"}).json()["id"]
        attached = client.post(f"/vector_stores/{store}/files", json={"file_id": file_id, "attributes": {"team": team}})
        assert attached.json()["status"] == "completed", attached.text
        files[name] = file_id
    return {"store": store, **files}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_are_listed_with_schemas_and_annotations(mcp_url, key_for, mode):
    async def go():
        async with connected(mcp_url, key_for("mcp-a"), mode) as client:
            assert client.server_info.name == "engram" and client.instructions
            return client.protocol_version, (await client.list_tools()).tools

    version, tools = run(go())
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    by_name = {t.name: t for t in tools}
    assert set(by_name) == MEMORY_TOOLS | KNOWLEDGE_TOOLS
    for tool in tools:
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object", tool.name
        assert tool.description and tool.title and tool.annotations is not None
        assert tool.annotations.read_only_hint == (tool.name in READ_TOOLS), tool.name
    assert by_name["delete_memory"].annotations.destructive_hint is True
    assert by_name["add_memory"].annotations.destructive_hint is False
    assert by_name["search"].annotations.idempotent_hint is True
    assert {"user_id", "agent_id", "run_id"} <= set(by_name["search_memories"].input_schema["properties"])
    assert "query" in by_name["search"].input_schema["required"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_memory_tool(mcp_url, key_for, fake, mode):
    user = f"dana-{mode}"

    async def go():
        async with connected(mcp_url, key_for("mcp-a"), mode) as client:
            added = await client.call_tool("add_memory", {"text": "Dana paddles a green kayak", "user_id": user})
            assert not added.is_error, added
            memory_id = added.structured_content["results"][0]["id"]
            assert json.loads(added.content[0].text) == added.structured_content
            fake.push(facts("Dana is allergic to peanuts"), decisions({"fact": "n0", "event": "ADD"}))
            inferred = await client.call_tool("add_memory", {
                "messages": [{"role": "user", "content": "Careful, I'm allergic to peanuts."}], "infer": True,
                "user_id": user})
            assert not inferred.is_error, inferred.content[0].text
            assert [r["memory"] for r in inferred.structured_content["results"]] == ["Dana is allergic to peanuts"]
            found = await client.call_tool("search_memories", {"query": "kayak", "user_id": user, "top_k": 5})
            assert found.structured_content["results"][0]["id"] == memory_id
            assert found.structured_content["results"][0]["score"] > 0
            listed = await client.call_tool("list_memories", {"user_id": user})
            assert len(listed.structured_content["data"]) == 2 and not listed.structured_content["has_more"]
            got = await client.call_tool("get_memory", {"memory_id": memory_id})
            assert got.structured_content["memory"] == "Dana paddles a green kayak"
            updated = await client.call_tool("update_memory", {"memory_id": memory_id,
                                                               "text": "Dana paddles a red kayak"})
            assert updated.structured_content["memory"] == "Dana paddles a red kayak"
            history = await client.call_tool("memory_history", {"memory_id": memory_id})
            assert [e["event"] for e in history.structured_content["events"]] == ["ADD", "UPDATE"]
            deleted = await client.call_tool("delete_memory", {"memory_id": memory_id})
            assert deleted.structured_content == {"id": memory_id, "deleted": True}
            assert _error(await client.call_tool("get_memory", {"memory_id": memory_id}))["code"] == "not_found"

    run(go())


def test_knowledge_tools(mcp_url, key_for, knowledge):
    async def go():
        async with connected(mcp_url, key_for("mcp-a")) as client:
            stores = await client.call_tool("list_vector_stores", {})
            assert [s["id"] for s in stores.structured_content["data"]] == [knowledge["store"]]
            assert stores.structured_content["data"][0]["file_counts"]["completed"] == 2
            found = await client.call_tool("search", {"query": "when is the pager rotated?"})
            best = found.structured_content["results"][0]
            assert best["file_id"] == knowledge["pager.txt"] and best["title"] == "pager.txt"
            assert best["id"] == f"{knowledge['store']}/{knowledge['pager.txt']}" and best["url"].startswith("engram:")
            only_ops = await client.call_tool("search", {"query": "pager lunch", "vector_store_ids": [knowledge["store"]],
                                                         "filters": {"type": "eq", "key": "team", "value": "ops"},
                                                         "max_num_results": 5,
                                                         "ranking_options": {"score_threshold": 0.0}})
            assert {r["file_id"] for r in only_ops.structured_content["results"]} == {knowledge["lunch.txt"]}
            fetched = await client.call_tool("fetch", {"id": best["id"]})
            assert fetched.structured_content["text"] == "Rotate the on-call pager every Monday at nine."
            assert fetched.structured_content["metadata"]["attributes"] == {"team": "sre"}
            by_file = await client.call_tool("fetch", {"id": knowledge["lunch.txt"]})
            assert "canteen" in by_file.structured_content["text"]
            assert _error(await client.call_tool("fetch", {"id": "file-nope"}))["code"] == "not_found"
            bad = _error(await client.call_tool("search", {"query": "x", "max_num_results": 99}))
            assert bad["param"] == "max_num_results"
            bad = _error(await client.call_tool("search", {"query": "x", "filters": {"type": "nope"}}))
            assert bad["type"] == "invalid_request_error"

    run(go())


def test_errors_are_mcps(mcp_url, key_for):
    from mcp.shared.exceptions import MCPError

    async def go():
        async with connected(mcp_url, key_for("mcp-a")) as client:
            wrong = _error(await client.call_tool("search_memories", {"query": "x", "user_id": "u", "top_k": 0}))
            assert wrong["param"] == "top_k" and wrong["code"] == "integer_below_min_value"
            unknown = _error(await client.call_tool("search_memories", {"query": "x", "user_id": "u", "k": 1}))
            assert unknown["code"] == "unknown_parameter"
            noscope = _error(await client.call_tool("list_memories", {}))
            assert noscope["code"] == "missing_required_parameter"
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("drop_database", {})

    run(go())


def test_authentication(mcp_url):
    for headers in ({}, {"Authorization": "Bearer sk-engram-nope"}):
        answer = httpx.post(mcp_url, headers={**headers, "Accept": "application/json, text/event-stream"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert answer.status_code == 401 and answer.json()["error"]["type"] == "invalid_request_error"

    async def go():
        async with connected(mcp_url, "sk-engram-nope"):
            pass

    with pytest.raises(Exception):  # noqa: B017 - the SDK's transport error for a 401
        run(go())


def test_get_is_refused_by_a_stateless_server(mcp_url, key_for):
    answer = httpx.get(mcp_url, headers={"Authorization": f"Bearer {key_for('mcp-a')}",
                                         "Accept": "text/event-stream"})
    assert answer.status_code == 405


def test_a_second_tenant_sees_nothing_of_the_first(mcp_url, key_for, api, knowledge):
    owned = api("mcp-a").post("/memories", json={"messages": "A's vault code is 90210", "user_id": "shared-name",
                                                 "infer": False}).json()["results"][0]["id"]

    async def go():
        async with connected(mcp_url, key_for("mcp-b")) as client:
            found = await client.call_tool("search_memories", {"query": "vault code", "user_id": "shared-name"})
            assert found.structured_content["results"] == []
            listed = await client.call_tool("list_memories", {"user_id": "shared-name"})
            assert listed.structured_content["data"] == []
            for name, args in (("get_memory", {"memory_id": owned}), ("memory_history", {"memory_id": owned}),
                               ("delete_memory", {"memory_id": owned}),
                               ("update_memory", {"memory_id": owned, "text": "hijacked"}),
                               ("fetch", {"id": f"{knowledge['store']}/{knowledge['pager.txt']}"}),
                               ("search", {"query": "pager", "vector_store_ids": [knowledge["store"]]})):
                assert _error(await client.call_tool(name, args))["code"] == "not_found", name
            assert (await client.call_tool("list_vector_stores", {})).structured_content["data"] == []
            assert (await client.call_tool("search", {"query": "pager"})).structured_content["results"] == []

    run(go())
    assert api("mcp-a").get(f"/memories/{owned}").json()["memory"] == "A's vault code is 90210"


def test_a_reader_bound_to_one_user(mcp_url, key_for, api, knowledge):
    """The issue's key: knowledge read-only and one user's memories read-only, through MCP."""
    owner = api("mcp-a")
    alice = owner.post("/memories", json={"messages": "Alice keeps bees", "user_id": "alice",
                                          "infer": False}).json()["results"][0]["id"]
    bob = owner.post("/memories", json={"messages": "Bob's locker code is 4711", "user_id": "bob",
                                        "infer": False}).json()["results"][0]["id"]
    key = key_for("mcp-a", {"files": "read", "vector_stores": "read", "memories": "read"}, user_id="alice")
    from mcp.shared.exceptions import MCPError

    async def go():
        async with connected(mcp_url, key) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == READ_TOOLS
            assert "user_id" not in tools["search_memories"].input_schema["properties"]
            assert "agent_id" in tools["search_memories"].input_schema["properties"]
            mine = await client.call_tool("search_memories", {"query": "bees"})
            assert [m["id"] for m in mine.structured_content["results"]] == [alice]
            refused = _error(await client.call_tool("search_memories", {"query": "locker", "user_id": "bob"}))
            assert refused["code"] == "memory_scope_not_permitted" and refused["type"] == "invalid_request_error"
            assert _error(await client.call_tool("get_memory", {"memory_id": bob}))["code"] == "not_found"
            for name, args in (("delete_memory", {"memory_id": alice}), ("add_memory", {"text": "x"})):
                with pytest.raises(MCPError, match="Unknown tool"):
                    await client.call_tool(name, args)
            assert (await client.call_tool("search", {"query": "pager"})).structured_content["results"]

    run(go())
    assert owner.get(f"/memories/{alice}").json()["status"] == "active"


def test_a_key_without_memories_sees_only_knowledge(mcp_url, key_for):
    async def go():
        async with connected(mcp_url, key_for("mcp-a", {"vector_stores": "read"})) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert run(go()) == KNOWLEDGE_TOOLS
