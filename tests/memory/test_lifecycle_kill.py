"""A lifecycle job killed mid-run (SIGKILL of the process running it) resumes from its saved cursor and ends in
the same state as an uninterrupted run: consolidation with the scripted fake memory model answering slowly, run
by ``engram jobs run`` in a subprocess on real Postgres."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from chalicelib import ids
from chalicelib.jobs import runner
from chalicelib.memory import store
from chalicelib.memory.model import MemoryScope, text_hash
from chalicelib.store import vector_stores
from tests.fakes.chat_server import FakeChatServer, text

USERS = 8


@pytest.fixture(scope="module")
def fake():
    def merge(body: dict):
        listing = body["messages"][-1]["content"].splitlines()
        return text(json.dumps({"memory": "merged: " + " + ".join(sorted(line[2:] for line in listing))}),
                    delay_s=0.4)

    with FakeChatServer(responder=merge) as server_:
        yield server_


def _dataset(conn, embedder, tenant: str) -> None:
    vector_stores.ensure_tenant(conn, tenant)
    for u in range(USERS):
        for memory in (f"User {u} lives in Lisbon near the river", f"User {u} lives in Lisbon near the river Tagus"):
            new = store.NewMemory(scope=MemoryScope(user_id=f"user-{u}"), memory=memory, hash=text_hash(memory),
                                  memory_type="fact", categories=[], confidence=0.8, importance=0.5, metadata={},
                                  source_kind="api", source_id=None, valid_from=None, pinned=False, expires_at=None,
                                  model=embedder.model, embedding=embedder.embed([memory])[0], index_text=memory)
            store.insert(conn, tenant, ids.new_id(ids.MEMORY), new)


def _state(conn, tenant: str) -> list[tuple]:
    return conn.execute("SELECT user_id, memory, consolidated_into IS NULL FROM memories WHERE tenant_id = %s "
                        "ORDER BY 1, 2", (tenant,)).fetchall()


def test_a_killed_consolidation_resumes_and_ends_as_an_uninterrupted_one(settings, conn, hashing_embedder, fake):
    import dataclasses

    model_settings = dataclasses.replace(settings, memory_model="fake-memory", chat_base_url=fake.base_url,
                                         chat_api_key="sk-test", chat_max_retries=0)
    _dataset(conn, hashing_embedder, "kill-whole")
    _dataset(conn, hashing_embedder, "kill-cut")
    whole = runner.run_job(model_settings, "consolidation", tenant="kill-whole", force=True)
    assert whole.status == "finished" and whole.counts["groups"] == USERS

    env = {**os.environ, "DATABASE_URL": settings.database_url, "ENGRAM_EMBEDDING_PROVIDER": "hashing",
           "ENGRAM_EMBEDDING_MODEL": "hashing-384", "ENGRAM_MEMORY_MODEL": "fake-memory",
           "ENGRAM_CHAT_BASE_URL": fake.base_url, "ENGRAM_CHAT_API_KEY": "sk-test", "ENGRAM_METRICS": "off"}
    child = subprocess.Popen([sys.executable, "-m", "engram_cli.main", "jobs", "run", "consolidation", "--tenant",
                              "kill-cut"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    merged = 0
    while time.monotonic() < deadline and merged < 2:
        merged = conn.execute("SELECT count(*) FROM memories WHERE tenant_id = 'kill-cut' AND consolidated_into "
                              "IS NOT NULL").fetchone()[0] // 2
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    assert 2 <= merged < USERS, merged  # killed part-way
    (cursor,) = conn.execute("SELECT cursor FROM job_state WHERE job = 'consolidation' AND scope = 'kill-cut'"
                             ).fetchone()
    assert cursor and cursor["after"]["tenant"] == "kill-cut"
    # the dead run's lease runs out (a budget plus a grace period later); skip the wait
    conn.execute("UPDATE job_state SET leased_until = now() - interval '1 second' WHERE scope = 'kill-cut'")
    resumed = runner.run_job(model_settings, "consolidation", tenant="kill-cut", force=True)
    assert resumed.status == "finished"
    runs = conn.execute("SELECT status FROM job_runs WHERE scope = 'kill-cut' ORDER BY id").fetchall()
    assert [r[0] for r in runs] == ["abandoned", "finished"]
    assert _state(conn, "kill-cut") == _state(conn, "kill-whole")
    assert conn.execute("SELECT count(*) FROM memory_audit WHERE tenant_id = 'kill-cut' AND event = "
                        "'consolidation'").fetchone()[0] == USERS
