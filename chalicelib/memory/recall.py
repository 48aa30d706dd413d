"""Searching memories: hybrid relevance from the shared vector and BM25 legs (:mod:`chalicelib.search.ranking`,
over the ``MEMORIES`` corpus, the scope restricted in SQL), sharpened by what memories have and documents do not
(the conversation around them, who said them, when), weighted with freshness and importance by a strategy, and
multiplied by a bounded decay.

Per result (every term in [0, 1]):

    relevance  = (w_v · similarity + w_t · keyword) / (w_v + w_t)
    context    = (relevance + α · max(q · relevance of the previous, relevance of the next of its add)) / (1 + α)
    session    = (context + λ · the best relevance among the ranked memories of its add) / (1 + λ)
    match      = session · (1 + β · said by a speaker the query names) / (1 + β)      (when it names one)
                         · (1 + γ · valid_from inside a time the query names) / (1 + γ) (when it names one)
    freshness  = 0.5 ^ (days since last used / half-life)
    base       = match · (w_v + w_t + w_r · freshness + w_i · importance) / (w_v + w_t + w_r + w_i)
    decay      = 1 if pinned else max(floor, freshness)
    score      = base · decay

``similarity`` is the cosine similarity (clamped at 0), ``keyword`` BM25 over the scope divided by the best
score in the scope for the query. Both are known for every candidate: the similarity of a memory only the keyword
leg returned is computed exactly, not taken as 0 (a convex combination of scores needs both; Bruch et al., "An
Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023); a memory only the vector leg returned matched no
query word or ranked below the keyword leg's candidates, and counts 0 there. The strategies' weights are seed
002's ("Weighting Strategies").

The memory signals (each can be switched off per query, :class:`Signals`; ``benchmarks/memory.py`` measures
what each buys on LoCoMo):

- **Conversation context** (α = :data:`CONTEXT_WEIGHT`): the memories one add stored together (one
  conversation's messages, or the facts extracted from it) are neighbours in write order. A memory borrows part
  of its best neighbour's relevance: in a conversation the answer often follows the turn that holds the
  question's words ("What are you reading?" → "Charlotte's Web"). This is score regularisation over a document
  graph (Diaz, "Regularizing Ad Hoc Retrieval Scores", CIKM 2005), the graph being the add's sequence;
  LongMemEval (Wu et al., ICLR 2025) finds the user–assistant round a better retrieval unit than the single
  message for the same reason. Neighbours outside both legs' candidates are added with their own similarity
  (keyword 0) and borrow from their own neighbours alike (one outside the ranked rows counts 0), so every ranked
  memory is scored by the same formula (LoCoMo Recall@10 +0.01 over neighbours that borrowed nothing). What a
  memory borrows from the turn *before* it depends on whether that turn asked (q = 1 when its text holds a
  question mark, else q = :data:`UNASKED_SHARE`): an answer takes its question's relevance, while a turn after a
  mere statement on the topic takes a quarter of it (the next turn lends in full: a question is found by its
  answer's words). Borrowing from every neighbour alike filled the top of the list with the pairs around one
  relevant turn, crowding out the rest of a question's evidence when it lies in several sessions: on LoCoMo,
  multi-hop Recall@10 0.516 → 0.539 and Recall@10 0.808 → 0.810 (α 0.5 → 0.75 with it; single-hop 0.904 →
  0.901, All@10 0.749 → 0.746).
- **Sessions** (λ = :data:`SESSION_WEIGHT`): recall in two stages, sessions first, then their turns. A session
  (the memories one add stored: one conversation's session, or the facts extracted from it) is as relevant as
  its best ranked memory, and each memory borrows a quarter of its session's relevance: of two equally close
  turns, the one from the session about the question's topic ranks first, and a turn of the right session that
  shares no word with the question ("We danced until two" for "the launch party") moves up.
  This is passage retrieval with the document's score mixed in (Callan, "Passage-Level Evidence in Document
  Retrieval", SIGIR 1994); the session is scored by its best passage, which Callan found the most reliable
  document score. On LoCoMo, Recall@10 0.782 → 0.793; single-hop and temporal questions gain, multi-hop ones
  neither gain nor lose (their evidence is spread over sessions).
- **Speakers** (β = :data:`FACET_BOOST`): a query naming a speaker of the scope's memories (``metadata.speaker``,
  the message ``name`` of a verbatim add) prefers what that speaker said: questions about a person are mostly
  answered by that person's own statements (entity-centric retrieval, as in Zep's and mem0's entity nodes).
  The names leave the query before it is embedded and matched by keywords: the facet stands for them. As words
  they matched every memory that addresses the person ("Thanks, Ann!") as much as the person's own (whose index
  text starts with the speaker's name), and pulled the query's vector towards the name rather than the topic.
  The scope's speakers are read before the embedding (:func:`store.speakers`, a bounded sample: one small
  statement); a query of nothing but a name is kept whole. Recall inside a response asks the same question
  (:func:`searched`: one embedding of the text without the names, reused for its earlier exchanges), so it ranks
  as ``POST /v1/memories/search`` does. On
  LoCoMo, Recall@10 0.793 → 0.808 (All@10 0.734 → 0.749; every category gains, open-domain most: 0.472 → 0.511).
- **Time** (γ = :data:`FACET_BOOST`): a query naming a date, month or year (:mod:`chalicelib.memory.temporal`)
  prefers memories valid from inside that time (LongMemEval's time-aware query expansion, used as a soft boost).

**Long histories.** A scope naming a user lies in that user's partition (:mod:`chalicelib.search.partitions`): the
legs take the candidates of its indexed body from its backend and read its tail exactly, BM25's statistics are
every row of the user's, the neighbours are index probes around each candidate and the speakers are kept with the
partition — the work is bounded by the candidates, not the history (``docs/memory.md``, "Long histories").

The boosts divide by their maximum so every score stays in [0, 1]; a query naming no speaker or time, or only
a time none of the candidates is from, is not scaled. β and γ are coarse choices ("counts half as much again"), not
fitted: on LoCoMo, Recall@10 moves by about 0.01 for any of them between 0.25 and 1. α was one too (0.5) until a
turn after a statement borrowed only a quarter; with that, 0.6, 0.75 and 1 gave Recall@10 0.808, 0.810 and 0.804
(``UNASKED_SHARE`` 0 and 0.25: 0.809 and 0.810). λ is a quarter: at 0.5 Recall@10 is about the same but multi-hop
questions lose 0.02 (``docs/benchmarks.md``).

**Freshness and decay** count the days since Engram last *used* a memory: its last access by a search, else its
creation (seed 000: "days since last access"; seed 002's "access freshness"). Not ``valid_from``: that is when
the fact held in the world, so a conversation imported from last year is not stale on the day it is stored. The
half-life (90 days) follows seed 000 ("Memory Decay"); the floor (0.9) is Engram's, measured: memories imported
at their session times keep LoCoMo Recall@10 0.744 at 0.9 against 0.382 at 0.5 (``benchmarks/memory.py --aged``).
Both are settings; the floor keeps old but correct memories findable (unbounded decay zeroes them).

Freshness and importance **scale** the match rather than add to it (seed 002's weights, applied as a product): a
memory that does not match the query gains nothing from being fresh or important, and of two memories the fresher
one wins only when their matches are within the strategy's margin (balanced: a never-used memory keeps at least
0.85 / 0.95 of the score of a just-used one of equal match and importance 0.5). Added, a fresh but weak match
outscored an old best one: memories written live at their session times and queried after the last session gave
LoCoMo Recall@10 0.760 against 0.793 imported at once; scaled, 0.785 (the rest of the gap is the decay's floor).
A strategy weighing neither vectors nor text ranks by freshness and importance alone.

Invalidated, superseded, merged, archived and expired memories are hidden unless asked for; ``as_of`` shows the
memories that were valid at that instant (valid_from ≤ t < valid_to: time travel over the validity intervals,
where valid_from is when the conversation that taught it happened).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from chalicelib import observability
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.memory import active, store
from chalicelib.memory.model import Memory, MemoryScope
from chalicelib.memory.temporal import TimeWindow, time_windows
from chalicelib.search.backends.pgvector import PGVECTOR
from chalicelib.search.corpus import MEMORIES, Scope
from chalicelib.search.filters import compile_filter
from chalicelib.search.partitions import PartitionLegs, lookup, tail_predicate, user_partition
from chalicelib.search.ranking import Weights, rank

__all__ = ["CONTEXT_WEIGHT", "FACET_BOOST", "SESSION_WEIGHT", "STRATEGIES", "UNASKED_SHARE", "Hit", "Query",
           "Searched", "Signals", "Strategy", "search", "searched"]


@dataclass(frozen=True, slots=True)
class Strategy:
    """Weights (≥ 0) of vector similarity, keyword relevance, recency and importance."""

    vector: float
    text: float
    recency: float
    importance: float


# Seed 002, "Weighting Strategies" (vector / text / freshness / importance).
STRATEGIES: dict[str, Strategy] = {
    "semantic": Strategy(0.70, 0.20, 0.05, 0.05),
    "keyword": Strategy(0.30, 0.60, 0.05, 0.05),
    "balanced": Strategy(0.50, 0.30, 0.10, 0.10),
    "recency": Strategy(0.40, 0.25, 0.25, 0.10),
    "priority": Strategy(0.35, 0.25, 0.10, 0.30),
}
DEFAULT_STRATEGY = "balanced"
# Candidates each leg returns before the strategy re-scores them.
MIN_CANDIDATES = 100
# α: the share of its best neighbour's relevance (same add) a memory borrows (see the module docstring).
CONTEXT_WEIGHT = 0.75
# The part of its previous neighbour's relevance a memory borrows when that neighbour asked nothing (a question
# lends its whole relevance to the turn after it: the answer).
UNASKED_SHARE = 0.25
# β and γ: how much more a memory said by a speaker the query names, or valid from a time it names, counts.
FACET_BOOST = 0.5
# λ: the share of its session's best relevance (the best ranked memory of its add) a memory borrows.
SESSION_WEIGHT = 0.25
_DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Signals:
    """Which memory signals a search uses (module docstring): the conversation ``context``, the ``speakers`` a query
    names, the ``dates`` it names, the best match of each memory's ``sessions``. All on by default."""

    context: bool = True
    speakers: bool = True
    dates: bool = True
    sessions: bool = True


