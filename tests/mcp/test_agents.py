"""The ``openai-agents`` SDK with ``MCPServerStreamableHttp`` pointed at Engram's ``/mcp``: an agent (its model:
Engram's Responses API over the scripted fake chat model) that remembers in one run and recalls in the next through
MCP tool calls, with a key bound to the user — as docs/mcp.md shows it."""

from __future__ import annotations

import json

from tests.fakes.chat_server import call, text, tool_calls
from tests.mcp.conftest import run


def test_an_agent_remembers_and_recalls_through_mcp(server, mcp_url, key_for, fake, api):
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.mcp import MCPServerStreamableHttp

    set_tracing_disabled(True)
    key = key_for("mcp-agents", {"responses": "write", "memories": "write"}, user_id="eve")
    fake.push(tool_calls(call("add_memory", {"text": "Eve lives in Porto"})), text("Noted."),
              tool_calls(call("search_memories", {"query": "where does Eve live?"})), text("You live in Porto."))

    async def go():
        engram = MCPServerStreamableHttp(params={"url": mcp_url, "headers": {"Authorization": f"Bearer {key}"}},
                                         client_session_timeout_seconds=30)
        client = openai.AsyncOpenAI(base_url=server.url, api_key=key, max_retries=0)
        async with engram:
            agent = Agent(name="assistant", instructions="Remember what the user tells you; recall before answering.",
                          mcp_servers=[engram], model=OpenAIResponsesModel(model="fake-model", openai_client=client))
            first = await Runner.run(agent, "Please remember that I live in Porto.")
            second = await Runner.run(agent, "Where do I live?")
        await client.close()
        return first, second

    first, second = run(go())
    assert first.final_output == "Noted." and second.final_output == "You live in Porto."
    offered = {tool["function"]["name"] for tool in fake.requests[0]["tools"]}
    assert {"add_memory", "search_memories", "delete_memory"} <= offered
    assert "list_vector_stores" not in offered  # the key has no vector_stores permission: not listed
    schema = next(t["function"]["parameters"] for t in fake.requests[0]["tools"]
                  if t["function"]["name"] == "add_memory")
    assert "user_id" not in schema["properties"]  # bound to Eve: not a parameter
    recalled = [m for m in fake.requests[3]["messages"] if m["role"] == "tool"]
    assert "Eve lives in Porto" in json.dumps(recalled)
    stored = api("mcp-agents").get("/memories", params={"user_id": "eve"}).json()["data"]
    assert [m["memory"] for m in stored] == ["Eve lives in Porto"]
