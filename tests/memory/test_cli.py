"""``engram memory`` end to end on real Postgres with the hashing embedder and no model configured: add (text and
a document), search, list, get, history, delete, stats, purge."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from engram_cli.main import app


@pytest.fixture()
def cli(settings, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", settings.database_url)
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("ENGRAM_TENANT", "cli-memory")
    for name in ("ENGRAM_MEMORY_MODEL", "ENGRAM_CHAT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    config.settings.cache_clear()
    deps.reset()
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout

    yield run
    config.settings.cache_clear()
    deps.reset()


def test_memory_commands_end_to_end(cli, tmp_path):
    added = json.loads(cli("memory", "add", "Prefers window seats", "Allergic to peanuts", "--user", "dana",
                           "--json"))
    assert [r["event"] for r in added["results"]] == ["ADD", "ADD"] and added["usage"]["model_calls"] == 0
    again = json.loads(cli("memory", "add", "prefers window seats.", "--user", "dana", "--json"))
    assert [r["event"] for r in again["results"]] == ["NOOP"]

    note = tmp_path / "handbook.md"
    note.write_text("# Travel policy\n\n" + "Book economy for flights under six hours. " * 60
                    + "\n\n## Hotels\n\n" + "Hotels must be within walking distance of the office. " * 40)
    doc = json.loads(cli("memory", "add", "--file", str(note), "--user", "dana", "--json"))
    chunks = [r for r in doc["results"] if r["event"] == "ADD"]
    assert len(chunks) >= 2 and {r["memory_type"] for r in chunks} == {"knowledge"}
    first = json.loads(cli("memory", "get", chunks[0]["id"], "--json"))
    assert first["metadata"] == {"source_file": "handbook.md", "chunk_index": 0, "total_chunks": len(chunks),
                                 "role": "user"}

    hits = json.loads(cli("memory", "search", "peanut allergy", "--user", "dana", "-k", "3", "--json"))
    assert hits[0]["memory"] == "Allergic to peanuts" and "score_details" in hits[0]
    listed = json.loads(cli("memory", "list", "--user", "dana", "--type", "fact", "--json"))
    assert sorted(m["memory"] for m in listed) == ["Allergic to peanuts", "Prefers window seats"]
    assert "peanuts" in cli("memory", "list", "--user", "dana")

    target = next(m["id"] for m in listed if m["memory"] == "Prefers window seats")
    assert "deleted" in cli("memory", "delete", target)
    history = json.loads(cli("memory", "history", target, "--json"))
    assert [e["event"] for e in history] == ["ADD", "DELETE"] and history[0]["new_memory"] is None
    cli("memory", "delete", target, code=2)

    stats = json.loads(cli("memory", "stats", "--user", "dana", "--json"))
    assert stats["active"] == 1 + len(chunks) and stats["active_by_type"]["knowledge"] == len(chunks)
    purged = json.loads(cli("memory", "purge", "--user", "dana", "--yes", "--json"))
    assert purged["counts"]["memories"] == 1 + len(chunks)
    assert json.loads(cli("memory", "list", "--user", "dana", "--all", "--json")) == []


def test_memory_commands_refuse_a_missing_scope_and_bad_input(cli):
    cli("memory", "add", "x", code=2)
    cli("memory", "search", "x", code=2)
    cli("memory", "add", "x", "--user", "u", "--type", "gossip", code=2)
    cli("memory", "search", "x", "--user", "u", "--as-of", "yesterday", code=2)
    cli("memory", "add", "x", "--user", "u", "--infer", code=2)  # no model configured: the error names the setting


def test_agents_commands_and_headless_aliases(cli, tmp_path):
    created = json.loads(cli("agents", "create", "--name", "Support", "--model", "m1", "--memory", "--no-remember",
                             "--json"))
    assert created["id"].startswith("agent_") and created["memory"] == {"recall": True, "remember": False}
    assert [a["id"] for a in json.loads(cli("agents", "list", "--json"))] == [created["id"]]
    assert json.loads(cli("agents", "show", created["id"]))["name"] == "Support"
    cli("agents", "create", "--name", "Bad", "--store", "not-a-store", code=2)
    assert "deleted" in cli("agents", "delete", created["id"])
    cli("agents", "show", created["id"], code=2)

    doc = tmp_path / "note.txt"
    doc.write_text("The lighthouse keeper logs the tides every evening.")
    assert "completed" in cli("--add-to-vector-store", str(doc))
    assert "lighthouse" in cli("--query-vector-store", "tides")
    assert "default" in cli("--vector-store-stats")


def test_exchange_commands(cli):
    import time

    from chalicelib import memory
    from chalicelib.store.vector_stores import ensure_tenant

    ctx = memory.context(config.settings(), "cli-memory")
    with deps.connect() as conn:
        ensure_tenant(conn, "cli-memory")
        job = memory.remember(conn, ctx, memory.MemoryScope(user_id="kit"), response_id="resp_cli", thread_id="t1",
                              session_id=None, prompt="Where do I park?", answer="Level 2, bay 14.", prior_ids=[])
        assert job is not None
        deadline = time.monotonic() + 30
        while memory.job(conn, ctx, job.id).status != "completed" and time.monotonic() < deadline:
            time.sleep(0.05)
    [exchange] = json.loads(cli("memory", "exchanges", "list", "--user", "kit", "--json"))
    assert (exchange["user_prompt"], exchange["assistant_response"], exchange["thread_id"]) == \
        ("Where do I park?", "Level 2, bay 14.", "t1")
    assert json.loads(cli("memory", "exchanges", "list", "--user", "someone-else", "--json")) == []
    assert json.loads(cli("memory", "exchanges", "get", exchange["id"], "--json")) == exchange
    assert json.loads(cli("memory", "stats", "--user", "kit", "--json"))["exchanges"] == 1
    assert "deleted" in cli("memory", "exchanges", "delete", exchange["id"])
    cli("memory", "exchanges", "delete", exchange["id"], code=2)
    assert json.loads(cli("memory", "stats", "--user", "kit", "--json"))["exchanges"] == 0


def test_memory_reindex_moves_the_tenants_histories_and_refuses_an_unknown_backend(cli, settings, monkeypatch):
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))  # (the embedded Qdrant of the module)
    config.settings.cache_clear()
    deps.reset()
    cli("memory", "add", "Owns a red bicycle", "Rides to work on Mondays", "--user", "erin", "--json")
    moved = json.loads(cli("memory", "reindex", "--backend", "qdrant", "--json"))
    assert moved == {"tenant": "cli-memory", "backend": "qdrant", "partitions": 1, "rows": 2, "resumed": False}
    hits = json.loads(cli("memory", "search", "bicycle", "--user", "erin", "--json"))
    assert hits[0]["memory"] == "Owns a red bicycle"
    back = json.loads(cli("memory", "reindex", "--backend", "pgvector", "--json"))
    assert back["backend"] == "pgvector" and back["partitions"] == 1
    assert json.loads(cli("memory", "search", "bicycle", "--user", "erin", "--json"))[0]["id"] == hits[0]["id"]
    cli("memory", "reindex", "--backend", "nope", code=2)  # (exit 2, the message on stderr)