@dataclass(frozen=True, slots=True)
class Query:
    """A validated search: ``query`` within ``scope``; at most ``top_k`` results scoring ≥ ``score_threshold``;
    ``filters`` over ``metadata`` (vector-store filter grammar); optional ``memory_types`` and ``created_after`` /
    ``created_before``; ``include_invalidated`` shows closed memories too; ``as_of`` time-travels."""

    query: str
    scope: MemoryScope
    top_k: int = 10
    score_threshold: float = 0.0
    filters: Any = None
    memory_types: tuple[str, ...] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    strategy: Strategy = field(default_factory=lambda: STRATEGIES[DEFAULT_STRATEGY])
    include_invalidated: bool = False
    as_of: datetime | None = None
    signals: Signals = field(default_factory=Signals)


@dataclass(frozen=True, slots=True)
class Hit:
    """One result: the ``memory``, its ``score`` and how it was made (``details``)."""

    memory: Memory
    score: float
    details: dict[str, float | None]


@dataclass(slots=True)
class _Evidence:
    """Per candidate row id: cosine ``similarity`` (clamped at 0) and normalised ``keyword`` score."""

    similarity: dict[int, float] = field(default_factory=dict)
    keyword: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Searched:
    """A search's ``hits`` and the question it asked: the ``text`` it embedded and matched by keywords (the query
    without the scope's speakers it names) and that text's embedding ``vector`` (``embedder.dimension`` floats;
    None when the strategy weighs no vectors). A caller searching more for the same question (a response's
    earlier exchanges) reuses both, so everything recalled for one question answers the same question."""

    hits: list[Hit]
    text: str
    vector: Sequence[float] | None


