"""Recall's memory signals and the batched add path, in-process on the module's real database (hashing embedder):
conversation context, named speakers, named dates, decay counted from last use, access counting, one add of many
messages."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from chalicelib.memory import recall, write
from chalicelib.memory.model import MemoryScope
from chalicelib.store.vector_stores import ensure_tenant
from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

TENANT = "recall"


@pytest.fixture()
def db(conn, settings, hashing_embedder):
    """``(add, search)`` helpers on a fresh user per test."""
    ensure_tenant(conn, TENANT)
    counter = {"n": 0}

    def add(*turns: tuple[str, str], user: str, when: datetime | None = None, **fields):
        request = write.AddRequest(messages=tuple(write.InputMessage("user", text, name) for name, text in turns),
                                   scope=MemoryScope(user_id=user), infer=False, timestamp=when, **fields)
        return write.add(conn, settings, TENANT, request, embedder=hashing_embedder, backend=None, model=None)

    def search(text: str, user: str, *, now: datetime | None = None, touch: bool = False, **fields):
        counter["n"] += 1
        query = recall.Query(query=text, scope=MemoryScope(user_id=user), top_k=fields.pop("top_k", 10), **fields)
        return recall.search(conn, settings, TENANT, query, embedder=hashing_embedder, now=now, touch=touch)

    return add, search


def _texts(hits):
    return [h.memory.memory for h in hits]


FILLER = [("Ann", "The weather was grey all weekend."), ("Ben", "Traffic on the ring road was awful."),
          ("Ann", "Our neighbours painted their fence green."), ("Ben", "The printer at work jammed again.")]


def test_an_answer_borrows_relevance_from_the_turn_before_it_in_the_same_conversation(db):
    add, search = db
    add(*FILLER, user="ctx", when=datetime(2024, 1, 1, tzinfo=UTC))
    add(("Ann", "Which novel are you reading these days?"), ("Ben", "Charlotte's Web, a gift from my aunt."),
        user="ctx", when=datetime(2024, 2, 1, tzinfo=UTC))
    add(("Ben", "Tea with lemon is underrated."), user="ctx", when=datetime(2024, 3, 1, tzinfo=UTC))
    hits = search("which novel is he reading", "ctx")
    answer = next(h for h in hits if h.memory.memory.startswith("Charlotte"))
    assert _texts(hits)[:2] == ["Which novel are you reading these days?", "Charlotte's Web, a gift from my aunt."]
    assert answer.details["context"] > answer.details["relevance"]
    # The turn added by another add (another conversation) is no neighbour: it gets nothing from the question.
    tea = next(h for h in hits if h.memory.memory.startswith("Tea"))
    assert tea.details["context"] == tea.details["relevance"]
    without = search("which novel is he reading", "ctx", signals=recall.Signals(context=False))
    plain = next(h for h in without if h.memory.memory.startswith("Charlotte"))
    assert plain.score < answer.score


def test_a_turn_borrows_in_full_from_a_question_before_it_and_a_quarter_from_a_statement(db):
    add, search = db
    add(("Ann", "Do you like novels?"), ("Ben", "Yes, mostly old ones."), user="asks",
        when=datetime(2024, 1, 1, tzinfo=UTC))
    add(("Ann", "Novels are great."), ("Ben", "The weather is fine."), user="asks", when=datetime(2024, 2, 1, tzinfo=UTC))
    hits = {h.memory.memory: h.details for h in search("novels", "asks")}
    question, statement = hits["Do you like novels?"], hits["Novels are great."]
    answer, after = hits["Yes, mostly old ones."], hits["The weather is fine."]
    alpha = recall.CONTEXT_WEIGHT
    assert answer["context"] == pytest.approx((answer["relevance"] + alpha * question["relevance"]) / (1 + alpha),
                                              abs=1e-5)
    assert after["context"] == pytest.approx(
        (after["relevance"] + alpha * recall.UNASKED_SHARE * statement["relevance"]) / (1 + alpha), abs=1e-5)


def test_a_neighbour_added_for_context_borrows_from_its_own_neighbours_too(db, conn):
    """The candidates statement returns, for a neighbour it adds, that neighbour's own neighbours as well."""
    from chalicelib.memory import store

    add, _ = db
    added = add(("Ann", "First."), ("Ben", "Second."), ("Ann", "Third."), user="ctx2")
    first, second, third = (conn.execute("SELECT seq FROM memories WHERE id = %s", (c.id,)).fetchone()[0]
                            for c in added.changes)
    predicate, params = store.scope_predicate(MemoryScope(user_id="ctx2"))
    rows = {r.seq: r for r in store.candidates(conn, TENANT, [first], vector=None, neighbours=predicate,
                                                 params=params)}
    assert set(rows) == {first, second}  # the candidate and its neighbour, not the neighbour's neighbour
    assert (rows[first].previous, rows[first].following) == (None, second)
    assert (rows[second].previous, rows[second].following) == (first, third)


