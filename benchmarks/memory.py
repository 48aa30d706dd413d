"""Agent memory through Engram's real code path: recall quality on LoCoMo, scale, and the model path's overhead.

Three parts (``--parts``, default all three):

* ``recall`` — LoCoMo's shared half (``../shared/data/locomo/locomo_shared.json``; task
  ``locomo-evidence-retrieval-v1`` of its ``SOURCES.md``). Every conversation's sessions are added in-process with
  ``write.add`` and ``infer: false``: one add per session, one memory per turn, the session's date as
  ``timestamp``, ``user_id`` = the conversation id, the speaker as the message ``name`` (the first speaker's turns
  as ``user``, the other's as ``assistant``), an image caption appended as ``" [shares image: <caption>]"`` like
  the task's document text. Every question of categories 1-4 is searched in its conversation's scope with
  ``recall.search`` (top 20, no access counted, ``now`` = the day after the last session: the questions are
  asked once the conversation is over); a memory maps back to its turn by its text. Metrics as the task defines
  them (macro averages): Recall@5/10/20, All@10, nDCG@10, per category and overall, for each recall variant
  (an ablation: the memory signals added one at a time, then the default with each one left out, then the
  default as if every memory had been written live at its session's time, so that freshness and decay count
  from then; ``--decay-floor`` changes the floor for that; ``--aged`` evaluates it without the rest of the
  ablation). Embeddings go through Engram's content-hash embedding cache, so only the first run embeds (the
  local MiniLM: minutes on 2 cores).
* ``scale`` — ``--memories`` memories (default 100,000) over ``--users`` users (1,000) in one tenant per backend
  (``--backends``, default pgvector and qdrant: the tenant's memory backend) with the hashing embedder: add
  throughput (``infer: false``, ``--batch`` messages per add, the write to the backend after it included where the
  backend takes one) and scoped search p50/p95, with ``--explain`` the plans of the statements reading the user's
  rows.
* ``per-user`` (or ``--per-user``) — scoped search p50/p95 against the size of one user's history (``--sizes``,
  default 100, 1,000, 10,000, 100,000 memories per user, one user each, one tenant per backend), indexed by the
  index_memories job's work, searches interleaved across sizes and backends, with each size's p50 as a multiple of
  the smallest's: one column per backend.
* ``overhead`` — ``infer: true`` adds against the scripted fake chat server (tests/fakes/chat_server.py) answering
  at once: Engram's own time per add (total minus the time the fake spent answering, measured as the client's
  time inside the chat backend's ``complete``), p50/p95.

Each part prints a table; the script ends with one JSON line.

    ENGRAM_DATA_DIR=/tmp/bench-memory ./dev python benchmarks/memory.py --parts recall
    ./dev python benchmarks/memory.py --parts scale,overhead --memories 100000 --users 1000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from common import SHARED_DATA, bench_settings, percentile

from chalicelib.embed import build_embedder
from chalicelib.embed.base import Embedder, Tokenizer
from chalicelib.ingest.engine import embed_with_cache
from chalicelib.memory import recall, write
from chalicelib.memory.model import MemoryScope, text_hash
from chalicelib.store.db import connect, database_url
from chalicelib.store.vector_stores import ensure_tenant

TENANT = "bench-memory"
LOCOMO = SHARED_DATA / "locomo" / "locomo_shared.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
TOP_K = 20


# --------------------------------------------------------------------------------------------- shared helpers

class CachedEmbedder:
    """An :class:`Embedder` reading and filling Engram's embedding cache (tenant :data:`TENANT`), so a second run
    embeds nothing."""

    def __init__(self, conn: psycopg.Connection, inner: Embedder) -> None:
        self._conn, self._inner = conn, inner
        self.computed = 0

    @property
    def model(self) -> str:
        return self._inner.model

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def max_input_tokens(self) -> int:
        return self._inner.max_input_tokens

    @property
    def tokenizer(self) -> Tokenizer:
        return self._inner.tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors, computed = embed_with_cache(self._conn, TENANT, self._inner, list(texts))
        self.computed += computed
        return vectors


def database_for(settings: Any, name: str) -> Any:
    """Settings whose database is ``name`` on the configured server (created when missing)."""
    base = database_url(settings)
    with psycopg.connect(base, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return dataclasses.replace(settings, database_url=psycopg.conninfo.make_conninfo(base, dbname=name))


def ms(values: list[float]) -> str:
    """``p50 / p95`` of seconds, in milliseconds."""
    return f"{percentile(values, 50) * 1000:.1f} / {percentile(values, 95) * 1000:.1f}"


# --------------------------------------------------------------------------------------------- part 1: recall

@dataclasses.dataclass(frozen=True)
class Question:
    """One scored LoCoMo question: ``qa_id`` ("<conv>:<qa>"), its conversation's ``user_id``, text, category and
    normalised evidence turn ids."""

    qa_id: str
    user_id: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Session:
    """One session's add: the conversation id, session number, date and ``(dia_id, role, speaker, text)`` turns."""

    user_id: str
    number: int
    date: datetime
    turns: list[tuple[str, str, str, str]]