def search(conn: psycopg.Connection, settings: Settings, tenant_id: str, query: Query, *, embedder: Embedder,
           now: datetime | None = None, touch: bool = True) -> list[Hit]:
    """The best memories of the scope for ``query.query``, best first (see the module docstring). Counts an access
    of each returned memory when ``touch``. The one implementation of memory search: ``POST /v1/memories/search``,
    the mem0 client, the CLI and recall inside a response (:func:`searched`) all rank through it.

    Raises:
        InvalidRequestError: malformed ``filters``.
        UpstreamError: embedding the query failed.
    """
    return searched(conn, settings, tenant_id, query, embedder=embedder, now=now, touch=touch).hits


def searched(conn: psycopg.Connection, settings: Settings, tenant_id: str, query: Query, *, embedder: Embedder,
             now: datetime | None = None, touch: bool = True) -> Searched:
    """:func:`search`, with the question it asked (:class:`Searched`): the text and the one embedding of it.

    Raises:
        InvalidRequestError: malformed ``filters``.
        UpstreamError: embedding the query failed.
    """
    now = now or datetime.now(UTC)
    where = compile_filter(query.filters, column="metadata")
    scope = _scope(conn, tenant_id, query, embedder.dimension)
    depth = max(MIN_CANDIDATES, 4 * query.top_k)
    # The scope's speakers the query names count through the speaker facet, not as words of the query.
    named = _named_speakers(query.query, _speakers(conn, tenant_id, scope)) if query.signals.speakers else set()
    text = _without_names(query.query, named)
    vector: Sequence[float] | None = None
    if query.strategy.vector > 0:
        started = time.perf_counter()
        vector = embedder.embed([text])[0]
        observability.record(observability.QUERY_EMBEDDING_LATENCY, (time.perf_counter() - started) * 1000.0)
    ranked = rank(conn, MEMORIES, scope, [text], embedder=embedder, settings=settings, depth=depth,
                  where=where, indexed_rows=0, vectors=[vector] if vector is not None else None,
                  weights=Weights(embedding=query.strategy.vector or 1e-9, text=query.strategy.text or 1e-9),
                  backend=PartitionLegs(settings, query.scope.named()) if scope.user is not None else PGVECTOR,
                  similarities=False)  # (the candidates statement reads every candidate's similarity)
    if not ranked:
        return Searched([], text, vector)
    best_keyword = max((r.keyword or 0.0) for r in ranked) or 1.0
    keyword = {r.id: (r.keyword or 0.0) / best_keyword for r in ranked}
    neighbours, params = None, None
    if query.signals.context:
        neighbours, params = scope.predicate, dict(scope.params)
        if where is not None:
            neighbours = sql.SQL("({}) AND {}").format(neighbours, where.expression)
            params.update(where.params)
    rows = store.candidates(conn, tenant_id, list(keyword), vector=vector, neighbours=neighbours,
                             params=params, user_id=scope.user.user_id if scope.user is not None else None)
    # Every candidate's exact similarity (also of those only the keyword leg found, and of added neighbours);
    # neighbours neither leg returned have no keyword score.
    evidence = _Evidence({row.seq: max(0.0, row.similarity or 0.0) for row in rows},
                         {row.seq: keyword.get(row.seq, 0.0) for row in rows})
    relevance = {row.seq: _relevance(row.seq, evidence, query.strategy) for row in rows}
    sessions: dict[tuple[datetime, str, str | None], float] = {}
    if query.signals.sessions:
        for row in rows:
            sessions[row.session] = max(sessions.get(row.session, 0.0), relevance[row.seq])
    named &= {row.speaker for row in rows}  # a speaker none of the candidates has says nothing about them
    windows = time_windows(query.query) if query.signals.dates else []
    if not any(w.contains(row.valid_from) for w in windows for row in rows):
        windows = []  # a time no candidate is from says nothing about them
    facts = _QueryFacts(relevance, sessions, named, windows, {row.seq for row in rows if row.asks})
    ordered = sorted(((row, _score(row, evidence, facts, query.strategy, settings, now)[1]) for row in rows),
                     key=lambda s: (-s[1], s[0].seq))
    kept = [row for row, score in ordered if score >= query.score_threshold][:query.top_k]
    scored = [_score(row, evidence, facts, query.strategy, settings, now, details=True) for row in kept]
    memories = store.fetch_by_seq(conn, tenant_id, [row.seq for row, _, _ in scored], touch=touch)
    return Searched([Hit(memories[row.seq], score, details) for row, score, details in scored if row.seq in memories],
                    text, vector)


