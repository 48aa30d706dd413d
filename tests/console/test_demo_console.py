"""``engram demo`` (what ``./dev demo`` runs) prints the console's address, and the console there — signed in
with the key the demo prints — shows the demo's store and Ada's memories. The demo runs as a subprocess with the
hashing embedder (the real model's run is tests/test_cli.py's), in a browser (tests/console/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from playwright.sync_api import expect

from engram_cli import demo_memory
from tests.console.conftest import new_context, watched_tab
from tests.processes import stop

REPO = Path(__file__).resolve().parents[2]
TENANT = "demo-console"
CONSOLE = re.compile(r"Engram console on (http://127\.0\.0\.1:\d+/console)")
KEY = re.compile(r"api_key=\"(sk-engram-[\w-]+)\"")
# Seconds the demo may take to ingest, search, remember and start serving (hashing embedder, a loaded machine).
START_S = 240


def test_the_demo_prints_the_consoles_address_where_its_stores_and_adas_memories_are(browser, settings, tmp_path):
    env = {**os.environ, "DATABASE_URL": settings.database_url, "ENGRAM_DATA_DIR": str(tmp_path),
           "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_TENANT": TENANT, "ENGRAM_AUTH_MODE": "keys",
           "ENGRAM_METRICS": "off", "COLUMNS": "200"}
    child = subprocess.Popen([sys.executable, "-m", "engram_cli.main", "demo", "--port", "0", "--aws-port", "0"],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(iter(child.stdout.readline, "")), daemon=True)
    reader.start()
    context = None
    try:
        deadline = time.monotonic() + START_S
        while not (CONSOLE.search("".join(printed)) and KEY.search("".join(printed))):
            assert child.poll() is None, "".join(printed)[-3000:]
            assert time.monotonic() < deadline, "".join(printed)[-3000:]
            time.sleep(0.5)
        output = "".join(printed)
        console_url, key = CONSOLE.search(output).group(1), KEY.search(output).group(1)
        context = new_context(browser)
        tab = watched_tab(context, console_url.removesuffix("/console"))
        page = tab.page
        page.get_by_label("API key").fill(key)
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text("Knowledge")
        expect(page.locator("#who")).to_contain_text(f"Tenant {TENANT} · operator key")  # the demo's user runs it
        demo = page.get_by_role("row").filter(has=page.get_by_role("link", name="demo", exact=True))
        expect(demo).to_contain_text("5 done / 0 in progress / 0 failed")
        page.get_by_role("link", name="Memory", exact=True).click()
        page.get_by_role("link", name=demo_memory.USER, exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(f"User {demo_memory.USER}")
        for memory in demo_memory.MEMORIES:
            expect(page.locator("ol.timeline")).to_contain_text(memory)
        tab.check()
    finally:
        if context is not None:
            context.close()
        stop(child)
