"""The Responses API's ``mcp`` tool with the ``openai`` SDK in strict mode (and ``openai-agents``' ``HostedMCPTool``)
against a local MCP server built with the ``mcp`` SDK (tests/fakes/mcp_server.py), the model being the scripted fake
chat server: listing (reused along a chain), calls, ``allowed_tools``, ``require_approval`` with the approval round
trip, streaming events in OpenAI's order, secrets never stored or echoed, the outbound host policy, and servers that
fail, hang or answer too much — each an item error the model is told about, never a 5xx or a hang."""

from __future__ import annotations

import json
import time

import openai
import psycopg
import pytest

from chalicelib.responses import mcp_tool
from tests.fakes.chat_server import call, text, tool_calls
from tests.fakes.mcp_server import (
    EXPECTED_AUTHORIZATION,
    EXPECTED_TEAM,
    SilentServer,
    StatusServer,
    ToolServer,
)

TOKEN = EXPECTED_AUTHORIZATION.removeprefix("Bearer ")


@pytest.fixture(scope="module")
def tools_server():
    with ToolServer() as server_:
        yield server_


@pytest.fixture(autouse=True)
def _loopback(configure):
    """Loopback MCP servers allowed (as on the local stack), short timeouts."""
    configure(mcp_allowed_hosts="127.0.0.1", mcp_timeout_s=3.0)


def _tool(url: str, **extra) -> dict:
    return {"type": "mcp", "server_label": "tools", "server_url": url, **extra}


def _types(response) -> list[str]:
    return [item.type for item in response.output]


def _offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def test_listing_and_a_call(client, fake, tools_server):
    fake.push(tool_calls(call("add", {"a": 2, "b": 3})), text("It is 5."))
    response = client.responses.create(model="fake-model", input="What is 2 + 3?",
                                       tools=[_tool(tools_server.url, require_approval="never")])
    assert _types(response) == ["mcp_list_tools", "mcp_call", "message"] and response.status == "completed"
    listing, done, _ = response.output
    assert listing.server_label == "tools" and listing.error is None
    assert {t.name for t in listing.tools} == {"add", "note", "whoami", "explode", "slow", "big"}
    add = next(t for t in listing.tools if t.name == "add")
    assert add.input_schema["properties"]["a"]["type"] == "integer" and add.annotations["readOnlyHint"] is True
    assert done.name == "add" and json.loads(done.arguments) == {"a": 2, "b": 3}
    assert done.output == "5" and done.error is None and done.status == "completed"
    assert response.output_text == "It is 5."
    first, second = fake.requests
    assert {"add", "note", "whoami"} <= _offered(first)
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": done.id, "content": "5"}
    assert response.tools[0].type == "mcp" and response.tools[0].require_approval == "never"


def test_allowed_tools_by_name_and_read_only(client, fake, tools_server):
    fake.push(text("ok"), text("ok"))
    named = client.responses.create(model="fake-model", input="hi", tools=[
        _tool(tools_server.url, allowed_tools=["add", "note"], require_approval="never")])
    assert {t.name for t in named.output[0].tools} == {"add", "note"}
    assert _offered(fake.requests[0]) == {"add", "note"}
    read_only = client.responses.create(model="fake-model", input="hi", tools=[
        _tool(tools_server.url, allowed_tools={"read_only": True}, require_approval="never")])
    assert {t.name for t in read_only.output[0].tools} == {"add", "whoami"}
    assert _offered(fake.requests[1]) == {"add", "whoami"}


def test_the_listing_is_reused_along_a_chain(client, fake, tools_server):
    fake.push(text("first"), tool_calls(call("add", {"a": 1, "b": 1})), text("two"))
    tool = _tool(tools_server.url, require_approval="never")
    first = client.responses.create(model="fake-model", input="hi", tools=[tool])
    assert _types(first) == ["mcp_list_tools", "message"]
    second = client.responses.create(model="fake-model", input="1 + 1?", tools=[tool], previous_response_id=first.id)
    assert _types(second) == ["mcp_call", "message"] and second.output[0].output == "2"
    assert "add" in _offered(fake.requests[1])