def decay(memory: Memory | store.Ranking, settings: Settings, now: datetime) -> float:
    """The bounded decay factor in [floor, 1] (1 for pinned memories) from the days since the memory was last
    used (its last access, else its creation)."""
    if memory.pinned:
        return 1.0
    return max(settings.memory_decay_floor, _freshness(memory, settings, now))


def _freshness(memory: Memory | store.Ranking, settings: Settings, now: datetime) -> float:
    """0.5 ^ (days since last used / half-life), in (0, 1]; last used = last access, else creation."""
    since = max(memory.created_at, memory.last_accessed_at or memory.created_at)
    days = max(0.0, (now - since).total_seconds() / _DAY_S)
    return math.pow(0.5, days / max(settings.memory_half_life_days, 1e-9))


def _name_forms(speaker: str) -> set[str]:
    """How a query may name ``speaker``: the whole name or its first word."""
    return {speaker.strip(), speaker.split()[0]}


def _named_speakers(query: str, speakers: Sequence[str | None]) -> set[str]:
    """The ``speakers`` that ``query`` names (:func:`_name_forms`, as a word, case-insensitively)."""
    named = set()
    for speaker in set(speakers):
        if speaker is None or not speaker.strip():
            continue
        if any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", query, re.IGNORECASE) for form in _name_forms(speaker)):
            named.add(speaker)
    return named