def load_locomo(path: Path) -> tuple[list[Session], list[Question], dict[str, datetime], int]:
    """The sessions to add, the scored questions, each conversation's last session date, and how many questions
    were skipped (category 5, or no evidence left)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions: list[Session] = []
    questions: list[Question] = []
    last: dict[str, datetime] = {}
    skipped = 0
    for conv_index, record in enumerate(data):
        conv, user_id = record["conversation"], record["sample_id"]
        roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        turn_ids: set[str] = set()
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        for number in numbers:
            turns = conv.get(f"session_{number}") or []
            if not turns:
                continue
            date = datetime.strptime(conv[f"session_{number}_date_time"], SESSION_DATE).replace(tzinfo=UTC)
            rows = []
            for turn in turns:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares image: {turn['blip_caption']}]"
                rows.append((turn["dia_id"], roles.get(turn["speaker"], "user"), turn["speaker"], text))
                turn_ids.add(turn["dia_id"])
            sessions.append(Session(user_id, number, date, rows))
            last[user_id] = max(last.get(user_id, date), date)
        for qa_index, qa in enumerate(record["qa"]):
            if qa["category"] not in CATEGORIES:
                skipped += 1
                continue
            evidence = {f"D{int(s)}:{int(t)}" for item in qa.get("evidence", []) for s, t in EVIDENCE.findall(item)}
            evidence &= turn_ids
            if not evidence:
                skipped += 1
                continue
            questions.append(Question(f"{conv_index}:{qa_index}", user_id, qa["question"], qa["category"],
                                      frozenset(evidence)))
    return sessions, questions, last, skipped


def ingest_locomo(conn: psycopg.Connection, settings: Any, sessions: list[Session],
                  embedder: Embedder, tenant: str = TENANT) -> tuple[dict[str, dict[str, str]], dict[str, float]]:
    """Add every session to ``tenant`` (skipped for a conversation already stored whole); returns ``{user_id:
    {memory text hash: dia_id}}`` (the first turn with that text: later exact duplicates are NOOP) and timings."""
    ensure_tenant(conn, tenant)
    mapping: dict[str, dict[str, str]] = {}
    expected: dict[str, int] = {}
    for session in sessions:
        turns = mapping.setdefault(session.user_id, {})
        for dia_id, _, _, text in session.turns:
            turns.setdefault(text_hash(text), dia_id)
        expected[session.user_id] = len(turns)
    stored: dict[str, int] = dict(conn.execute("SELECT user_id, count(*) FROM memories WHERE tenant_id = %s "
                                               "GROUP BY 1", (tenant,)).fetchall())
    timing = {"add_s": 0.0, "memories_added": 0}
    todo = {u for u, n in expected.items() if stored.get(u) != n}
    for user_id in todo:
        if stored.get(user_id):
            conn.execute("DELETE FROM memories WHERE tenant_id = %s AND user_id = %s", (tenant, user_id))
    started = time.perf_counter()
    for session in sessions:
        if session.user_id not in todo:
            continue
        request = write.AddRequest(
            messages=tuple(write.InputMessage(role, text, speaker) for _, role, speaker, text in session.turns),
            scope=MemoryScope(user_id=session.user_id), infer=False, timestamp=session.date)
        result = write.add(conn, settings, tenant, request, embedder=embedder, backend=None, model=None)
        timing["memories_added"] += sum(c.event == "ADD" for c in result.changes)
        print(f"  added {session.user_id} session {session.number}: {len(session.turns)} turns "
              f"({time.perf_counter() - started:.0f}s)", flush=True)
    timing["add_s"] = time.perf_counter() - started
    return mapping, timing


def ndcg10(ranked: list[str], relevant: frozenset[str]) -> float:
    """Binary-gain nDCG@10; the ideal ranking puts min(|relevant|, 10) relevant turns first."""
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return dcg / idcg


def score(ranked: list[str], relevant: frozenset[str]) -> dict[str, float]:
    """The task's per-question metrics for a deduplicated ranking of turn ids."""
    out = {f"R@{k}": len(relevant & set(ranked[:k])) / len(relevant) for k in (5, 10, 20)}
    out["All@10"] = float(relevant <= set(ranked[:10]))
    out["nDCG@10"] = ndcg10(ranked, relevant)
    return out


METRICS = ("R@5", "R@10", "R@20", "All@10", "nDCG@10")
# The ablation's names of recall.Signals' fields.
SIGNAL_LABELS = {"context": "conversation context", "speakers": "speakers", "dates": "dates",
                 "sessions": "sessions"}
DEFAULT_VARIANT = "default (all signals)"


