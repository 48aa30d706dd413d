"""Long histories (issue 31): a user's memories indexed as a partition's body on the module's vector backend, the
rest read exactly from its tail, ranked as if every row were read exactly — in-process on the module's database
(hashing embedder), on every registered backend — the users' histories' part of the port's conformance suite
(migrations/0030_memory_partitions.sql, chalicelib/search/partitions.py, chalicelib/search/backends/partition_sync.py).

An indexed history ranks exactly as when every row is read from its tail (the same ids and scores); half indexed,
too; a revised or deleted body row leaves the body in its transaction; another tenant's user of the same id is
another partition; an agent narrows a user's history; a tenant's histories move to another backend and back
without a change of ranking, the old copy dropped."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.memory import recall, store, write
from chalicelib.memory.model import MemoryScope
from chalicelib.search.backends import for_backend, names, partition_sync
from chalicelib.search.corpus import MEMORIES
from chalicelib.store.vector_stores import ensure_tenant

VECTOR_BACKENDS = names()  # every registered backend: the partitions' part of the port's conformance suite
TENANT = "partitions"
OTHER = "partitions-other"
WORDS = ["garden", "piano", "lisbon", "coffee", "marathon", "violin", "python", "sailing", "tomato", "chess",
         "museum", "bicycle", "novel", "winter", "guitar", "kitchen", "hiking", "camera", "river", "bakery"]
QUERIES = ["piano lessons in lisbon", "coffee and a novel", "marathon training in winter", "chess at the museum",
           "sailing on the river", "tomato garden", "guitar and violin"]


def _texts(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + "." for _ in range(count)]


@pytest.fixture()
def history(conn, settings, hashing_embedder):
    """``add(user, count, tenant=…)`` adds ``count`` memories in adds of 25 (two speakers alternating);
    ``search(text, user, tenant=…)`` → ``[(memory id, score)]``; ``index(user, …)`` writes the partition's
    tail (every history, however short)."""
    ensure_tenant(conn, TENANT)
    ensure_tenant(conn, OTHER)
    rng = random.Random(31)

    def add(user: str, count: int, *, tenant: str = TENANT, agent: str | None = None) -> None:
        texts = _texts(rng, count)
        for start in range(0, count, 25):
            request = write.AddRequest(
                messages=tuple(write.InputMessage("user" if i % 2 else "assistant", t, f"speaker{i % 2}")
                               for i, t in enumerate(texts[start:start + 25])),
                scope=MemoryScope(user_id=user, agent_id=agent), infer=False,
                timestamp=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=start))
            write.add(conn, settings, tenant, request, embedder=hashing_embedder, backend=None, model=None)

    def search(text: str, user: str, *, tenant: str = TENANT, **fields) -> list[tuple[str, float]]:
        query = recall.Query(query=text, scope=MemoryScope(user_id=user, agent_id=fields.pop("agent", None)),
                             top_k=10, **fields)
        return [(h.memory.id, h.score) for h in recall.search(conn, settings, tenant, query, embedder=hashing_embedder,
                                                             touch=False, now=datetime(2025, 6, 1, tzinfo=UTC))]

    def index(user: str, *, tenant: str = TENANT, limit: int = partition_sync.WRITE_BATCH) -> int:
        done = 0
        while (n := partition_sync.write_tail(conn, settings, MEMORIES, tenant, user, limit=limit, min_rows=0)):
            done += n
            if n < limit:
                break
        partition_sync.after_add(conn, settings, MEMORIES, tenant, None)  # (nothing: no user)
        return done

    return add, search, index


def _body(conn, user: str, tenant: str = TENANT) -> tuple[int, int, str]:
    row = conn.execute("SELECT body_rows, indexed_through, backend FROM memory_partitions "
                       "WHERE tenant_id = %s AND corpus = 'memories' AND user_id = %s", (tenant, user)).fetchone()
    return row if row else (0, 0, "")


def _force_tail(conn, user: str) -> None:
    """Forget the user's body (as before any index): every row is read from the tail again."""
    conn.execute("DELETE FROM memory_partitions WHERE tenant_id = %s AND user_id = %s", (TENANT, user))


def test_an_indexed_history_ranks_as_the_exact_path_does(history, conn, vector_backend):
    add, search, index = history
    add("long", 300)
    index("long", limit=120)  # (Qdrant's were written after each add already)
    body_rows, through, backend = _body(conn, "long")
    assert (body_rows, backend) == (300, vector_backend)
    assert through == conn.execute("SELECT max(seq) FROM memories WHERE tenant_id = %s AND user_id = 'long'",
                                   (TENANT,)).fetchone()[0]
    indexed = {q: search(q, "long") for q in QUERIES}
    assert all(indexed.values())
    _force_tail(conn, "long")
    assert {q: search(q, "long") for q in QUERIES} == indexed


