"""The console in a real browser: Debian's Chromium (``/usr/bin/chromium``; ``./dev test`` installs it), headless,
driven by Playwright through ``executable_path`` (Playwright's own browser download is never used), against the
in-process server of ``tests/compat`` with the hashing embedder and the scripted fake chat model. One browser per
module; each test opens its own context (a fresh tab session: the key is typed again).

Every page is watched: a JavaScript error, a console error, or any request leaving the server's origin fails the
test (the console fetches nothing from elsewhere). Screenshots go to ``$ENGRAM_CONSOLE_SCREENSHOTS`` when set, else
to a temporary folder (its path is printed)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import make_key, server  # noqa: F401 (fixtures)
from tests.fakes.chat_server import FakeChatServer

CHROMIUM = os.environ.get("ENGRAM_CHROMIUM", "/usr/bin/chromium")
# What works on a headless CI machine with no GPU and no sandbox (containers); nothing phones home.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
# Seconds a page may take to show what a test waits for (a loaded 2-core machine).
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeChatServer]:
    """The scripted chat model server."""
    with FakeChatServer() as server_:
        yield server_


@pytest.fixture(scope="module")
def api_settings(settings, fake):
    """The server's settings: the fake as the chat backend (no retries)."""
    return dataclasses.replace(settings, inline_max_bytes=64 * 1024, poll_after_ms=50, chat_base_url=fake.base_url,
                               chat_api_key="sk-test", chat_timeout_s=10.0, chat_max_retries=0)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots are written (``$ENGRAM_CONSOLE_SCREENSHOTS`` or a temporary folder)."""
    chosen = os.environ.get("ENGRAM_CONSOLE_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("console-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's package) under Playwright, for the module."""
    from playwright.sync_api import sync_playwright

    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"No Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium; ./dev test does) "
                    "or set ENGRAM_CHROMIUM")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield launched
        launched.close()


@dataclasses.dataclass
class Tab:
    """One browser tab on the console, watched: ``problems`` collects JavaScript errors, console errors and any
    request to another origin."""

    page: Any
    problems: list[str]

    def check(self) -> None:
        """Fail on anything the tab saw go wrong."""
        assert self.problems == [], self.problems


def watched_tab(context: Any, root: str) -> Tab:
    """A new page of ``context`` at ``root``'s console, watched (:class:`Tab`): requests outside ``root`` are
    refused and recorded, as are JavaScript and console errors (a 4xx the page asked for and shows is no error)."""
    page = context.new_page()
    tab = Tab(page, [])

    def outside(route: Any) -> None:
        if route.request.url.startswith(root + "/"):
            route.continue_()
        else:
            tab.problems.append(f"request outside the origin: {route.request.url}")
            route.abort()

    page.route("**/*", outside)
    page.on("pageerror", lambda error: tab.problems.append(f"page error: {error}"))
    page.on("console", lambda message: tab.problems.append(f"console {message.type}: {message.text}")
            if message.type == "error" and "status of 4" not in message.text else None)
    page.goto(root + "/console")
    return tab


def new_context(browser: Any, width: int = 1280, height: int = 860) -> Any:
    """A fresh browser context (its own sessionStorage) of that viewport, with the tests' timeout."""
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
    context.set_default_timeout(TIMEOUT_MS)
    return context


@pytest.fixture()
def open_tab(browser, server) -> Iterator[Callable[..., Tab]]:  # noqa: F811 (the compat server fixture)
    """``open_tab(width=1280, height=860)`` → a :class:`Tab` on a fresh context at ``/console``; checked and closed
    after the test."""
    root = server.url.removesuffix("/v1")
    tabs: list[Tab] = []
    contexts = []

    def open_(width: int = 1280, height: int = 860) -> Tab:
        contexts.append(new_context(browser, width, height))
        tabs.append(watched_tab(contexts[-1], root))
        return tabs[-1]

    yield open_
    for context in contexts:
        context.close()
    for tab in tabs:
        tab.check()