def test_approval_round_trip_approved_and_declined(client, fake, tools_server):
    tool = _tool(tools_server.url)  # require_approval defaults to "always"
    fake.push(tool_calls(call("note", {"text": "buy milk"})))
    asked = client.responses.create(model="fake-model", input="Note: buy milk", tools=[tool])
    assert _types(asked) == ["mcp_list_tools", "mcp_approval_request"] and asked.status == "completed"
    request = asked.output[1]
    assert request.name == "note" and json.loads(request.arguments) == {"text": "buy milk"}
    assert len(fake.requests) == 1  # the response ended at the request: no second model call
    fake.push(text("Noted."))
    approved = client.responses.create(model="fake-model", previous_response_id=asked.id, tools=[tool], input=[
        {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])
    assert _types(approved) == ["mcp_call", "message"]
    assert approved.output[0].approval_request_id == request.id and approved.output[0].output == "noted: buy milk"
    assert fake.requests[-1]["messages"][-1]["content"] == "noted: buy milk"
    with pytest.raises(openai.BadRequestError) as again:  # an approval is answered once
        client.responses.create(model="fake-model", previous_response_id=approved.id, tools=[tool], input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}])
    assert again.value.body["param"] == "input[0].approval_request_id"

    fake.push(tool_calls(call("note", {"text": "sell milk"})), text("As you wish."))
    asked = client.responses.create(model="fake-model", input="Note: sell milk", tools=[tool])
    calls_before = tools_server.methods["tools/call"]
    declined = client.responses.create(model="fake-model", previous_response_id=asked.id, tools=[tool], input=[
        {"type": "mcp_approval_response", "approval_request_id": asked.output[-1].id, "approve": False,
         "reason": "not now"}])
    assert _types(declined) == ["mcp_call", "message"] and declined.output[0].status == "failed"
    assert declined.output[0].error.type == "mcp_tool_execution_error"
    assert "declined" in fake.requests[-1]["messages"][-1]["content"]
    assert tools_server.methods["tools/call"] == calls_before  # nothing ran


def test_approval_filters(client, fake, tools_server):
    tool = _tool(tools_server.url, require_approval={"never": {"tool_names": ["add"]}})
    fake.push(tool_calls(call("add", {"a": 1, "b": 2}), call("note", {"text": "x"})), text("unused"))
    response = client.responses.create(model="fake-model", input="go", tools=[tool])
    assert _types(response) == ["mcp_list_tools", "mcp_call", "mcp_approval_request"]
    assert response.output[1].output == "3"


def test_streaming_follows_openais_order(client, fake, tools_server):
    fake.push(tool_calls(call("add", {"a": 20, "b": 22})), text("42"))
    with client.responses.stream(model="fake-model", input="sum", tools=[
            _tool(tools_server.url, require_approval="never")]) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    mcp_kinds = [k for k in kinds if k.startswith(("response.mcp", "response.output_item"))]
    assert mcp_kinds[:8] == [
        "response.output_item.added", "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
        "response.output_item.done", "response.output_item.added", "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done", "response.mcp_call.in_progress"]
    assert mcp_kinds[8:10] == ["response.mcp_call.completed", "response.output_item.done"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert _types(final) == ["mcp_list_tools", "mcp_call", "message"] and final.output[1].output == "42"
    stored = client.responses.retrieve(final.id)
    assert stored.output[1].model_dump() == final.output[1].model_dump()


def test_secrets_reach_the_server_only(client, fake, tools_server, api_settings):
    tool = _tool(tools_server.url, require_approval="never", headers={"X-Team": EXPECTED_TEAM},
                 authorization=TOKEN)
    fake.push(tool_calls(call("whoami", {})), text("done"))
    response = client.responses.create(model="fake-model", input="who am I?", tools=[tool])
    assert response.output[1].output == "authorization ok=True, team ok=True"
    fake.push(tool_calls(call("whoami", {})), text("done"))
    with client.responses.stream(model="fake-model", input="who am I?", tools=[tool]) as stream:
        streamed = [e.model_dump_json(warnings=False) for e in stream]
    echoed = response.tools[0].model_dump()
    assert echoed["headers"] is None and "authorization" not in {k for k, v in echoed.items() if v is not None}
    shown = [response.model_dump_json(), client.responses.retrieve(response.id).model_dump_json(), *streamed,
             json.dumps(client.responses.input_items.list(response.id).model_dump())]
    with psycopg.connect(api_settings.database_url) as conn:
        shown += [str(row) for row in conn.execute("SELECT * FROM responses").fetchall()]
    for secret in (TOKEN, EXPECTED_TEAM):
        assert not any(secret in blob for blob in shown), secret


def test_failing_tools_are_item_errors_the_model_sees(client, fake, tools_server, configure):
    # A timeout that a loaded machine's calls stay well within (each call is a fresh session), and a tool far past it.
    configure(mcp_allowed_hosts="127.0.0.1", mcp_timeout_s=6.0, mcp_max_response_bytes=20_000)
    fake.push(tool_calls(call("explode", {}), call("slow", {"seconds": 20}), call("big", {"size": 50_000}),
                         call("add", "not json")), text("Sorry."))
    started = time.monotonic()
    response = client.responses.create(model="fake-model", input="try everything", tools=[
        _tool(tools_server.url, require_approval="never")])
    assert time.monotonic() - started < 40
    assert response.status == "completed" and response.output_text == "Sorry."
    explode, slow, big, garbled = response.output[1:5]
    assert explode.error.type == "mcp_tool_execution_error" and "explode" in json.dumps(explode.error.content)
    assert slow.error.type == "http_error" and slow.error.code == 504
    assert big.error.type == "http_error" and "bytes" in big.error.message
    assert garbled.error.type == "mcp_protocol_error"
    assert all(item.status == "failed" for item in (explode, slow, big, garbled))
    answers = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(answers) == 4 and all(a.startswith("The MCP tool call failed") for a in answers)


@pytest.mark.parametrize("kind", ["failing", "hanging", "refused"])
def test_unusable_servers_are_listing_errors(client, fake, configure, kind):
    configure(mcp_allowed_hosts="127.0.0.1", mcp_timeout_s=1.5)
    server = {"failing": StatusServer(500), "hanging": SilentServer(), "refused": StatusServer(500)}[kind]
    with server:
        url = server.url if kind != "refused" else "http://127.0.0.1:9/mcp"
        fake.push(text("I could not reach it."))
        started = time.monotonic()
        response = client.responses.create(model="fake-model", input="hi", tools=[_tool(url)])
        assert time.monotonic() - started < 10
    assert response.status == "completed" and _types(response) == ["mcp_list_tools", "message"]
    assert response.output[0].error and response.output[0].tools == []
    assert "could not be reached" in fake.requests[-1]["messages"][0]["content"]


def test_private_addresses_need_the_setting(client, fake, tools_server, configure):
    configure(mcp_allowed_hosts=None)
    fake.push(text("no tools"))
    response = client.responses.create(model="fake-model", input="hi", tools=[_tool(tools_server.url)])
    assert "ENGRAM_MCP_ALLOWED_HOSTS" in response.output[0].error


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "169.254.169.254", "192.168.0.1", "::1", "fe80::1",
                                     "224.0.0.1", "100.64.0.1"])