def test_a_turn_of_the_session_about_the_question_outranks_an_equal_turn_of_another(db):
    add, search = db
    when = datetime(2024, 5, 1, tzinfo=UTC)
    add(("Ann", "The dance studio opens on Friday."), ("Ben", "Tomorrow will be a great night."), *FILLER[:2],
        user="sess", when=when)
    add(*FILLER[2:], ("Ben", "Tomorrow will be a great night indeed."), user="sess", when=when + timedelta(days=30))
    hits = search("When does the dance studio open?", "sess", signals=recall.Signals(context=False))
    nights = [h for h in hits if h.memory.memory.startswith("Tomorrow")]
    assert [h.memory.memory for h in nights] == ["Tomorrow will be a great night.",
                                               "Tomorrow will be a great night indeed."]
    assert nights[0].details["session"] == hits[0].details["relevance"]  # the opening's session: its best turn
    assert nights[0].details["session"] > nights[1].details["session"]
    off = search("When does the dance studio open?", "sess", signals=recall.Signals(context=False, sessions=False))
    assert all(h.details["session"] is None for h in off)


def test_a_named_speaker_prefers_what_that_speaker_said(db):
    add, search = db
    add(("Maria", "I volunteer at the animal shelter on Saturdays."),
        ("John", "I volunteer at the food bank on Saturdays."), *FILLER, user="spk")
    hits = search("Where does John volunteer on Saturdays?", "spk", top_k=2)
    assert _texts(hits)[0] == "I volunteer at the food bank on Saturdays."
    assert [h.details["speaker"] for h in hits] == [1.0, 0.0]
    neutral = search("Where does someone volunteer on Saturdays?", "spk", top_k=2)
    assert all(h.details["speaker"] is None for h in neutral)
    # Switched off, the speaker does not count (the name still counts as a word of the text).
    off = search("Where does John volunteer on Saturdays?", "spk", top_k=2,
                 signals=recall.Signals(speakers=False))
    assert all(h.details["speaker"] is None for h in off)
    # The boost is relative (divided by its maximum): the other speaker's memory scores lower than without it.
    shelter = "I volunteer at the animal shelter on Saturdays."
    assert next(h.score for h in hits if h.memory.memory == shelter) < next(h.score for h in off
                                                                             if h.memory.memory == shelter)


def test_a_named_speaker_counts_as_the_speaker_not_as_words_of_the_query(db):
    add, search = db
    add(("Omar", "I volunteer at the food bank on Saturdays."), ("Ann", "Omar, that is so kind of you, Omar!"),
        user="names")
    hits = search("What does Omar do on Saturdays?", "names", top_k=2)
    assert _texts(hits)[0] == "I volunteer at the food bank on Saturdays."
    assert [h.details["speaker"] for h in hits] == [1.0, 0.0]
    # The whole name or its first word, possessive too; a query of nothing but a name stays as it is.
    assert recall._without_names("What is omar haddad's job, Omar?", {"Omar Haddad"}) == "What is job, ?"
    assert recall._without_names("Omar?", {"Omar"}) == "Omar?"
    assert recall._named_speakers("Did Omari call?", ["Omar", None, " "]) == set()


def test_a_named_date_prefers_memories_from_then(db):
    add, search = db
    add(("Nate", "I made coconut ice cream today."), user="dates", when=datetime(2022, 3, 4, 18, tzinfo=UTC))
    add(("Nate", "I made mango ice cream today."), user="dates", when=datetime(2022, 11, 9, 18, tzinfo=UTC))
    dated = search("What ice cream did Nate make on 9 November, 2022?", "dates", top_k=2)
    assert _texts(dated)[0] == "I made mango ice cream today."
    assert [h.details["time"] for h in dated] == [1.0, 0.0]
    march = search("What ice cream did Nate make in March 2022?", "dates", top_k=2)
    assert _texts(march)[0] == "I made coconut ice cream today."
    assert all(h.details["time"] is None for h in search("What ice cream did Nate make?", "dates"))
    # A time no memory is from says nothing: no boost, no scaling.
    elsewhere = search("What ice cream did Nate make in July 2030?", "dates", top_k=2)
    plain = search("What ice cream did Nate make?", "dates", top_k=2)
    assert all(h.details["time"] is None for h in elsewhere)
    assert [h.score for h in elsewhere] == pytest.approx([h.score for h in plain], abs=0.05)


