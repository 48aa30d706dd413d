"""Searching earlier exchanges (chalicelib/memory/exchanges.py) answers at once when no exchange of the scope can
reach the similarity threshold — and that shortcut never changes an answer: for every query and threshold the
search returns exactly what the ranking alone returns (the shortcut switched off), whether the scope is small
enough to be checked exactly or larger than the check reads. In-process on the module's database, hashing
embedder."""

from __future__ import annotations

import random

import pytest

from chalicelib.memory import exchanges
from chalicelib.memory.model import MemoryScope
from chalicelib.store.vector_stores import ensure_tenant

TENANT = "exchange-search"
OTHER = "exchange-search-other"
WORDS = ["garden", "piano", "lisbon", "coffee", "marathon", "violin", "python", "sailing", "tomato", "chess",
         "museum", "bicycle", "novel", "winter", "guitar", "kitchen", "hiking", "camera", "river", "bakery"]
THRESHOLDS = [0.0, 0.3, 0.5, 0.65, 0.8, 1.0]


@pytest.fixture()
def stored(conn, hashing_embedder):
    """30 exchanges of user u1 (and a few of u2, and of u1 in another tenant; stored once per module): their
    texts, by tenant and user."""
    ensure_tenant(conn, TENANT)
    ensure_tenant(conn, OTHER)
    rng = random.Random(7)
    texts: dict[tuple[str, str], list[str]] = {}
    for tenant, user, count in ((TENANT, "u1", 30), (TENANT, "u2", 4), (OTHER, "u1", 4)):
        for i in range(count):
            new = exchanges.NewExchange(
                scope=MemoryScope(user_id=user), thread_id=f"conv_{user}", session_id=None,
                response_id=f"resp_{tenant}_{user}_{i}",
                user_prompt=" ".join(rng.choice(WORDS) for _ in range(6)) + "?",
                assistant_response=" ".join(rng.choice(WORDS) for _ in range(8)) + ".")
            vector = hashing_embedder.embed([exchanges.text_of(new)])[0]
            exchanges.insert(conn, tenant, new, model=hashing_embedder.model, vector=vector)  # None: stored already
            texts.setdefault((tenant, user), []).append(exchanges.text_of(new))
    return texts


def _search(conn, settings, embedder, query: str, threshold: float) -> list[tuple[str, float, float]]:
    vector = embedder.embed([query])[0]
    hits = exchanges.search(conn, settings, TENANT, MemoryScope(user_id="u1"), query, embedder=embedder, limit=5,
                            threshold=threshold, vector=vector)
    return [(h.exchange.id, round(h.similarity, 6), round(h.score, 6)) for h in hits]


@pytest.mark.parametrize("check_rows", [None, 10], ids=["scope-checked-exactly", "scope-larger-than-the-check"])
def test_the_threshold_shortcut_never_changes_an_answer(conn, settings, hashing_embedder, stored, monkeypatch,
                                                        check_rows):
    if check_rows is not None:  # 30 exchanges: more than the check reads, so every search is ranked
        monkeypatch.setattr(exchanges, "_EXACT_CHECK_ROWS", check_rows)
    queries = [stored[(TENANT, "u1")][3], stored[(TENANT, "u1")][17], stored[(TENANT, "u2")][0],
               stored[(OTHER, "u1")][1], "piano lessons in lisbon", "a question about nothing stored at all"]
    answers = {(q, t): _search(conn, settings, hashing_embedder, q, t) for q in queries for t in THRESHOLDS}
    monkeypatch.setattr(exchanges, "_EXACT_CHECK_ROWS", -1)  # the shortcut off: the ranking alone answers
    ranked = {(q, t): _search(conn, settings, hashing_embedder, q, t) for q in queries for t in THRESHOLDS}
    assert answers == ranked
    at_default = [answers[(q, exchanges.SIMILARITY_THRESHOLD)] for q in queries]
    assert any(at_default) and not all(at_default)  # both outcomes are exercised at seed 004's threshold
    # u1's own exchange is found with similarity 1; u2's and the other tenant's texts find no exchange of theirs
    own = answers[(stored[(TENANT, "u1")][3], 1.0)]
    assert own and own[0][1] == pytest.approx(1.0)
    stored_ids = {h[0] for a in answers.values() for h in a}
    rows = conn.execute("SELECT id FROM exchanges WHERE tenant_id = %s AND user_id = 'u1'", (TENANT,)).fetchall()
    assert stored_ids <= {r[0] for r in rows}


def test_the_shortcut_reads_the_scope_only(conn, settings, hashing_embedder, stored):
    # u2's exchange text is stored for u2 only: u1's search at a high threshold finds nothing, and u2's finds it
    text = stored[(TENANT, "u2")][2]
    vector = hashing_embedder.embed([text])[0]
    others = exchanges.search(conn, settings, TENANT, MemoryScope(user_id="u1"), text, embedder=hashing_embedder,
                              threshold=0.99, vector=vector)
    assert all(h.exchange.user_id == "u1" and h.exchange.tenant_id == TENANT for h in others)
    found = exchanges.search(conn, settings, TENANT, MemoryScope(user_id="u2"), text, embedder=hashing_embedder,
                             threshold=0.99, vector=vector)
    assert [h.exchange.user_id for h in found][:1] == ["u2"]
    assert found[0].similarity == pytest.approx(1.0)
