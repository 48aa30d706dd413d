"""Tenant walls around memories: tenant B can neither see, search, change nor purge tenant A's memories (routes
and row-level security), and a purge leaves no trace of a scope's text in any table."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from chalicelib.store.db import connect
from tests.conftest import BOTH_BACKENDS
from tests.memory.conftest import facts

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

@pytest.fixture(scope="module")
def owned(api) -> dict:
    """Tenant A's memory (user "shared-name", a user id tenant B uses too)."""
    client = api("tenant-a")
    response = client.post("/memories", json={"messages": "Tenant A's vault code is 90210", "user_id": "shared-name",
                                              "infer": False})
    assert response.status_code == 200, response.text
    return response.json()["results"][0]


def test_tenant_b_cannot_see_search_change_or_purge_tenant_a(api, owned):
    other = api("tenant-b")
    memory_id = owned["id"]
    assert other.get(f"/memories/{memory_id}").status_code == 404
    assert other.get(f"/memories/{memory_id}/history").status_code == 404
    assert other.post(f"/memories/{memory_id}", json={"memory": "hijacked"}).status_code == 404
    assert other.delete(f"/memories/{memory_id}").status_code == 404
    found = other.post("/memories/search", json={"query": "vault code", "user_id": "shared-name"}).json()["data"]
    assert found == []
    assert other.get("/memories", params={"user_id": "shared-name"}).json()["data"] == []
    purged = other.delete("/memories", params={"user_id": "shared-name"}).json()
    assert purged["counts"]["memories"] == 0
    mine = api("tenant-a").get(f"/memories/{memory_id}").json()
    assert mine["memory"] == "Tenant A's vault code is 90210" and mine["status"] == "active"


def test_row_level_security_hides_other_tenants_memories_whatever_the_query(api_settings, owned):
    from chalicelib.store.db import tenant_connection

    with tenant_connection(api_settings, "tenant-b") as conn:
        for table in ("memories", "memory_history", "memory_jobs", "idempotency_keys"):
            (count,) = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
            assert count == 0, table
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO memories (id, tenant_id, user_id, memory, hash, embedding_model, "
                         "embedding_dim, embedding, keywords, keyword_length) VALUES ('mem_x', 'tenant-a', 'u', "
                         "'x', 'h', 'm', 1, '[1]', ''::tsvector, 0)")


def _text_anywhere(settings, needle: str) -> list[str]:
    """Every table (of every schema we own) whose rows, as text, contain ``needle``: the database dumped and
    searched."""
    hits = []
    with connect(settings) as conn:
        tables = conn.execute("SELECT schemaname, tablename FROM pg_tables "
                              "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").fetchall()
        for schema, table in tables:
            statement = sql.SQL("SELECT count(*) FROM {}.{} AS t WHERE strpos(t::text, %s) > 0").format(
                sql.Identifier(schema), sql.Identifier(table))
            (count,) = conn.execute(statement, (needle,)).fetchone()
            if count:
                hits.append(table)
    return hits


def test_purge_leaves_no_trace_of_the_text_in_any_table(api, api_settings, fake):
    client = api("purge")
    secret, updated_secret = "zanzibarquokka", "quokkazanzibar"
    fake.push(facts(f"Has a pet named {secret}"))
    headers = {"Idempotency-Key": "purge-key"}
    created = client.post("/memories", json={"messages": f"My pet is {secret}", "user_id": "leaver"},
                          headers=headers)
    assert created.status_code == 200, created.text
    memory_id = created.json()["results"][0]["id"]
    job = client.post("/memories", json={"messages": f"I adore {secret}", "user_id": "leaver", "infer": False,
                                         "async": True})
    assert job.status_code == 202, job.text
    client.post(f"/memories/{memory_id}", json={"memory": f"Has a pet named {updated_secret}"})
    client.post("/memories", json={"messages": "Green tea and biscuits", "user_id": "stayer", "infer": False})
    assert set(_text_anywhere(api_settings, secret)) >= {"memories", "memory_history", "memory_jobs",
                                                         "idempotency_keys"}
    response = client.delete("/memories", params={"user_id": "leaver"})
    assert response.status_code == 200
    counts = response.json()["counts"]
    assert counts["memories"] >= 3 and counts["history"] >= 3 and counts["jobs"] == 1
    assert counts["idempotency_records"] == 1 and "cached_embeddings" in counts
    assert _text_anywhere(api_settings, secret) == []
    assert _text_anywhere(api_settings, updated_secret) == []
    assert client.get("/memories", params={"user_id": "leaver", "include_inactive": "true"}).json()["data"] == []
    assert [m["user_id"] for m in client.get("/memories", params={"user_id": "stayer"}).json()["data"]] == ["stayer"]