def test_decay_counts_from_last_use_not_from_when_the_fact_held(db, settings):
    add, search = db
    add(("Ann", "I grew up in a village by the sea."), user="decay", when=datetime(2015, 6, 1, tzinfo=UTC))
    [fresh] = search("where did she grow up", "decay", top_k=1)
    assert fresh.details["decay"] == pytest.approx(1.0, abs=1e-3)
    assert fresh.details["recency"] == pytest.approx(1.0, abs=1e-3)
    # A year without use: decayed, never below the floor.
    later = datetime.now(UTC) + timedelta(days=365)
    [stale] = search("where did she grow up", "decay", top_k=1, now=later)
    assert stale.details["decay"] == pytest.approx(settings.memory_decay_floor)
    assert stale.score < fresh.score


def test_freshness_breaks_near_ties_and_never_buries_the_best_match(db, conn):
    add, search = db
    add(("Ann", "My sister lives in Lisbon near the old harbour."), user="fresh", when=datetime(2019, 1, 5, tzinfo=UTC))
    add(("Ann", "Lisbon trams are yellow."), user="fresh", when=datetime(2025, 5, 31, tzinfo=UTC))
    # Written live: each memory created at its conversation's time; queried the day after the second one.
    conn.execute("UPDATE memories SET created_at = valid_from WHERE tenant_id = %s AND user_id = 'fresh'", (TENANT,))
    later = datetime(2025, 6, 1, tzinfo=UTC)
    hits = search("where does my sister live near the harbour in Lisbon", "fresh", now=later)
    assert _texts(hits)[0] == "My sister lives in Lisbon near the old harbour."  # older, and the best match
    old, new = hits[0].details, hits[1].details
    assert old["recency"] < new["recency"]
    # A score is the match scaled by freshness and importance: a memory that matches nothing gains nothing.
    balanced = recall.STRATEGIES["balanced"]
    assert recall._base(0.0, 1.0, 1.0, balanced) == 0.0
    assert recall._base(0.5, 0.0, 0.5, balanced) / recall._base(0.5, 1.0, 0.5, balanced) == pytest.approx(0.85 / 0.95)
    # Without a vector or text weight there is no match to scale: freshness and importance alone rank.
    assert recall._base(0.0, 1.0, 0.5, recall.Strategy(0.0, 0.0, 1.0, 1.0)) == pytest.approx(0.75)


def test_search_counts_an_access_of_each_result(db, conn):
    add, search = db
    add(("Ann", "The spare key is under the blue pot."), user="touch")
    [hit] = search("spare key", "touch", top_k=1, touch=True)
    assert hit.memory.access_count == 0  # as it was before this search
    count, accessed = conn.execute("SELECT access_count, last_accessed_at FROM memories WHERE id = %s",
                                   (hit.memory.id,)).fetchone()
    assert count == 1 and accessed is not None
    search("spare key", "touch", top_k=1, touch=True)  # within the access granularity: not counted again
    assert conn.execute("SELECT access_count FROM memories WHERE id = %s", (hit.memory.id,)).fetchone()[0] == 1


def test_one_add_of_many_messages_keeps_their_order_and_writes_each_once(db, conn):
    add, _ = db
    turns = [("Ann" if i % 2 else "Ben", f"Message number {i} about topic {i * 7 % 13}.") for i in range(60)]
    turns.append(("Ann", "message number 3 about topic 8"))  # the same as turn 3 once normalised
    result = add(*turns, user="batch", metadata={"source": "import"})
    events = [c.event for c in result.changes]
    assert events == ["ADD"] * 60 + ["NOOP"]
    rows = conn.execute("SELECT memory, metadata->>'speaker', metadata->>'source' FROM memories "
                        "WHERE tenant_id = %s AND user_id = 'batch' ORDER BY seq", (TENANT,)).fetchall()
    assert [r[0] for r in rows] == [t for _, t in turns[:60]]
    assert [r[1] for r in rows] == [n for n, _ in turns[:60]] and {r[2] for r in rows} == {"import"}
    history = conn.execute("SELECT memory_id, event FROM memory_history WHERE tenant_id = %s AND user_id = 'batch' "
                           "ORDER BY id", (TENANT,)).fetchall()
    assert [h[1] for h in history] == ["ADD"] * 60
    assert [h[0] for h in history] == [c.id for c in result.changes[:60]]
    again = add(*turns[:5], user="batch")
    assert [c.event for c in again.changes] == ["NOOP"] * 5
    assert {c.target.id for c in again.changes if c.target} == {c.id for c in result.changes[:5]}


def test_strategies_without_a_vector_weight_still_rank_with_every_signal(db):
    add, search = db
    add(("Maria", "I keep bees in the garden."), ("John", "I keep chickens in the garden."), user="kw")
    keyword_only = dataclasses.replace(recall.STRATEGIES["keyword"], vector=0.0)
    hits = search("What does John keep in the garden?", "kw", strategy=keyword_only, top_k=2)
    assert _texts(hits)[0] == "I keep chickens in the garden." and hits[0].details["vector"] == 0.0
