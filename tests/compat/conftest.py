"""The API served over real HTTP (Chalice's threaded local server running app.py) on the module's fresh database,
with the hashing embedder, and clients of the official ``openai`` SDK with strict response validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import openai
import pytest

from chalicelib import deps


@pytest.fixture(scope="module")
def api_settings(settings):
    """The module's settings as the server runs them (small inline threshold so tests can reach both paths)."""
    return dataclasses.replace(settings, inline_max_bytes=64 * 1024, poll_after_ms=50)


@pytest.fixture(scope="module")
def server(api_settings, hashing_embedder):
    """A running server (``.url`` is the ``/v1`` root) with one background worker."""
    from chalicelib.api.context import forget_keys
    from engram_cli import server as local_server

    running = local_server.start(api_settings, host="127.0.0.1", port=0, embedder=hashing_embedder,
                                 worker_threads=1)
    yield running
    running.stop()
    forget_keys()
    deps.set_embedder(None)
    deps.set_settings(None)


@pytest.fixture(scope="module")
def make_key(server, api_settings) -> Callable[[str], str]:
    """``make_key(tenant)`` → a new API key for ``tenant``."""
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect

    def make(tenant: str) -> str:
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, tenant)[1]

    return make


@pytest.fixture(scope="module")
def make_client(server, make_key) -> Callable[..., openai.OpenAI]:
    """``make_client(tenant)`` → an ``openai.OpenAI`` for that tenant (strict validation, no retries)."""

    def make(tenant: str = "acme", **kwargs) -> openai.OpenAI:
        return openai.OpenAI(base_url=server.url, api_key=make_key(tenant), _strict_response_validation=True,
                             max_retries=0, timeout=60, **kwargs)

    return make


@pytest.fixture(scope="module")
def client(make_client) -> openai.OpenAI:
    """A strict SDK client for tenant ``acme``."""
    return make_client("acme")
