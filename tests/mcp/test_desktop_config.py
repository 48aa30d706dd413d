"""The client configurations of docs/mcp.md, run as written (only the placeholders filled in): Claude Desktop's
(``engram mcp`` over stdio, a subprocess) and Cursor's (``/mcp`` over HTTP), through the ``mcp`` SDK's client,
against a server holding what ``./dev demo`` adds (:func:`engram_cli.demo_memory.run`): each lists Engram's tools
and recalls a memory of the demo's user with a key bound to that user."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from chalicelib.access import Access
from chalicelib.store import api_keys
from chalicelib.store.db import connect
from engram_cli import demo_memory
from tests.mcp.conftest import connected, run

DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
TENANT = "local"
DESKTOP_KEY = Access({"vector_stores": "read", "memories": "write"}, {"user_id": demo_memory.USER})


@pytest.fixture(scope="module")
def api_settings(settings):
    """The demo's settings: no memory model (the demo's conversation uses the scripted local model)."""
    return dataclasses.replace(settings, poll_after_ms=50, tenant=TENANT)


def _config(name: str) -> dict:
    """The JSON block under ``<!-- mcp-config: name -->`` in docs/mcp.md."""
    text = DOCS.read_text()
    match = re.search(rf"<!-- mcp-config: {name} -->\n```json\n(.*?)```", text, re.S)
    assert match, name
    return json.loads(match.group(1))["mcpServers"]["engram"]


@pytest.fixture(scope="module")
def demo(server, api_settings) -> str:
    """The demo's memories added (as ``./dev demo`` does), and the desktop key the docs make: its secret."""
    demo_memory.run(api_settings, TENANT, Console(file=io.StringIO()))
    with connect(api_settings) as conn:
        return api_keys.create_key(conn, TENANT, "desktop", grants=DESKTOP_KEY)[1]


async def _recall(client) -> list[str]:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert {"search_memories", "add_memory", "search", "fetch"} <= tools and "delete_vector_store" not in tools
    found = await client.call_tool("search_memories", {"query": "where does ada live?"})
    assert not found.is_error, found
    return [m["memory"] for m in found.structured_content["results"]]


def test_the_claude_desktop_configuration(demo, api_settings, tmp_path):
    from mcp import Client, StdioServerParameters

    config = _config("claude-desktop")
    assert config["args"] == ["mcp"] and set(config["env"]) == {"ENGRAM_DATA_DIR", "ENGRAM_API_KEY"}
    command = config["command"].replace("/path/to/engram/.venv/bin", str(Path(sys.executable).parent))
    env = {**config["env"], "ENGRAM_DATA_DIR": str(api_settings.data_dir), "ENGRAM_API_KEY": demo,
           # The test's database and embedder (the demo's are the data folder's embedded Postgres and local model).
           "DATABASE_URL": api_settings.database_url, "ENGRAM_EMBEDDING_PROVIDER": "hashing",
           "ENGRAM_EMBEDDING_MODEL": api_settings.embedding_model, "ENGRAM_METRICS": "off"}

    async def go():
        async with Client(StdioServerParameters(command=command, args=config["args"], env=env)) as client:
            return await _recall(client)

    recalled = run(go())
    assert "I'm Ada. I moved to Lisbon last year." in recalled


def test_the_cursor_configuration(demo, server):
    config = _config("cursor")
    url = config["url"].replace("http://127.0.0.1:8000", server.url.removesuffix("/v1"))
    key = config["headers"]["Authorization"].replace("sk-engram-...", demo).removeprefix("Bearer ")

    async def go():
        async with connected(url, key) as client:
            return await _recall(client)

    assert "I'm Ada. I moved to Lisbon last year." in run(go())