def _without_names(query: str, named: set[str]) -> str:
    """``query`` without the names of the ``named`` speakers (each form, with a possessive ``'s``), spaces
    collapsed; ``query`` itself when nothing else would be left."""
    text = query
    for form in sorted({f for speaker in named for f in _name_forms(speaker)}, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(form)}(?:['’]s)?(?!\w)", " ", text, flags=re.IGNORECASE)
    text = " ".join(text.split())
    return text if re.search(r"\w", text) else query


@dataclass(frozen=True, slots=True)
class _QueryFacts:
    """What one search knows about its ranked rows besides their own evidence: each row's ``relevance``, the best
    relevance in each ``session`` (empty: the signal is off), the ``named`` speakers, the time ``windows`` and the
    rows ``asking`` something (:attr:`store.Ranking.asks`)."""

    relevance: dict[int, float]
    sessions: dict[tuple[datetime, str, str | None], float]
    named: set[str]
    windows: list[TimeWindow]
    asking: set[int]


def _relevance(seq: int, evidence: _Evidence, strategy: Strategy) -> float:
    """``(w_v · similarity + w_t · keyword) / (w_v + w_t)`` of row ``seq`` (0 for a row not ranked)."""
    textual = strategy.vector + strategy.text
    if seq not in evidence.similarity or not textual:
        return 0.0
    return (strategy.vector * evidence.similarity[seq] + strategy.text * evidence.keyword[seq]) / textual


def _base(match: float, freshness: float, importance: float, strategy: Strategy) -> float:
    """``match · (w_v + w_t + w_r · freshness + w_i · importance) / (w_v + w_t + w_r + w_i)`` in [0, 1]: freshness
    and importance scale the match instead of adding to it (module docstring). A strategy weighing neither vectors
    nor text has no match to scale, and ranks by ``(w_r · freshness + w_i · importance) / (w_r + w_i)``; 0 when
    every weight is 0."""
    textual = strategy.vector + strategy.text
    prior = strategy.recency * freshness + strategy.importance * importance
    if textual <= 0:
        return prior / (strategy.recency + strategy.importance) if strategy.recency + strategy.importance else 0.0
    return match * (textual + prior) / (textual + strategy.recency + strategy.importance)


def _score(row: store.Ranking, evidence: _Evidence, facts: _QueryFacts, strategy: Strategy, settings: Settings,
           now: datetime, *, details: bool = False) -> tuple[store.Ranking, float, dict[str, float | None]]:
    """``(row, score, details)`` of one candidate (module docstring); ``details`` empty unless asked for (they
    are built for the rows returned only)."""
    def relevance(seq: int | None) -> float:
        return facts.relevance.get(seq, 0.0) if seq is not None else 0.0

    own = relevance(row.seq)
    match = own
    if row.previous is not None or row.following is not None:
        before = relevance(row.previous) * (1.0 if row.previous in facts.asking else UNASKED_SHARE)
        match = (own + CONTEXT_WEIGHT * max(before, relevance(row.following))) / (1 + CONTEXT_WEIGHT)
    context = match
    session = None
    if facts.sessions:
        session = facts.sessions[row.session]
        match = (match + SESSION_WEIGHT * session) / (1 + SESSION_WEIGHT)
    speaker = time_match = None
    if facts.named:
        speaker = 1.0 if row.speaker in facts.named else 0.0
        match *= (1 + FACET_BOOST * speaker) / (1 + FACET_BOOST)
    if facts.windows:
        time_match = 1.0 if any(w.contains(row.valid_from) for w in facts.windows) else 0.0
        match *= (1 + FACET_BOOST * time_match) / (1 + FACET_BOOST)
    freshness = _freshness(row, settings, now)
    base = _base(match, freshness, row.importance, strategy)
    factor = decay(row, settings, now)
    if not details:
        return row, round(base * factor, 6), {}
    parts: dict[str, float | None] = {
        "relevance": round(own, 6), "context": round(context, 6),
        "session": round(session, 6) if session is not None else None,
        "vector": round(evidence.similarity.get(row.seq, 0.0), 6),
        "keyword": round(evidence.keyword.get(row.seq, 0.0), 6), "speaker": speaker, "time": time_match,
        "recency": round(freshness, 6), "importance": round(row.importance, 6), "decay": round(factor, 6)}
    return row, round(base * factor, 6), parts


def _speakers(conn: psycopg.Connection, tenant_id: str, scope: Scope) -> list[str]:
    """The scope's speakers (:func:`store.speakers`); in a user's history, its body's (kept with its partition)
    and those of the scope's tail rows."""
    if scope.user is None:
        return store.speakers(conn, tenant_id, scope.predicate, scope.params)
    tail, tail_params = tail_predicate(MEMORIES, scope.user)
    found = store.tail_speakers(conn, tenant_id, scope.predicate, scope.params, tail, tail_params)
    return sorted(set(scope.user.speakers) | set(found))


def _scope(conn: psycopg.Connection, tenant_id: str, query: Query, dimension: int) -> Scope:
    """The search's scope: the ids it names, what is visible (status, validity, types, dates); in a user's history
    (a scope naming a user), that user's partition (:mod:`chalicelib.search.partitions`, read once here); BM25's
    collection the rows of the ids it names, in any status. ``dimension``: the query vector's."""
    predicate, params = store.scope_predicate(query.scope)
    collection = predicate
    user_id = user_partition(MEMORIES, tenant_id, query.scope.named())
    user = lookup(conn, MEMORIES, tenant_id, user_id, dimension) if user_id is not None else None
    parts: list[sql.Composable] = [predicate]
    if query.as_of is not None:
        parts.append(sql.SQL(f"{active.valid_at(at='%(as_of)s')} AND {active.live(at='%(as_of)s')}"))
        params["as_of"] = query.as_of
    elif query.include_invalidated:
        parts.append(sql.SQL(active.live()))
    else:
        parts.append(sql.SQL(active.ACTIVE))
    if query.memory_types:
        parts.append(sql.SQL("memory_type = ANY(%(types)s)"))
        params["types"] = list(query.memory_types)
    if query.created_after is not None:
        parts.append(sql.SQL("created_at >= %(created_after)s"))
        params["created_after"] = query.created_after
    if query.created_before is not None:
        parts.append(sql.SQL("created_at <= %(created_before)s"))
        params["created_before"] = query.created_before
    return Scope(tenant_ids=(tenant_id,), predicate=sql.SQL(" AND ").join(parts), params=params, rows=1,
                 collection=collection, user=user)


def scopes_of(hits: Sequence[Hit]) -> list[dict[str, str | None]]:
    """The scopes of ``hits`` (for logs and audits)."""
    return [h.memory.scope.as_dict() for h in hits]