def evaluate(conn: psycopg.Connection, settings: Any, questions: list[Question], mapping: dict[str, dict[str, str]],
             last: dict[str, datetime], embedder: Embedder, make_query: Callable[[Question], recall.Query],
             now_mode: str, tenant: str = TENANT) -> tuple[dict[str, dict[str, float]], list[float],
                                                           dict[str, list[str]]]:
    """Per category (and ``overall``) mean metrics, the per-question search times (s) and the rankings (each
    question's ranked memory texts' hashes)."""
    per: dict[str, list[dict[str, float]]] = {}
    times: list[float] = []
    rankings: dict[str, list[str]] = {}
    for q in questions:
        now = last[q.user_id] + timedelta(days=1) if now_mode == "end" else datetime.now(UTC)
        started = time.perf_counter()
        hits = recall.search(conn, settings, tenant, make_query(q), embedder=embedder, now=now, touch=False)
        times.append(time.perf_counter() - started)
        ranked: list[str] = []
        for hit in hits:
            dia_id = mapping[q.user_id].get(text_hash(hit.memory.memory))
            if dia_id is not None and dia_id not in ranked:
                ranked.append(dia_id)
        rankings[q.qa_id] = [text_hash(hit.memory.memory) for hit in hits]
        values = score(ranked, q.evidence)
        per.setdefault("overall", []).append(values)
        per.setdefault(str(q.category), []).append(values)
    means = {group: {m: sum(v[m] for v in rows) / len(rows) for m in METRICS} | {"n": len(rows)}
             for group, rows in per.items()}
    return means, times, rankings


def print_recall_table(name: str, means: dict[str, dict[str, float]], times: list[float]) -> None:
    print(f"\n{name}   (search p50/p95 {ms(times)} ms)")
    print(f"  {'category':16s} {'n':>4s} " + " ".join(f"{m:>7s}" for m in METRICS))
    for group in ("overall", "1", "2", "3", "4"):
        if group not in means:
            continue
        row = means[group]
        label = "overall (1-4)" if group == "overall" else f"{group} {CATEGORIES[int(group)]}"
        print(f"  {label:16s} {int(row['n']):4d} " + " ".join(f"{row[m]:7.3f}" for m in METRICS))


def recall_variants(args: argparse.Namespace) -> dict[str, Callable[[Question], recall.Query]]:
    """The recall variants to compare: name → how a question becomes a :class:`recall.Query`. The ablation adds
    the memory signals one at a time (in :class:`recall.Signals` order), then leaves each out of the default."""

    def make(signals: recall.Signals, strategy: recall.Strategy | None = None) -> Callable[[Question], recall.Query]:
        def query(q: Question) -> recall.Query:
            return recall.Query(query=q.text, scope=MemoryScope(user_id=q.user_id), top_k=TOP_K, signals=signals,
                                strategy=strategy or recall.STRATEGIES[recall.DEFAULT_STRATEGY])
        return query

    names = [f.name for f in dataclasses.fields(recall.Signals)]
    off = recall.Signals(**{name: False for name in names})
    variants: dict[str, Callable[[Question], recall.Query]] = {}
    if args.ablation:
        variants["no memory signals (hybrid relevance only)"] = make(off)
        for i in range(len(names) - 1):
            label = " + ".join(SIGNAL_LABELS[n] for n in names[:i + 1])
            variants[f"+ {label}"] = make(dataclasses.replace(off, **{n: True for n in names[:i + 1]}))
    variants[DEFAULT_VARIANT] = make(recall.Signals())
    if args.ablation:
        for name in names:
            variants[f"default without {SIGNAL_LABELS[name]}"] = make(dataclasses.replace(recall.Signals(),
                                                                                          **{name: False}))
    for name in args.strategies:
        variants[f"default signals, strategy {name}"] = make(recall.Signals(), recall.STRATEGIES[name])
    return variants


