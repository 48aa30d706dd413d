"""Engram's MCP server over real HTTP (``/mcp`` on the in-process server of tests/compat, with the scripted fake chat
model as the memory model, as in tests/memory) and over stdio (``engram mcp`` as a subprocess), driven by the
official ``mcp`` SDK's client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from chalicelib.access import Access
from chalicelib.store import api_keys
from chalicelib.store.db import connect
from tests.memory.conftest import api, api_settings, configure, fake, make_key, server  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def key_for(server, api_settings) -> Callable[..., str]:  # noqa: F811
    """``key_for(tenant, permissions=None, **scope)`` → a key (full access without ``permissions``)."""

    def make(tenant: str, permissions: dict[str, str] | None = None, **scope: str) -> str:
        grants = Access(permissions, scope) if permissions is not None else Access(memory_scope=scope)
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, tenant, grants=grants)[1]

    return make


@pytest.fixture(scope="module")
def mcp_url(server) -> str:  # noqa: F811
    return server.url.removesuffix("/v1") + "/mcp"


@contextlib.asynccontextmanager
async def connected(url: str, key: str | None, mode: str = "auto") -> AsyncIterator[Any]:
    """An ``mcp.Client`` on ``url`` with ``Authorization: Bearer <key>`` (none when ``key`` is None)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def run(coroutine: Any) -> Any:
    """Run a coroutine to completion (each test drives the async client from sync code)."""
    return asyncio.run(coroutine)
