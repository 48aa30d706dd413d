"""The Responses API over real HTTP: Engram's server (tests/compat fixtures) talking to a scripted fake chat
model (tests/fakes/chat_server.py, a real HTTP server), driven by the official ``openai`` SDK with strict
validation. The fake's queue and recorded requests are cleared before every test."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from chalicelib import deps
from tests.compat.conftest import client, make_client, make_key, server  # noqa: F401 (fixtures)
from tests.fakes.chat_server import FakeChatServer

# The backend's timeout in these tests, seconds (timeout tests script a slower reply).
CHAT_TIMEOUT_S = 1.5


@pytest.fixture(scope="module")
def fake():
    """The scripted chat model server."""
    with FakeChatServer() as server_:
        yield server_


@pytest.fixture(scope="module")
def api_settings(settings, fake):
    """The server's settings: the fake as the chat backend (no retries, short timeout), summaries off unless a
    test lowers the threshold."""
    return dataclasses.replace(settings, inline_max_bytes=64 * 1024, poll_after_ms=50, chat_base_url=fake.base_url,
                               chat_api_key="sk-test", chat_timeout_s=CHAT_TIMEOUT_S, chat_max_retries=0,
                               summary_threshold_tokens=1_000_000, summary_keep_turns=1)


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
def front(server):  # noqa: F811 (the compat server fixture, imported above)
    """The standalone streaming front (WSGI, threaded wsgiref) on a free port, sharing the server's settings;
    yields its ``/v1`` root."""
    from chalicelib.api import streaming_front

    wsgi = streaming_front.build_server("127.0.0.1", 0)
    thread = threading.Thread(target=wsgi.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{wsgi.server_port}/v1"
    wsgi.shutdown()
    wsgi.server_close()
    thread.join(5)
