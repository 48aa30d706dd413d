"""Memories over real HTTP: Engram's server (tests/compat fixtures) on the module's database with the hashing
embedder, the scripted fake chat model as the memory model, and plain ``httpx`` clients per tenant."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from chalicelib import deps
from tests.compat.conftest import make_key, server  # noqa: F401 (fixtures)
from tests.fakes.chat_server import FakeChatServer, text

MEMORY_MODEL = "fake-memory-model"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatServer]:
    """The scripted chat model server."""
    with FakeChatServer() as server_:
        yield server_


@pytest.fixture(scope="module")
def api_settings(settings, fake):
    """The server's settings: the fake as the memory model (no retries, short timeout), adds inline."""
    return dataclasses.replace(settings, poll_after_ms=50, chat_base_url=fake.base_url, chat_api_key="sk-test",
                               chat_timeout_s=2.0, chat_max_retries=0, memory_model=MEMORY_MODEL)


@pytest.fixture(autouse=True)
def _fresh(fake):
    fake.clear()
    yield
    fake.clear()


@pytest.fixture()
def configure(server, api_settings):  # noqa: F811 (the compat server fixture, imported above)
    """``configure(**changes)``: run the server with changed settings for this test (restored afterwards)."""

    def apply(**changes) -> None:
        deps.set_settings(dataclasses.replace(api_settings, **changes))

    yield apply
    deps.set_settings(api_settings)


@pytest.fixture(scope="module")
def api(server, make_key) -> Callable[..., httpx.Client]:  # noqa: F811
    """``api(tenant)`` → an ``httpx.Client`` on the ``/v1`` root with that tenant's key."""
    clients: list[httpx.Client] = []

    def make(tenant: str = "acme") -> httpx.Client:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {make_key(tenant)}"},
                              timeout=60)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def facts(*items: str | dict) -> object:
    """An extraction answer with these facts (strings or full entries)."""
    return text(json.dumps({"facts": [i if isinstance(i, dict) else {"fact": i, "confidence": 0.9}
                                      for i in items]}))


def decisions(*items: dict) -> object:
    """A decision answer."""
    return text(json.dumps({"decisions": list(items)}))