def test_non_public_addresses_are_refused(address):
    with pytest.raises(mcp_tool.McpFailure, match="ENGRAM_MCP_ALLOWED_HOSTS"):
        mcp_tool.check_address("example.test", [address], None)
    mcp_tool.check_address("example.test", [address], "*")


def test_allowed_hosts_by_name_and_range():
    mcp_tool.check_address("example.com", ["93.184.215.14"], None)  # public: allowed
    mcp_tool.check_address("tools.internal", ["10.1.2.3"], "tools.internal")
    mcp_tool.check_address("x", ["10.1.2.3"], "10.0.0.0/8,localhost")
    with pytest.raises(mcp_tool.McpFailure):
        mcp_tool.check_address("x", ["10.1.2.3", "8.8.8.8"], "192.168.0.0/16")


@pytest.mark.parametrize("tool, param", [
    ({"type": "mcp", "server_label": "x", "connector_id": "connector_gmail"}, "tools[0].connector_id"),
    ({"type": "mcp", "server_label": "x"}, "tools[0].server_url"),
    ({"type": "mcp", "server_label": "x", "server_url": "ftp://host/mcp"}, "tools[0].server_url"),
    ({"type": "mcp", "server_label": "bad label", "server_url": "http://h/mcp"}, "tools[0].server_label"),
    ({"type": "mcp", "server_label": "x", "server_url": "http://h/mcp", "require_approval": "sometimes"},
     "tools[0].require_approval"),
])
def test_malformed_mcp_tools_are_400s(client, fake, tool, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="fake-model", input="hi", tools=[tool])
    assert refused.value.body["param"] == param
    assert fake.requests == []


def test_agents_hosted_mcp_tool_with_approvals(server, make_key, fake, tools_server):
    """openai-agents' HostedMCPTool: the SDK sends the tool, gets the approval request, approves it through its
    callback and continues the response with the approval."""
    import asyncio

    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    approvals = []

    def approve(request):
        approvals.append(request.data.name)
        return {"approve": True}

    fake.push(tool_calls(call("note", {"text": "from the agent"})), text("Saved your note."))

    async def go():
        client = openai.AsyncOpenAI(base_url=server.url, api_key=make_key("mcp-agents"), max_retries=0)
        agent = Agent(name="assistant", model=OpenAIResponsesModel(model="fake-model", openai_client=client),
                      tools=[HostedMCPTool(tool_config={"type": "mcp", "server_label": "tools",
                                                        "server_url": tools_server.url, "require_approval": "always"},
                                           on_approval_request=approve)])
        result = await Runner.run(agent, "Note this down")
        await client.close()
        return result

    result = asyncio.run(go())
    assert approvals == ["note"] and result.final_output == "Saved your note."
    kinds = [item.type for r in result.raw_responses for item in r.output]
    assert kinds == ["mcp_list_tools", "mcp_approval_request", "mcp_call", "message"]