def run_recall(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {"embedding_provider": args.embedding_provider}
    if args.decay_floor is not None:
        overrides["memory_decay_floor"] = args.decay_floor
    settings = database_for(bench_settings(**overrides), "engram_bench_memory_locomo")
    sessions, questions, last, skipped = load_locomo(args.locomo)
    if args.max_questions:
        questions = questions[: args.max_questions]
    conn = connect(settings)
    embedder = CachedEmbedder(conn, build_embedder(settings))
    print(f"LoCoMo: {len(sessions)} sessions, {sum(len(s.turns) for s in sessions)} turns, {len(questions)} "
          f"questions scored ({skipped} skipped); embedder {embedder.model}", flush=True)
    started = time.perf_counter()
    mapping, timing = ingest_locomo(conn, settings, sessions, embedder)
    print(f"stored: {timing['memories_added']} memories added now in {timing['add_s']:.0f}s", flush=True)
    embedder.embed([q.text for q in questions])  # warm the cache in one batch (queries are embedded per search)
    print(f"embedding: {embedder.computed} texts computed now ({time.perf_counter() - started:.0f}s in all)",
          flush=True)
    results: dict[str, Any] = {}
    for name, make_query in recall_variants(args).items():
        means, times, rankings = evaluate(conn, settings, questions, mapping, last, embedder, make_query, args.now)
        print_recall_table(name, means, times)
        results[name] = {"metrics": means, "search_ms_p50": round(percentile(times, 50) * 1000, 2),
                         "search_ms_p95": round(percentile(times, 95) * 1000, 2)}
        if args.dump_rankings:
            Path(args.dump_rankings).write_text(json.dumps(rankings))
    if args.ablation or args.aged:
        # As if each memory had been written live, at its session's time: freshness and decay then count from the
        # session (the questions come the day after the last one). Rolled back afterwards.
        name = "default, memories created at their session times (decay active)"
        with conn.transaction(force_rollback=True):
            conn.execute("UPDATE memories SET created_at = valid_from WHERE tenant_id = %s", (TENANT,))
            means, times, _ = evaluate(conn, settings, questions, mapping, last, embedder,
                                       recall_variants(argparse.Namespace(ablation=False, strategies=[]))[
                                           DEFAULT_VARIANT], args.now)
        print_recall_table(name, means, times)
        results[name] = {"metrics": means, "search_ms_p50": round(percentile(times, 50) * 1000, 2),
                         "search_ms_p95": round(percentile(times, 95) * 1000, 2)}
    agreement = _other_backends(conn, settings, args, sessions, questions, last, embedder, results, mapping)
    conn.close()
    return {"questions": len(questions), "model": embedder.model, "now": args.now,
            "decay_floor": settings.memory_decay_floor, "variants": results, "backends": agreement}


def _other_backends(conn: psycopg.Connection, settings: Any, args: argparse.Namespace, sessions: list[Session],
                    questions: list[Question], last: dict[str, datetime], embedder: Embedder,
                    results: dict[str, Any], reference_mapping: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The default recall with the memories on each other backend of ``--backends`` (a tenant of its own, the same
    sessions added the same way and indexed), and how often its top 10 is pgvector's: the same memories in the
    same order, and the same memories."""
    out: dict[str, Any] = {}
    default = recall_variants(argparse.Namespace(ablation=False, strategies=[]))[DEFAULT_VARIANT]
    _, _, reference = evaluate(conn, settings, questions, reference_mapping, last, embedder, default, args.now)
    for backend in [b for b in args.backends if b != "pgvector"]:
        tenant = f"{TENANT}-{backend}"
        ensure_tenant(conn, tenant)
        conn.execute("UPDATE tenants SET memory_backend = %s WHERE id = %s", (backend, tenant))
        mapping, _ = ingest_locomo(conn, settings, sessions, embedder, tenant)
        _index_histories(conn, settings, tenant)
        means, times, rankings = evaluate(conn, settings, questions, mapping, last, embedder, default, args.now,
                                          tenant)
        print_recall_table(f"{DEFAULT_VARIANT}, memories on {backend}", means, times)
        ordered = sum(rankings[q][:10] == reference[q][:10] for q in reference) / len(reference)
        same = sum(set(rankings[q][:10]) == set(reference[q][:10]) for q in reference) / len(reference)
        print(f"  top 10 the same as pgvector's: {ordered:.3f} of questions in the same order, {same:.3f} as sets "
              "(target >= 0.95)")
        results[f"{DEFAULT_VARIANT}, memories on {backend}"] = {
            "metrics": means, "search_ms_p50": round(percentile(times, 50) * 1000, 2),
            "search_ms_p95": round(percentile(times, 95) * 1000, 2)}
        out[backend] = {"top10_same_order": round(ordered, 4), "top10_same_set": round(same, 4)}
    return out


# --------------------------------------------------------------------------------------------- part 2: scale

SCALE_TENANT = "bench-memory-scale"
SCALE_GENERATOR = "syllables-v1"  # bump when the text generator changes: the stored data is then rebuilt
_SYLLABLES = ("ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "da", "pe", "zo", "ni", "ta", "re", "mo", "lu")


def vocabulary(size: int, seed: int) -> list[str]:
    """``size`` distinct pseudo-words of 2-4 syllables (deterministic for ``seed``)."""
    import random

    rng, words = random.Random(seed), set[str]()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def sentences(rng: Any, words: list[str], count: int) -> list[str]:
    """``count`` memory-like texts of 6-16 words drawn with Zipf-like frequencies (rank r has weight 1 / r), so
    BM25 sees common and rare terms as in real text."""
    weights = [1 / (r + 1) for r in range(len(words))]
    return [" ".join(rng.choices(words, weights=weights, k=rng.randint(6, 16))).capitalize() + "."
            for _ in range(count)]


def explain(conn: psycopg.Connection, statement: Any, params: dict[str, Any]) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` lines of one statement."""
    rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}").format(statement), params).fetchall()
    return [r[0] for r in rows]


def scale_plans(conn: psycopg.Connection, settings: Any, tenant: str, user_id: str, text: str,
                embedder: Embedder) -> dict[str, list[str]]:
    """The plans of a scoped search's statements that read the user's rows (the tail's vector and keyword legs, the
    candidates with their neighbours) for one user: the tail from the ``memories_user`` index, the neighbours by
    probes of ``memories_session``."""
    from pgvector import Vector

    from chalicelib.memory import store as memory_store
    from chalicelib.search import partitions
    from chalicelib.search.corpus import MEMORIES

    query = recall.Query(query=text, scope=MemoryScope(user_id=user_id))
    scope = recall._scope(conn, tenant, query, embedder.dimension)
    assert scope.user is not None
    q = Vector(embedder.embed([text])[0])
    search = partitions.PartitionSearch(MEMORIES, scope, None, {"user_id": user_id})
    check, params = search.check()
    tail, tail_params = partitions.tail_predicate(MEMORIES, scope.user)
    vector_sql = sql.SQL(partitions._TAIL_VECTOR).format(id=MEMORIES.row_id(), table=MEMORIES.identifier(),
                                                         check=check, tail=tail)
    vector_params = {**params, **tail_params, "q": q, "dim": embedder.dimension, "limit": 100}
    seqs = [r[0] for r in conn.execute("SELECT seq FROM memories WHERE tenant_id = %s AND user_id = %s LIMIT 100",
                                       (tenant, user_id)).fetchall()]
    columns = sql.SQL(memory_store._RANKING_COLUMNS).format(m=sql.Identifier("x"))
    candidates_sql = sql.SQL(memory_store._CANDIDATES_PROBED).format(
        c_columns=sql.SQL(memory_store._RANKING_COLUMNS).format(m=sql.Identifier("m")),
        before=sql.SQL(memory_store._PROBE).format(columns=columns, side=sql.SQL("<"), order=sql.SQL("DESC"),
                                                   scope=scope.predicate),
        after=sql.SQL(memory_store._PROBE).format(columns=columns, side=sql.SQL(">"), order=sql.SQL(""),
                                                  scope=scope.predicate))
    candidates_params = {**scope.params, "tenant": tenant, "seqs": seqs, "q": q, "dim": embedder.dimension,
                         "neighbour_user": user_id}
    return {"vector leg (tail)": explain(conn, vector_sql, vector_params),
            "candidates (ranking rows, neighbours, similarities)": explain(conn, candidates_sql, candidates_params)}


def run_scale(args: argparse.Namespace) -> dict[str, Any]:
    """``--memories`` over ``--users`` users in one tenant per backend (``--backends``): add throughput and scoped
    search p50/p95 on each."""
    settings = database_for(bench_settings(embedding_provider="hashing", embedding_model="hashing-384"),
                            "engram_bench_memory_scale")
    conn = connect(settings)
    embedder = build_embedder(settings)
    out = {backend: _scale_one(conn, settings, embedder, args, backend) for backend in args.backends}
    conn.close()
    return out


def _scale_one(conn: psycopg.Connection, settings: Any, embedder: Embedder, args: argparse.Namespace,
               backend: str) -> dict[str, Any]:
    import random

    tenant = SCALE_TENANT if backend == "pgvector" else f"{SCALE_TENANT}-{backend}"
    ensure_tenant(conn, tenant)
    conn.execute("UPDATE tenants SET memory_backend = %s WHERE id = %s", (backend, tenant))
    per_user = max(1, args.memories // args.users)
    users = [f"user-{i:05d}" for i in range(args.users)]
    rng = random.Random(args.seed)
    words = vocabulary(args.vocabulary, args.seed)
    marker = f"{SCALE_GENERATOR}/{args.seed}/{args.vocabulary}/{per_user}/{args.batch}"
    stored = conn.execute("SELECT count(*), count(DISTINCT user_id), min(metadata->>'generator') FROM memories "
                          "WHERE tenant_id = %s", (tenant,)).fetchone()
    assert stored is not None
    add_times: list[float] = []
    added = 0
    if args.rebuild or stored[0] != per_user * len(users) or stored[2] != marker:
        conn.execute("DELETE FROM memories WHERE tenant_id = %s", (tenant,))
        conn.execute("DELETE FROM memory_history WHERE tenant_id = %s", (tenant,))
        conn.execute("VACUUM ANALYZE memories")
        base = datetime(2025, 1, 1, tzinfo=UTC)
        started = time.perf_counter()
        for u, user_id in enumerate(users):
            texts = sentences(rng, words, per_user)
            for b in range(0, per_user, args.batch):
                batch = texts[b:b + args.batch]
                request = write.AddRequest(
                    messages=tuple(write.InputMessage("user" if i % 2 == 0 else "assistant", t, f"speaker{i % 2}")
                                   for i, t in enumerate(batch)),
                    scope=MemoryScope(user_id=user_id), infer=False, metadata={"generator": marker},
                    timestamp=base + timedelta(hours=u, minutes=b))
                t0 = time.perf_counter()
                result = write.add(conn, settings, tenant, request, embedder=embedder, backend=None, model=None)
                add_times.append(time.perf_counter() - t0)
                added += sum(c.event == "ADD" for c in result.changes)
            if (u + 1) % max(1, len(users) // 10) == 0:
                elapsed = time.perf_counter() - started
                print(f"  {backend}: {u + 1}/{len(users)} users, {added} memories, {added / elapsed:.0f} memories/s",
                      flush=True)
        add_s = time.perf_counter() - started
        conn.execute("ANALYZE memories")
    else:
        add_s = 0.0
        print(f"  {backend}: reusing {stored[0]} stored memories ({marker})", flush=True)
    rows, seconds = _index_histories(conn, settings, tenant)
    # Scoped searches: a few words of one of the user's memories, for random users.
    samples = conn.execute(
        "SELECT user_id, memory FROM memories WHERE tenant_id = %s ORDER BY random() LIMIT %s",
        (tenant, args.queries + 20)).fetchall()
    search_times: list[float] = []
    returned = []
    load_before = _load()
    for i, (user_id, text) in enumerate(samples):
        tokens = text.rstrip(".").split()
        query_text = " ".join(rng.sample(tokens, min(len(tokens), 4)))
        query = recall.Query(query=query_text, scope=MemoryScope(user_id=user_id), top_k=10)
        t0 = time.perf_counter()
        hits = recall.search(conn, settings, tenant, query, embedder=embedder)
        if i >= 20:  # the first 20 warm caches and are not timed
            search_times.append(time.perf_counter() - t0)
            returned.append(len(hits))
    out: dict[str, Any] = {
        "memories": per_user * len(users), "users": len(users), "batch": args.batch,
        "add_memories_per_s": round(added / add_s, 1) if add_s else None,
        "add_ms_p50": round(percentile(add_times, 50) * 1000, 2) if add_times else None,
        "add_ms_p95": round(percentile(add_times, 95) * 1000, 2) if add_times else None,
        "indexed_rows": rows, "indexed_s": round(seconds, 1),
        "search_ms_p50": round(percentile(search_times, 50) * 1000, 2),
        "search_ms_p95": round(percentile(search_times, 95) * 1000, 2),
        "results_mean": round(statistics.fmean(returned), 2), "load_before": load_before, "load_after": _load()}
    print(f"\nscale ({backend}): {out['memories']} memories, {out['users']} users, one tenant (hashing embedder; "
          f"load average {load_before} before the searches, {out['load_after']} after)")
    print(f"  {'measure':44s} {'value':>14s} {'target':>10s}")
    if add_s:
        print(f"  {'add, infer false, ' + str(args.batch) + ' messages/add (memories/s)':44s} "
              f"{out['add_memories_per_s']:14.0f} {'>= 1500':>10s}")
        print(f"  {'add latency p50 / p95 (ms per add)':44s} {ms(add_times):>14s}")
    print(f"  {'scoped search p50 / p95 (ms, top 10)':44s} {ms(search_times):>14s} {'<= 15 / 40':>10s}")
    if args.explain:
        for name, lines in scale_plans(conn, settings, tenant, samples[0][0], samples[0][1], embedder).items():
            print(f"\n  EXPLAIN {name}:")
            for line in lines:
                print("    " + (line if len(line) <= 160 else line[:157] + "..."))
    return out


# --------------------------------------------------------------------------------------------- per-user curve

PER_USER_TENANT = "bench-memory-per-user"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def _per_user_tenant(backend: str) -> str:
    return PER_USER_TENANT if backend == "pgvector" else f"{PER_USER_TENANT}-{backend}"


def _index_histories(conn: psycopg.Connection, settings: Any, tenant: str) -> tuple[int, float]:
    """Run the index_memories job's work for ``tenant`` until nothing is left: ``(rows indexed, seconds)``."""
    from chalicelib.search.backends import partition_sync

    started, rows = time.perf_counter(), 0
    while True:
        counts, more = partition_sync.index_pending(conn, settings, tenant_id=tenant,
                                                    deadline=time.monotonic() + 60)
        rows += counts.rows
        if not more:
            return rows, time.perf_counter() - started
        print(f"    indexing {tenant}: {rows} rows so far", flush=True)


def run_per_user(args: argparse.Namespace) -> dict[str, Any]:
    """Scoped search latency against the size of one user's history: one user per size in ``--sizes`` (100, 1,000,
    10,000 and 100,000 memories by default) in one tenant per backend (``--backends``: the tenant's memories live
    there, tenants.memory_backend), added with ``infer: false`` in adds of ``--batch`` messages, indexed by the
    index_memories job's work (a history long enough for its backend gets a body; pgvector waits for 2,000 rows),
    then ``--queries`` searches per size and backend interleaved (size by size, backend by backend, in turn, so load
    and caches affect each alike), a few words of one of the user's memories each."""
    import random

    settings = database_for(bench_settings(embedding_provider="hashing", embedding_model="hashing-384"),
                            "engram_bench_memory_per_user")
    conn = connect(settings)
    embedder = build_embedder(settings)
    rng = random.Random(args.seed)
    words = vocabulary(args.vocabulary, args.seed)
    marker = f"{SCALE_GENERATOR}/{args.seed}/{args.vocabulary}/{args.batch}"
    added_rates: dict[str, dict[int, float]] = {}
    indexed: dict[str, dict[str, float]] = {}
    for backend in args.backends:
        tenant = _per_user_tenant(backend)
        ensure_tenant(conn, tenant)
        conn.execute("UPDATE tenants SET memory_backend = %s WHERE id = %s", (backend, tenant))
        for size in args.sizes:
            user_id = f"pu-{size}"
            stored = conn.execute("SELECT count(*), min(metadata->>'generator') FROM memories WHERE tenant_id = %s "
                                  "AND user_id = %s", (tenant, user_id)).fetchone()
            assert stored is not None
            if not args.rebuild and stored[0] == size and stored[1] == marker:
                print(f"  {backend}: reusing {size} memories of {user_id}", flush=True)
                continue
            conn.execute("DELETE FROM memories WHERE tenant_id = %s AND user_id = %s", (tenant, user_id))
            texts = sentences(random.Random(f"{args.seed}/{size}"), words, size)
            base = datetime(2025, 1, 1, tzinfo=UTC)
            started = time.perf_counter()
            for b in range(0, size, args.batch):
                batch = texts[b:b + args.batch]
                request = write.AddRequest(
                    messages=tuple(write.InputMessage("user" if i % 2 == 0 else "assistant", t, f"speaker{i % 2}")
                                   for i, t in enumerate(batch)),
                    scope=MemoryScope(user_id=user_id), infer=False, metadata={"generator": marker},
                    timestamp=base + timedelta(minutes=b))
                write.add(conn, settings, tenant, request, embedder=embedder, backend=None, model=None)
            added_rates.setdefault(backend, {})[size] = size / (time.perf_counter() - started)
            print(f"  {backend}: {user_id}: {size} memories at {added_rates[backend][size]:.0f} memories/s "
                  "(the add, and its write after it where the backend takes one)", flush=True)
        rows, seconds = _index_histories(conn, settings, tenant)
        indexed[backend] = {"rows": rows, "seconds": round(seconds, 1)}
        if rows:
            print(f"  {backend}: indexed {rows} rows in {seconds:.0f} s ({rows / seconds:.0f} rows/s)", flush=True)
    conn.execute("VACUUM ANALYZE memories")
    samples = {(backend, size): [r[0] for r in conn.execute(
        "SELECT memory FROM memories WHERE tenant_id = %s AND user_id = %s ORDER BY random() LIMIT %s",
        (_per_user_tenant(backend), f"pu-{size}", args.queries + 10)).fetchall()]
        for backend in args.backends for size in args.sizes}
    load_before = _load()
    times: dict[tuple[str, int], list[float]] = {key: [] for key in samples}
    for i in range(args.queries + 10):
        for size in args.sizes:
            for backend in args.backends:
                texts = samples[(backend, size)]
                tokens = texts[i % len(texts)].rstrip(".").split()
                query = recall.Query(query=" ".join(rng.sample(tokens, min(len(tokens), 4))),
                                     scope=MemoryScope(user_id=f"pu-{size}"), top_k=10)
                t0 = time.perf_counter()
                recall.search(conn, settings, _per_user_tenant(backend), query, embedder=embedder, touch=False)
                if i >= 10:  # the first 10 rounds warm caches and are not timed
                    times[(backend, size)].append(time.perf_counter() - t0)
    load_after = _load()
    conn.close()
    out: dict[str, Any] = {}
    for backend in args.backends:
        base_p50 = percentile(times[(backend, args.sizes[0])], 50)
        out[backend] = {size: {"p50_ms": round(percentile(t, 50) * 1000, 2), "p95_ms": round(percentile(t, 95) * 1000, 2),
                               "ratio_p50": round(percentile(t, 50) / base_p50, 2)}
                        for (b, size), t in times.items() if b == backend}
    print(f"\nper-user curve: scoped search, top 10, {args.queries} queries per size and backend interleaved "
          f"(hashing embedder; load average {load_before} before, {load_after} after)")
    header = "".join(f" {backend + ' p50 / p95 (ms)':>28s} {'x p50':>7s}" for backend in args.backends)
    print(f"  {'memories per user':>18s}{header}")
    for size in args.sizes:
        cells = "".join(f" {out[b][size]['p50_ms']:>13.1f} / {out[b][size]['p95_ms']:<12.1f} "
                        f"{out[b][size]['ratio_p50']:>7.2f}" for b in args.backends)
        print(f"  {size:>18,d}{cells}")
    return {**out, "add_memories_per_s": {b: {k: round(v, 1) for k, v in r.items()} for b, r in added_rates.items()},
            "indexed": indexed, "load_before": load_before, "load_after": load_after}


# --------------------------------------------------------------------------------------------- part 3: overhead

OVERHEAD_TENANT = "bench-memory-overhead"


class TimedBackend:
    """A chat backend that records the seconds each ``complete`` call took (the model's share of an add: the
    HTTP round trip to the fake and its answer)."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.seconds = inner, 0.0

    def complete(self, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.complete(request)
        finally:
            self.seconds += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def fake_model(body: dict[str, Any]) -> Any:
    """The fake's answers: an extraction call gets one fact per sentence of the conversation's last line, a
    decision call ``ADD`` for every new fact."""
    from tests.fakes.chat_server import text

    system = body["messages"][0].get("content") or ""
    user = body["messages"][-1].get("content") or ""
    if system.startswith("You are a memory extraction system"):
        line = user.rsplit("\n", 1)[-1].split(":", 1)[-1]
        facts = [{"fact": f.strip() + ".", "confidence": 0.9, "importance": 0.6, "tags": ["bench"]}
                 for f in line.split(".") if f.strip()]
        return text(json.dumps({"facts": facts}))
    payload = json.loads(user)
    return text(json.dumps({"decisions": [{"fact": n["id"], "event": "ADD"} for n in payload["new"]]}))


def run_overhead(args: argparse.Namespace) -> dict[str, Any]:
    import random

    from tests.fakes.chat_server import FakeChatServer

    from chalicelib.chat import routing
    from chalicelib.memory import llm

    rng = random.Random(args.seed)
    words = vocabulary(2000, args.seed + 1)
    with FakeChatServer(responder=fake_model) as fake:
        settings = database_for(bench_settings(embedding_provider="hashing", embedding_model="hashing-384",
                                               chat_base_url=fake.base_url, chat_api_key="sk-bench",
                                               chat_max_retries=0, memory_model="fake-memory-model"),
                                "engram_bench_memory_overhead")
        conn = connect(settings)
        ensure_tenant(conn, OVERHEAD_TENANT)
        conn.execute("DELETE FROM memories WHERE tenant_id = %s", (OVERHEAD_TENANT,))
        embedder = build_embedder(settings)
        model = llm.required_model(settings)
        backend = TimedBackend(routing.build_backend(settings, "openai"))
        totals, models, own, calls = [], [], [], []
        for i in range(args.adds + 10):
            user_id = f"user-{i % 20:02d}"
            message = " ".join(sentences(rng, words, 2))
            request = write.AddRequest(messages=(write.InputMessage("user", message),),
                                       scope=MemoryScope(user_id=user_id), infer=True)
            backend.seconds = 0.0
            started = time.perf_counter()
            result = write.add(conn, settings, OVERHEAD_TENANT, request, embedder=embedder, backend=backend,
                               model=model)
            total = time.perf_counter() - started
            if i >= 10:  # warm-up: connections, first plans
                totals.append(total)
                models.append(backend.seconds)
                own.append(total - backend.seconds)
                calls.append(result.model_calls)
        conn.close()
    out = {"adds": len(totals), "model_calls_mean": round(statistics.fmean(calls), 2),
           "total_ms_p50": round(percentile(totals, 50) * 1000, 2),
           "model_ms_p50": round(percentile(models, 50) * 1000, 2),
           "own_ms_p50": round(percentile(own, 50) * 1000, 2), "own_ms_p95": round(percentile(own, 95) * 1000, 2)}
    print(f"\noverhead of an inline add with infer true ({out['adds']} adds over 20 users, "
          f"{out['model_calls_mean']} model calls per add, the fake answering at once; hashing embedder)")
    print(f"  {'measure':44s} {'p50 / p95 ms':>14s} {'target':>10s}")
    print(f"  {'total per add':44s} {ms(totals):>14s}")
    print(f"  {'inside the model calls (HTTP to the fake)':44s} {ms(models):>14s}")
    print(f"  {'Engram own time (total - model calls)':44s} {ms(own):>14s} {'p50 <= 30':>10s}")
    return out


# --------------------------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="recall,scale,overhead")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--embedding-provider", default="local", help="recall part's embedder (default local)")
    parser.add_argument("--now", choices=("end", "wall"), default="end",
                        help="recall's 'now': the day after the conversation's last session, or the wall clock")
    parser.add_argument("--strategies", type=lambda s: [x for x in s.split(",") if x], default=[],
                        help="also evaluate these ranking strategies (semantic,keyword,...)")
    parser.add_argument("--no-ablation", dest="ablation", action="store_false",
                        help="evaluate the default recall only")
    parser.add_argument("--decay-floor", type=float, default=None,
                        help="recall: override ENGRAM_MEMORY_DECAY_FLOOR (matters in the 'created at their session "
                             "times' variant)")
    parser.add_argument("--aged", action="store_true",
                        help="recall: also evaluate the 'created at their session times' variant without the "
                             "ablation (to compare decay floors)")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--memories", type=int, default=100_000, help="scale: memories in all")
    parser.add_argument("--users", type=int, default=1000, help="scale: users they are spread over")
    parser.add_argument("--batch", type=int, default=50, help="scale: messages per add")
    parser.add_argument("--vocabulary", type=int, default=5000, help="scale: distinct words of the texts")
    parser.add_argument("--queries", type=int, default=200, help="scale: timed searches")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-user", action="store_true",
                        help="the per-user curve (also as --parts per-user): scoped search against one user's history")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[100, 1000, 10_000, 100_000], help="per-user: memories per user, smallest first")
    parser.add_argument("--backends", type=lambda s: [x for x in s.split(",") if x], default=["pgvector", "qdrant"],
                        help="per-user and scale: the vector backends memories live on (one column each)")
    parser.add_argument("--adds", type=int, default=200, help="overhead: timed adds")
    parser.add_argument("--rebuild", action="store_true", help="scale: add the memories again")
    parser.add_argument("--explain", action="store_true", help="scale: print the search statements' plans")
    parser.add_argument("--dump-rankings", default=None, help="write the last variant's rankings to this file")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    out: dict[str, Any] = {"benchmark": "memory"}
    if "recall" in parts:
        out["recall"] = run_recall(args)
    if "scale" in parts:
        out["scale"] = run_scale(args)
    if "overhead" in parts:
        out["overhead"] = run_overhead(args)
    if "per-user" in parts or args.per_user:
        out["per_user"] = run_per_user(args)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