def test_a_history_half_indexed_reads_its_tail_exactly(history, conn, settings, vector_backend, monkeypatch):
    add, search, index = history
    add("half", 150)
    index("half")
    # The next adds stay tail: pgvector's writer is the job; Qdrant's (after each add) is held back here.
    monkeypatch.setattr(type(for_backend(vector_backend, settings, 0)), "writes_after_add", False)
    add("half", 150)
    assert _body(conn, "half")[0] == 150
    both = {q: search(q, "half") for q in QUERIES}
    _force_tail(conn, "half")
    assert {q: search(q, "half") for q in QUERIES} == both


def test_a_revised_or_deleted_body_row_leaves_the_body_at_once(history, conn, settings, hashing_embedder):
    add, search, index = history
    add("edits", 120)
    index("edits")
    first = search("piano lessons in lisbon", "edits")
    top = first[0][0]
    memory = store.get(conn, TENANT, top)
    with conn.transaction():
        store.revise(conn, TENANT, top, text="Completely unrelated text about taxes.", hash="x" * 64,
                     index_text="Completely unrelated text about taxes.", model=hashing_embedder.model,
                     embedding=hashing_embedder.embed(["Completely unrelated text about taxes."])[0],
                     valid_from=None)
    assert _body(conn, "edits")[0] == 119  # out of the body, pending
    assert top not in [i for i, _ in search("piano lessons in lisbon", "edits")]
    assert top in [i for i, _ in search("unrelated taxes", "edits")]
    victim = search("coffee and a novel", "edits")[0][0]
    with conn.transaction():
        store.delete(conn, TENANT, victim)
    assert victim not in [i for i, _ in search("coffee and a novel", "edits")]
    index("edits")  # the pending rows: written again, or removed from the backend
    assert conn.execute("SELECT count(*) FROM memory_index_pending").fetchone()[0] == 0
    after = {q: search(q, "edits") for q in QUERIES}
    _force_tail(conn, "edits")
    assert {q: search(q, "edits") for q in QUERIES} == after
    assert memory.id == top


def test_another_tenants_user_of_the_same_name_is_another_partition(history, conn):
    add, search, index = history
    add("same", 80)
    add("same", 80, tenant=OTHER)
    index("same")
    index("same", tenant=OTHER)
    mine = {i for q in QUERIES for i, _ in search(q, "same")}
    theirs = {i for q in QUERIES for i, _ in search(q, "same", tenant=OTHER)}
    assert mine and theirs and not mine & theirs
    assert {r[0] for r in conn.execute("SELECT id FROM memories WHERE id = ANY(%s)", (list(mine),))} == mine
    assert conn.execute("SELECT count(DISTINCT partition_key) FROM memory_partitions WHERE user_id = 'same'"
                        ).fetchone()[0] == 2


def test_an_agent_narrows_a_users_indexed_history(history, conn):
    add, search, index = history
    add("agents", 100, agent="a1")
    add("agents", 100, agent="a2")
    index("agents")
    ids = {r[0] for r in conn.execute("SELECT id FROM memories WHERE tenant_id = %s AND user_id = 'agents' "
                                      "AND agent_id = 'a1'", (TENANT,))}
    for q in QUERIES:
        found = search(q, "agents", agent="a1")
        assert found and {i for i, _ in found} <= ids


def test_reindex_moves_a_tenants_histories_to_the_other_backend_and_back(history, conn, settings, vector_backend):
    from chalicelib import memory

    add, search, index = history
    add("mover", 200)
    index("mover")
    before = {q: search(q, "mover") for q in QUERIES}
    other = next(n for n in names() if n != vector_backend)
    ctx = memory.context(settings, TENANT, actor="test")
    moved = memory.reindex(conn, ctx, other)
    assert moved.backend == other and moved.partitions >= 1
    assert _body(conn, "mover")[2] == other
    assert conn.execute("SELECT memory_backend FROM tenants WHERE id = %s", (TENANT,)).fetchone()[0] == other
    assert {q: search(q, "mover") for q in QUERIES} == before
    again = memory.reindex(conn, ctx, vector_backend)
    assert again.backend == vector_backend and _body(conn, "mover")[2] == vector_backend
    assert {q: search(q, "mover") for q in QUERIES} == before
    # pgvector's copy of a body lives in Postgres: after moving away it is gone.
    if vector_backend != names()[0]:
        key = conn.execute("SELECT partition_key FROM memory_partitions WHERE user_id = 'mover'").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM memory_postings WHERE partition_key = %s", (key,)).fetchone()[0] == 0
