"""The memory lifecycle jobs on real Postgres (hashing embedder; the scripted fake chat model where a model merges
or summarises): archive and restore, quotas, working-memory TTL and expiry, consolidation (with and without a
model, resumed after a cut), episodes and instances, persona — each idempotent, audited without text, and scoped to
the run's tenant."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from chalicelib import deps, ids
from chalicelib.errors import NotFoundError
from chalicelib.jobs import runner
from chalicelib.memory import episodes, exchanges, recall, store, write
from chalicelib.memory.model import MemoryScope, text_hash
from chalicelib.store import tenants, vector_stores
from tests.conftest import BOTH_BACKENDS
from tests.fakes.chat_server import FakeChatServer, text

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

@pytest.fixture(scope="module")
def fake():
    with FakeChatServer() as server_:
        yield server_


@pytest.fixture()
def lifecycle(settings, hashing_embedder):
    deps.set_embedder(hashing_embedder)
    deps.set_settings(settings)
    yield settings
    deps.set_embedder(None)
    deps.set_settings(None)


def _run(settings, name: str, tenant: str, **kwargs) -> dict:
    outcome = runner.run_job(settings, name, tenant=tenant, force=True, **kwargs)
    assert outcome.status in ("finished", "partial"), outcome
    return outcome.counts


def _add(conn, settings, embedder, tenant: str, user: str, *texts: str, **fields) -> list[str]:
    vector_stores.ensure_tenant(conn, tenant)
    request = write.AddRequest(messages=tuple(write.InputMessage("user", t) for t in texts),
                               scope=MemoryScope(user_id=user, run_id=fields.pop("run_id", None)), infer=False,
                               **fields)
    result = write.add(conn, settings, tenant, request, embedder=embedder, backend=None, model=None)
    return [c.id for c in result.changes if c.id]


def _insert_copy(conn, tenant: str, user: str, memory: str, embedder, **fields) -> str:
    """A memory stored directly (as duplicates from before dedup, or imports, would be)."""
    new = store.NewMemory(scope=MemoryScope(user_id=user), memory=memory, hash=text_hash(memory), memory_type="fact",
                          categories=[], confidence=fields.get("confidence", 0.8), importance=0.5, metadata={},
                          source_kind="api", source_id=None, valid_from=None, pinned=False, expires_at=None,
                          model=embedder.model, embedding=embedder.embed([memory])[0], index_text=memory)
    return store.insert(conn, tenant, ids.new_id(ids.MEMORY), new).id


def _age(conn, memory_ids: list[str], days: float) -> None:
    conn.execute("UPDATE memories SET created_at = now() - make_interval(days => %s), last_accessed_at = NULL "
                 "WHERE id = ANY(%s)", (days, memory_ids))


def _search(conn, settings, embedder, tenant: str, user: str, query: str) -> list[str]:
    hits = recall.search(conn, settings, tenant, recall.Query(query=query, scope=MemoryScope(user_id=user)),
                         embedder=embedder, touch=False)
    return [h.memory.id for h in hits]


def _audit(conn, tenant: str) -> list[tuple]:
    return conn.execute("SELECT event, entity_id, details::text FROM memory_audit WHERE tenant_id = %s ORDER BY id",
                        (tenant,)).fetchall()


def test_stale_memories_are_archived_except_pinned_and_important_and_restore_brings_them_back(
        lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder
    normal, = _add(conn, settings, embedder, "arch", "u", "Owns a red bicycle")
    pinned, = _add(conn, settings, embedder, "arch", "u", "Blood type is O negative", pinned=True)
    important, = _add(conn, settings, embedder, "arch", "u", "Allergic to penicillin", importance=0.9)
    fresh, = _add(conn, settings, embedder, "arch", "u", "Bought a new bicycle helmet")
    _age(conn, [normal, pinned, important], days=200)
    other, = _add(conn, settings, embedder, "arch-other", "u", "Owns a blue bicycle")
    _age(conn, [other], days=200)
    assert _run(settings, "archive_stale_memories", "arch")["archived"] == 1
    assert store.get(conn, "arch", normal).archived_at is not None
    assert all(store.get(conn, "arch", m).archived_at is None for m in (pinned, important, fresh))
    assert store.get(conn, "arch-other", other).archived_at is None  # another tenant's: untouched
    assert normal not in _search(conn, settings, embedder, "arch", "u", "bicycle")
    assert _run(settings, "archive_stale_memories", "arch")["archived"] == 0  # twice: the same state

    from chalicelib.memory import archive
    restored = archive.restore(conn, "arch", normal, actor="api")
    assert restored.archived_at is None and restored.status(restored.updated_at) == "active"
    assert normal in _search(conn, settings, embedder, "arch", "u", "bicycle")
    events = [e for e, _, _ in _audit(conn, "arch")]
    assert events == ["archive", "restore"]
    assert [h.event for h in store.history(conn, "arch", normal)] == ["ADD", "ARCHIVE", "RESTORE"]


def test_quota_archives_exactly_the_excess_lowest_value_first_never_pinned(lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder
    vector_stores.ensure_tenant(conn, "quota")
    tenants.set_limits(conn, "quota", {"max_entries": 5})
    low = [_add(conn, settings, embedder, "quota", "u", f"Minor detail number {i}", importance=0.1)[0]
           for i in range(3)]
    pinned = _add(conn, settings, embedder, "quota", "u", "Pinned low fact", importance=0.05, pinned=True)[0]
    high = [_add(conn, settings, embedder, "quota", "u", f"Key fact number {i}", importance=0.9)[0] for i in range(4)]
    assert _run(settings, "enforce_memory_quotas", "quota")["quota_archived"] == 3
    archived = {m for m in low + high + [pinned] if store.get(conn, "quota", m).archived_at is not None}
    assert archived == set(low)
    assert _run(settings, "enforce_memory_quotas", "quota")["quota_archived"] == 0
    assert [e for e, _, _ in _audit(conn, "quota")] == ["quota_archive"] * 3


def test_working_memory_lives_a_day_then_is_swept_and_expiry_hides_at_once(lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder
    working, = _add(conn, settings, embedder, "ttl", "u", "Plan: step 1 fetch, step 2 summarise",
                    memory_type="working", run_id="run-1")
    memory = store.get(conn, "ttl", working)
    assert memory.expires_at is not None and (memory.expires_at - memory.created_at).total_seconds() > 23.9 * 3600
    dated, = _add(conn, settings, embedder, "ttl", "u", "Conference badge code 77")
    conn.execute("UPDATE memories SET expires_at = now() - interval '1 minute' WHERE id = ANY(%s)",
                 ([working, dated],))
    assert _search(conn, settings, embedder, "ttl", "u", "badge code") == []  # hidden at once
    counts = _run(settings, "sweep_expired_memories", "ttl")
    assert counts["ttl_swept"] == 1 and counts["expired"] == 0  # the other waits for its retention
    with pytest.raises(NotFoundError):
        store.get(conn, "ttl", working)
    assert [(h.event, h.old_memory, h.new_memory) for h in store.history(conn, "ttl", working)][-1] == (
        "EXPIRE", None, None)
    conn.execute("UPDATE memories SET expires_at = now() - interval '31 days' WHERE id = %s", (dated,))
    assert _run(settings, "sweep_expired_memories", "ttl")["expired"] == 1
    assert [e for e, _, _ in _audit(conn, "ttl")] == ["ttl_sweep", "expiry"]
    assert not any("badge" in d or "Plan" in d for _, _, d in _audit(conn, "ttl"))


def test_consolidation_without_a_model_merges_duplicates_once_even_when_cut(lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder

    def dataset(tenant: str) -> None:
        vector_stores.ensure_tenant(conn, tenant)
        for user in ("a", "b", "c"):
            for confidence in (0.6, 0.9, 0.7):
                _insert_copy(conn, tenant, user, f"{user} drives a green van", embedder, confidence=confidence)
            _insert_copy(conn, tenant, user, f"{user} plays the cello", embedder)

    dataset("merge-whole")
    dataset("merge-cut")
    whole = _run(settings, "consolidation", "merge-whole")
    assert whole == {"scopes": 3, "groups": 3, "merged": 6}
    # a run cut after every scope resumes from its cursor and ends in the same state
    cut_counts = {"scopes": 0, "groups": 0, "merged": 0}
    for _ in range(10):
        outcome = runner.run_job(settings, "consolidation", tenant="merge-cut", force=True,
                                 deadline=time.monotonic() + 0.0)
        for key in cut_counts:
            cut_counts[key] += outcome.counts.get(key, 0)
        if outcome.status == "finished":
            break
    assert cut_counts["merged"] == 6

    def state(tenant: str) -> list[tuple]:
        return conn.execute("SELECT user_id, memory, confidence, consolidated_into IS NULL FROM memories "
                            "WHERE tenant_id = %s ORDER BY 1, 2, 3", (tenant,)).fetchall()

    assert state("merge-whole") == state("merge-cut")
    assert _run(settings, "consolidation", "merge-whole")["merged"] == 0  # twice: nothing more
    survivors = conn.execute("SELECT confidence FROM memories WHERE tenant_id = 'merge-whole' AND memory LIKE "
                             "'%%green van' AND consolidated_into IS NULL").fetchall()
    assert len(survivors) == 3 and all(c > 0.9 for (c,) in survivors)
    assert len(_search(conn, settings, embedder, "merge-whole", "a", "green van")) == 2  # van + cello


def test_consolidation_with_a_model_merges_related_memories_into_one(lifecycle, conn, hashing_embedder, fake):
    settings = dataclasses.replace(lifecycle, memory_model="fake-memory", chat_base_url=fake.base_url,
                                   chat_api_key="sk-test", chat_max_retries=0)
    embedder = hashing_embedder
    vector_stores.ensure_tenant(conn, "related")
    first = _insert_copy(conn, "related", "ada", "Ada lives in Lisbon near the river", embedder)
    second = _insert_copy(conn, "related", "ada", "Ada lives in Lisbon near the river Tagus", embedder)
    fake.push(text(json.dumps({"memory": "Ada lives in Lisbon, near the river Tagus."})))
    assert _run(settings, "consolidation", "related") == {"scopes": 1, "groups": 1, "merged": 2}
    merged = store.get(conn, "related", first).consolidated_into
    assert merged and store.get(conn, "related", second).consolidated_into == merged
    assert store.get(conn, "related", merged).memory == "Ada lives in Lisbon, near the river Tagus."
    assert "Ada lives in Lisbon near the river" in fake.requests[0]["messages"][-1]["content"]
    from chalicelib.memory import archive
    archive.restore(conn, "related", first, actor="api")
    assert store.get(conn, "related", first).consolidated_into is None


def test_consolidation_with_a_model_merges_a_duplicate_survivor_with_related_memories_in_one_pass(
        lifecycle, conn, hashing_embedder, fake):
    settings = dataclasses.replace(lifecycle, memory_model="fake-memory", chat_base_url=fake.base_url,
                                   chat_api_key="sk-test", chat_max_retries=0)
    embedder = hashing_embedder
    vector_stores.ensure_tenant(conn, "related-dup")
    best = _insert_copy(conn, "related-dup", "ada", "Ada lives in Lisbon near the river", embedder, confidence=0.9)
    copy = _insert_copy(conn, "related-dup", "ada", "Ada lives in Lisbon near the river", embedder, confidence=0.6)
    related = _insert_copy(conn, "related-dup", "ada", "Ada lives in Lisbon near the river Tagus", embedder)
    fake.clear()
    fake.push(text(json.dumps({"memory": "Ada lives in Lisbon, near the river Tagus."})))
    assert _run(settings, "consolidation", "related-dup") == {"scopes": 1, "groups": 2, "merged": 3}
    assert store.get(conn, "related-dup", copy).consolidated_into == best
    merged = store.get(conn, "related-dup", best).consolidated_into
    assert merged and store.get(conn, "related-dup", related).consolidated_into == merged
    assert [m for m in fake.requests[0]["messages"][-1]["content"].splitlines()] == [
        "- Ada lives in Lisbon near the river", "- Ada lives in Lisbon near the river Tagus"]
    assert _run(settings, "consolidation", "related-dup")["merged"] == 0  # the pass was complete
    assert len(fake.requests) == 1


def test_quiet_threads_become_episodes_then_instances(lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder
    vector_stores.ensure_tenant(conn, "episodes")
    scope = MemoryScope(user_id="eve")
    for i, (prompt, answer) in enumerate([("Planning a trip to Kyoto in April", "Cherry blossom season!"),
                                          ("Which temples should I see in Kyoto?", "Kinkaku-ji and Fushimi Inari.")]):
        new = exchanges.NewExchange(scope=scope, thread_id="conv_kyoto", session_id=None, response_id=f"resp_{i}",
                                    user_prompt=prompt, assistant_response=answer)
        exchanges.insert(conn, "episodes", new, model=embedder.model,
                         vector=embedder.embed([exchanges.text_of(new)])[0])
    assert _run(settings, "episodize_conversations", "episodes")["episodes"] == 0  # not quiet for 6 hours yet
    conn.execute("UPDATE exchanges SET created_at = now() - interval '7 hours' WHERE tenant_id = 'episodes'")
    assert _run(settings, "episodize_conversations", "episodes")["episodes"] == 1
    assert _run(settings, "episodize_conversations", "episodes")["episodes"] == 0
    hits = recall.search(conn, settings, "episodes", recall.Query(query="Kyoto temples", scope=scope,
                                                                    memory_types=("episode",)), embedder=embedder)
    (episode,) = [h.memory for h in hits]
    assert episode.memory.startswith("Planning a trip to Kyoto in April") and episode.source_id == "conv_kyoto"
    assert episode.metadata["message_count"] == 4
    conn.execute("UPDATE memories SET created_at = now() - interval '31 days' WHERE id = %s", (episode.id,))
    assert _run(settings, "instancize_episodes", "episodes")["instances"] == 1
    row = conn.execute("SELECT memory_type, episode_messages, archived_data FROM memories WHERE id = %s",
                       (episode.id,)).fetchone()
    assert row[0] == "instance" and row[1] is None
    assert [m["content"] for m in episodes.decompress(bytes(row[2]))][0] == "Planning a trip to Kyoto in April"
    assert [e for e, _, _ in _audit(conn, "episodes")] == ["episode_created", "instance_migration", "compression"]
    hits = recall.search(conn, settings, "episodes", recall.Query(query="Kyoto", scope=scope,
                                                                    memory_types=("instance",)), embedder=embedder)
    assert [h.memory.id for h in hits] == [episode.id]


def test_persona_is_one_document_per_user_updated_in_place(lifecycle, conn, hashing_embedder):
    settings, embedder = lifecycle, hashing_embedder
    _add(conn, settings, embedder, "persona", "finn", "Prefers short answers", memory_type="preference")
    _add(conn, settings, embedder, "persona", "finn", "Always show code examples first", memory_type="procedural")
    assert _run(settings, "refresh_personas", "persona")["personas"] == 1
    (persona_id, document), = conn.execute("SELECT id, memory FROM memories WHERE tenant_id = 'persona' AND "
                                           "memory_type = 'persona' AND superseded_by IS NULL").fetchall()
    assert "Prefers short answers" in document and "code examples" in document
    assert _run(settings, "refresh_personas", "persona")["personas"] == 0
    time.sleep(0.01)
    _add(conn, settings, embedder, "persona", "finn", "Prefers metric units", memory_type="preference")
    assert _run(settings, "refresh_personas", "persona")["personas"] == 1
    current = store.get(conn, "persona", persona_id)
    assert "metric units" in current.memory and current.pinned
    assert [h.event for h in store.history(conn, "persona", persona_id)] == ["ADD", "UPDATE"]
    versions = conn.execute("SELECT count(*) FROM memories WHERE superseded_by = %s", (persona_id,)).fetchone()[0]
    assert versions == 1
