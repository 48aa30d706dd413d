"""Memory in the agent loop (issue 13's benchmark): LoCoMo replayed through ``/v1/responses`` with memory on, then
every question asked with recall on — evidence recall of the injected ``<memory>`` block against
``/v1/memories/search`` on the same stored memories, and the latency recall adds to a response.

Setup. Engram's server runs in this process (``engram_cli.server.start``: Chalice's threaded local server, port 0,
the hashing embedder, one local dispatcher thread for the memory jobs, no scheduler, so no consolidation runs
meanwhile) on a fresh database ``engram_bench_responses_memory``; the model is the scripted fake chat server
(tests/fakes/chat_server.py). Clients: the official ``openai`` SDK (responses, conversations) and ``httpx``
(``/v1/memories/search``, which the SDK has no method for).

Replay (``--conversations`` of the LoCoMo shared half, ``../shared/data/locomo/locomo_shared.json``; skipped
cleanly when absent). Each session is one conversation (``client.conversations.create``); its turns are taken two
by two: the first is the user's ``input``, the second is what the fake model answers (pushed on its queue before
the call). Each ``responses.create`` names the conversation and ``extra_body={"memory": {"user_id": <the LoCoMo
conversation id>}}`` (recall and remember on, the defaults), so each completed turn dispatches one remember job:
the exchange is stored and the memory model (the fake again, through its ``responder``) extracts facts. The fake's
extraction answers each of the two turns verbatim as one fact (a turn that is not a LoCoMo turn, e.g. the filler
answer to an odd last turn, is not extracted), and its decision answers ``ADD`` for every new fact, so the stored
memories are the same texts ``benchmarks/memory.py`` stores with ``infer: false``, now written through the
responses path (at the wall-clock time: no session dates, and no speaker names — a responses turn has none). The
benchmark waits until every job has completed.

Questions (categories 1-4 with evidence, as in ``benchmarks/memory.py``), each in its conversation's scope:

* ``/v1/memories/search`` with ``top_k`` 10: the ranked memories → LoCoMo turn ids (by text) → Recall@5/10,
  All@10, nDCG@10;
* ``/v1/responses`` with ``memory: {user_id, remember: false, top_k: 10, score_threshold: 0}`` and
  ``include=["memory_search_call.results"]``: the block's memories (same ranking as the search: the same
  ``recall.search`` runs) and its earlier exchanges (similarity ≥ 0.65; an exchange stands for its two turns).
  Scored twice: the block's memories alone (Recall@10 against the search's), and the whole block (memories, then
  exchanges) — "block recall" is the share of evidence turns anywhere in the block;
* the same with ``exchange_threshold`` :data:`LOW_EXCHANGE_THRESHOLD` (0.3): what earlier exchanges add when they
  are let in (with the hashing embedder few reach the default 0.65);
* ``/v1/responses`` with the default memory settings (``top_k`` 5, ``score_threshold`` 0.18): the block a client gets
  without tuning — its recall and size;
* ``/v1/responses`` without memory: the baseline for the added latency.

The replay waits for every remember job (their ids from each response's ``usage.memory``), then ``ANALYZE``s the
tables it wrote, as autovacuum would, before the questions are asked.

Latency: the recall step's own time inside the response (``memory_search_call.usage.latency_ms``: pool checkout,
query embedding, memory search and exchange search; target p50 ≤ 25 ms with the hashing embedder, in-process), next
to the same search (top 10, no threshold) through ``/v1/memories/search`` in the same run (its wall time, HTTP
included: the recall step must stay within 1.2× of it), and the response's wall time with default recall minus
without memory (p50s; includes HTTP to the fake model). ``--backend qdrant`` puts the users' memories and exchanges
on Qdrant (the embedded engine, written after each remember job).

``--embedder local`` runs the server with the local MiniLM instead (recall quality comparable with
``benchmarks/memory.py``; the latency target is the hashing embedder's).

    ENGRAM_DATA_DIR=/tmp/bench-memory ./dev python benchmarks/responses_memory.py
    ./dev python benchmarks/responses_memory.py --conversations 2 --max-questions 100
"""

from __future__ import annotations

import os

# Before chalicelib.observability is imported: no EMF documents or request log lines distorting the timings.
os.environ["ENGRAM_METRICS"] = "off"
os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from common import bench_settings, percentile
from memory import CATEGORIES, LOCOMO, METRICS, Question, Session, database_for, load_locomo, ms, score

from chalicelib.memory.model import text_hash
from chalicelib.responses.memory import DEFAULT_SCORE_THRESHOLD, DEFAULT_TOP_K

TENANT = "bench-responses-memory"
DATABASE = "engram_bench_responses_memory"
SEARCH_TOP_K = 10
# A lower bar for earlier exchanges than the default 0.65 (seed 004), to see what exchanges add to the block.
LOW_EXCHANGE_THRESHOLD = 0.3
# The block a response gets with the default memory settings (chalicelib.responses.memory).
DEFAULT_BLOCK = f"default block (top {DEFAULT_TOP_K}, threshold {DEFAULT_SCORE_THRESHOLD})"
FILLER = "OK."  # the fake model's answer when nothing is scripted (an odd session's last turn, the questions)


# --------------------------------------------------------------------------------------------- the fake model

class FakeModel:
    """The fake chat server's ``responder``: answers the memory model's calls (extraction: the conversation's
    LoCoMo turns verbatim as facts; decision: ``ADD`` every new fact) and leaves the conversation's calls to the
    queue (None). ``turns`` is every LoCoMo turn text (what may be extracted)."""

    def __init__(self, turns: set[str]) -> None:
        self.turns = turns
        self.extractions = 0
        self.decisions = 0

    def __call__(self, body: dict[str, Any]) -> Any:
        from tests.fakes.chat_server import text

        system = body["messages"][0].get("content") or "" if body["messages"][0].get("role") == "system" else ""
        user = body["messages"][-1].get("content") or ""
        if system.startswith("You are a memory extraction system"):
            self.extractions += 1
            conversation = user.split("Conversation:\n", 1)[-1]
            facts = []
            for line in conversation.split("\n"):
                said = line.split(": ", 1)[-1] if line.startswith(("user: ", "assistant: ")) else None
                if said is not None and said in self.turns:
                    facts.append({"fact": said, "confidence": 0.9, "importance": 0.5, "tags": ["locomo"]})
            return text(json.dumps({"facts": facts}))
        if system.startswith("You maintain a user's long-term memory"):
            self.decisions += 1
            payload = json.loads(user)
            return text(json.dumps({"decisions": [{"fact": n["id"], "event": "ADD"} for n in payload["new"]]}))
        return None


# --------------------------------------------------------------------------------------------- replay

@dataclasses.dataclass
class Replay:
    """What the replay stored: per user, memory text hash → turn id; per response id, its turns; job ids; the
    recall latencies (ms) of the replay's own responses; wall seconds."""

    by_text: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    by_response: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    jobs: list[str] = dataclasses.field(default_factory=list)
    recall_ms: list[float] = dataclasses.field(default_factory=list)
    responses: int = 0
    seconds: float = 0.0
    jobs_wait_s: float = 0.0


def memory_item(response: Any) -> dict[str, Any] | None:
    """The response's ``memory_search_call`` output item (a plain dict), or None."""
    for item in response.output:
        data = item.model_dump() if hasattr(item, "model_dump") else dict(item)
        if data.get("type") == "memory_search_call":
            return data
    return None


def memory_usage(response: Any) -> dict[str, Any] | None:
    """The response's ``usage.memory`` (what recall did, and the remember job's id), or None."""
    usage = response.usage.model_dump() if response.usage is not None else {}
    memory: dict[str, Any] | None = usage.get("memory")
    return memory


def replay(client: Any, fake: Any, sessions: list[Session]) -> Replay:
    """Each session as one conversation, its turns two by two as (input, the model's answer)."""
    from tests.fakes.chat_server import text

    out = Replay()
    started = time.perf_counter()
    for session in sessions:
        turns = out.by_text.setdefault(session.user_id, {})
        for dia_id, _, _, said in session.turns:
            turns.setdefault(text_hash(said), dia_id)
        conversation = client.conversations.create(metadata={"locomo": f"{session.user_id}/{session.number}"})
        for i in range(0, len(session.turns), 2):
            pair = session.turns[i:i + 2]
            fake.push(text(pair[1][3] if len(pair) == 2 else FILLER))
            response = client.responses.create(model="fake-model", input=pair[0][3], conversation=conversation.id,
                                               extra_body={"memory": {"user_id": session.user_id}})
            assert response.status == "completed", response.error
            out.responses += 1
            out.by_response[response.id] = tuple(t[0] for t in pair)
            usage = memory_usage(response)  # the item itself is shown only when included
            if usage is not None:
                out.recall_ms.append(usage["latency_ms"])
                if usage.get("memory_job_id"):
                    out.jobs.append(usage["memory_job_id"])
        print(f"  replayed {session.user_id} session {session.number}: {len(session.turns)} turns "
              f"({time.perf_counter() - started:.0f}s)", flush=True)
    out.seconds = time.perf_counter() - started
    return out


def wait_for_jobs(conn: psycopg.Connection, expected: int, timeout_s: float) -> dict[str, int]:
    """Wait until the tenant's ``expected`` memory jobs are all completed or failed; returns the count by status.

    Raises:
        TimeoutError: still running after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        counts: dict[str, int] = dict(conn.execute("SELECT status, count(*) FROM memory_jobs WHERE tenant_id = %s "
                                                   "GROUP BY 1", (TENANT,)).fetchall())
        if counts.get("completed", 0) + counts.get("failed", 0) >= expected:
            return counts
        if time.monotonic() > deadline:
            raise TimeoutError(f"memory jobs still running after {timeout_s:.0f}s: {counts}")
        time.sleep(0.5)


# --------------------------------------------------------------------------------------------- questions

def ranked_turns(results: list[dict[str, Any]], by_text: dict[str, str], exchange_turns: dict[str, tuple[str, ...]],
                 *, exchanges: bool) -> list[str]:
    """The turn ids of a ranked result list, deduplicated in order: a memory maps by its text, an exchange (when
    ``exchanges``) to its two turns."""
    out: list[str] = []
    for r in results:
        if r.get("type", "memory") == "memory":
            found = [by_text.get(text_hash(r.get("text") or r.get("memory") or ""))]
        elif exchanges:
            found = list(exchange_turns.get(r["id"], ()))
        else:
            continue
        for dia_id in found:
            if dia_id is not None and dia_id not in out:
                out.append(dia_id)
    return out


def mean_metrics(rows: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per group, the mean of each metric (and ``n``)."""
    return {group: {m: statistics.fmean(v[m] for v in values) for m in values[0]} | {"n": len(values)}
            for group, values in rows.items() if values}


def ask(client: Any, http: Any, questions: list[Question], replayed: Replay,
        exchange_turns: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """Every question through the four paths (module docstring); returns metrics and timings."""
    variants = ("memories/search", "block memories (top 10)", "block (top 10, memories + exchanges)",
                f"block (top 10, exchanges at similarity >= {LOW_EXCHANGE_THRESHOLD})",
                DEFAULT_BLOCK)
    per: dict[str, dict[str, list[dict[str, float]]]] = {v: {} for v in variants}
    recall_ms: dict[str, list[float]] = {"top 10": [], "default": []}
    wall: dict[str, list[float]] = {"default recall": [], "no memory": [], "memories/search": []}
    block_sizes: dict[str, list[int]] = {"top 10": [], "default": [], "low exchange threshold": []}
    for n, q in enumerate(questions):
        by_text = replayed.by_text[q.user_id]
        t0 = time.perf_counter()
        found = http.post("/memories/search", json={"query": q.text, "user_id": q.user_id, "top_k": SEARCH_TOP_K})
        wall["memories/search"].append(time.perf_counter() - t0)
        found.raise_for_status()
        body = found.json()
        hits = body.get("data", body.get("results", []))
        rankings = {"memories/search": ranked_turns(hits, by_text, exchange_turns, exchanges=False)}

        r = client.responses.create(model="fake-model", input=q.text, include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": q.user_id, "remember": False,
                                                           "top_k": SEARCH_TOP_K, "score_threshold": 0.0}})
        item = memory_item(r) or {"results": []}
        results = item.get("results") or []
        rankings["block memories (top 10)"] = ranked_turns(results, by_text, exchange_turns, exchanges=False)
        rankings["block (top 10, memories + exchanges)"] = ranked_turns(results, by_text, exchange_turns,
                                                                         exchanges=True)
        recall_ms["top 10"].append(item.get("usage", {}).get("latency_ms", float("nan")))
        block_sizes["top 10"].append(len(results))

        r = client.responses.create(model="fake-model", input=q.text, include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": q.user_id, "remember": False,
                                                           "top_k": SEARCH_TOP_K, "score_threshold": 0.0,
                                                           "exchange_threshold": LOW_EXCHANGE_THRESHOLD}})
        results = (memory_item(r) or {}).get("results") or []
        rankings[variants[3]] = ranked_turns(results, by_text, exchange_turns, exchanges=True)
        block_sizes["low exchange threshold"].append(len(results))

        t0 = time.perf_counter()
        r = client.responses.create(model="fake-model", input=q.text, include=["memory_search_call.results"],
                                    extra_body={"memory": {"user_id": q.user_id, "remember": False}})
        wall["default recall"].append(time.perf_counter() - t0)
        item = memory_item(r) or {"results": []}
        results = item.get("results") or []
        rankings[DEFAULT_BLOCK] = ranked_turns(results, by_text, exchange_turns,
                                                                         exchanges=True)
        recall_ms["default"].append(item.get("usage", {}).get("latency_ms", float("nan")))
        block_sizes["default"].append(len(results))

        t0 = time.perf_counter()
        client.responses.create(model="fake-model", input=q.text)
        wall["no memory"].append(time.perf_counter() - t0)

        for variant, ranked in rankings.items():
            values = score(ranked, q.evidence)
            values["block recall"] = len(q.evidence & set(ranked)) / len(q.evidence)
            per[variant].setdefault("overall", []).append(values)
            per[variant].setdefault(str(q.category), []).append(values)
        if (n + 1) % 100 == 0:
            print(f"  asked {n + 1}/{len(questions)}", flush=True)
    return {"metrics": {v: mean_metrics(rows) for v, rows in per.items()}, "recall_ms": recall_ms, "wall_s": wall,
            "block_sizes": block_sizes}


# --------------------------------------------------------------------------------------------- main

def fresh_settings(fake_url: str, embedder: str, backend: str = "pgvector") -> Any:
    """Settings on a freshly created benchmark database: the ``embedder`` (``hashing`` or ``local``), the fake as
    chat and memory model, users' memories on ``backend``."""
    overrides: dict[str, Any] = {"embedding_provider": embedder, "memory_backend": backend}
    if embedder == "hashing":
        overrides["embedding_model"] = "hashing-384"
    base = bench_settings(**overrides, chat_base_url=fake_url, chat_api_key="sk-bench", chat_max_retries=0,
                          memory_model="fake-memory-model", summary_threshold_tokens=1_000_000)
    from chalicelib.store.db import database_url

    with psycopg.connect(database_url(base), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE)))
    return database_for(base, DATABASE)


def quiet_server() -> None:
    """No per-request output from the server (as ``benchmarks/api.py``): EMF off, powertools logger at WARNING,
    Chalice's access log dropped."""
    import chalice.local

    from chalicelib import observability

    observability.configure(False)
    observability.get_logger().setLevel(logging.WARNING)
    chalice.local.ChaliceRequestHandler.log_message = lambda self, *a, **kw: None


def run(args: argparse.Namespace) -> dict[str, Any]:
    import httpx
    import openai

    from tests.fakes.chat_server import FakeChatServer, text

    from chalicelib import deps
    from chalicelib.dispatch.local import LocalDispatcher
    from chalicelib.embed import build_embedder
    from chalicelib.embed.hashing import HashingEmbedder
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect, one
    from engram_cli import server as local_server

    sessions, questions, _, skipped = load_locomo(args.locomo)
    users = list(dict.fromkeys(s.user_id for s in sessions))[: args.conversations]
    sessions = [s for s in sessions if s.user_id in users]
    questions = [q for q in questions if q.user_id in users][: args.max_questions]
    model = FakeModel({t[3] for s in sessions for t in s.turns})
    quiet_server()
    with FakeChatServer(responder=model, default=text(FILLER)) as fake:
        settings = fresh_settings(fake.base_url, args.embedder, args.backend)
        embedder = HashingEmbedder(384) if args.embedder == "hashing" else build_embedder(settings)
        running = local_server.start(settings, host="127.0.0.1", port=0, embedder=embedder, worker_threads=0)
        dispatcher = LocalDispatcher(settings, threads=1)
        deps.set_dispatcher(dispatcher)
        try:
            with connect(settings) as conn:
                key = api_keys.create_key(conn, TENANT)[1]
            client = openai.OpenAI(base_url=running.url, api_key=key, max_retries=0, timeout=60)
            http = httpx.Client(base_url=running.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            print(f"LoCoMo: {len(users)} conversations, {len(sessions)} sessions, "
                  f"{sum(len(s.turns) for s in sessions)} turns, {len(questions)} questions ({skipped} skipped in "
                  f"the whole file); {embedder.model} embedder, fake model", flush=True)
            replayed = replay(client, fake, sessions)
            started = time.perf_counter()
            with connect(settings) as conn:
                statuses = wait_for_jobs(conn, len(replayed.jobs), args.jobs_timeout)
                replayed.jobs_wait_s = time.perf_counter() - started
                # Planner statistics of the tables just written, as autovacuum gathers them within a minute: with
                # none, recall's candidates statement took a nested loop at 20-48 ms instead of 4 ms (2026-11-27).
                conn.execute("ANALYZE memories, exchanges")
                stored = one(conn.execute("SELECT count(*) FROM memories WHERE tenant_id = %s", (TENANT,)))[0]
                exchange_turns = {e: replayed.by_response.get(r, ()) for e, r in conn.execute(
                    "SELECT id, response_id FROM exchanges WHERE tenant_id = %s", (TENANT,)).fetchall()}
            print(f"replay: {replayed.responses} responses in {replayed.seconds:.0f}s, {len(replayed.jobs)} remember "
                  f"jobs ({statuses}; {replayed.jobs_wait_s:.0f}s waited after the replay), {stored} memories, "
                  f"{len(exchange_turns)} exchanges; fake model: {model.extractions} extractions, "
                  f"{model.decisions} decisions", flush=True)
            asked = ask(client, http, questions, replayed, exchange_turns)
        finally:
            dispatcher.shutdown()
            running.stop()
    return report(args, replayed, asked, stored, len(exchange_turns), statuses, len(questions))


def report(args: argparse.Namespace, replayed: Replay, asked: dict[str, Any], stored: int, exchanges: int,
           statuses: dict[str, int], questions: int) -> dict[str, Any]:
    """Print the tables; returns the JSON summary."""
    columns = (*METRICS, "block recall")
    for variant, means in asked["metrics"].items():
        print(f"\n{variant}")
        print(f"  {'category':16s} {'n':>4s} " + " ".join(f"{m:>12s}" for m in columns))
        for group in ("overall", "1", "2", "3", "4"):
            if group in means:
                label = "overall (1-4)" if group == "overall" else f"{group} {CATEGORIES[int(group)]}"
                print(f"  {label:16s} {int(means[group]['n']):4d} "
                      + " ".join(f"{means[group][m]:12.3f}" for m in columns))
    search_r10 = asked["metrics"]["memories/search"]["overall"]["R@10"]
    block_r10 = asked["metrics"]["block memories (top 10)"]["overall"]["R@10"]
    whole = asked["metrics"]["block (top 10, memories + exchanges)"]["overall"]
    ms_of = asked["recall_ms"]
    wall = asked["wall_s"]
    added = percentile(wall["default recall"], 50) - percentile(wall["no memory"], 50)
    print(f"\n  {'measure':58s} {'value':>14s} {'target':>14s}")
    print(f"  {'Recall@10, memories/search':58s} {search_r10:14.3f}")
    print(f"  {'Recall@10, the block memories (top 10)':58s} {block_r10:14.3f} {'>= search':>14s}")
    print(f"  {'Recall@10, the whole block (memories, then exchanges)':58s} {whole['R@10']:14.3f} {'>= search':>14s}")
    print(f"  {'evidence anywhere in the whole block (top 10)':58s} {whole['block recall']:14.3f}")
    low = asked["metrics"][f"block (top 10, exchanges at similarity >= {LOW_EXCHANGE_THRESHOLD})"]["overall"]
    print(f"  {'evidence anywhere in the block, exchanges >= ' + str(LOW_EXCHANGE_THRESHOLD):58s} "
          f"{low['block recall']:14.3f}")
    sizes = asked["block_sizes"]
    print(f"  {'results in the block, mean (top 10 / exch. 0.3 / default)':58s} "
          f"{statistics.fmean(sizes['top 10']):5.1f} /{statistics.fmean(sizes['low exchange threshold']):5.1f} /"
          f"{statistics.fmean(sizes['default']):4.1f}")
    print(f"  {'recall step in a response, default (p50 / p95 ms)':58s} "
          f"{percentile(ms_of['default'], 50):6.1f} / {percentile(ms_of['default'], 95):5.1f} {'p50 <= 25':>14s}")
    print(f"  {'recall step in a response, top 10 (p50 / p95 ms)':58s} "
          f"{percentile(ms_of['top 10'], 50):6.1f} / {percentile(ms_of['top 10'], 95):5.1f}")
    print(f"  {'recall step during the replay (p50 / p95 ms)':58s} "
          f"{percentile(replayed.recall_ms, 50):6.1f} / {percentile(replayed.recall_ms, 95):5.1f}")
    print(f"  {'response wall time, default recall (p50 / p95 ms)':58s} {ms(wall['default recall']):>14s}")
    print(f"  {'response wall time, no memory (p50 / p95 ms)':58s} {ms(wall['no memory']):>14s}")
    print(f"  {'added by recall to a response (difference of p50s, ms)':58s} {added * 1000:14.1f}")
    print(f"  {'/v1/memories/search wall time (p50 / p95 ms)':58s} {ms(wall['memories/search']):>14s}")
    ratio = percentile(ms_of["top 10"], 50) / (percentile(wall["memories/search"], 50) * 1000)
    print(f"  {'recall step (top 10) ÷ the same search through /v1/memories/search (p50s)':58s} {ratio:14.2f} "
          f"{'<= 1.2':>14s}")
    return {"embedder": args.embedder, "conversations": args.conversations, "questions": questions, "responses": replayed.responses,
            "replay_s": round(replayed.seconds, 1), "jobs": statuses, "jobs_wait_s": round(replayed.jobs_wait_s, 1),
            "memories": stored, "exchanges": exchanges, "metrics": asked["metrics"],
            "recall_ms_p50": round(percentile(ms_of["default"], 50), 2),
            "recall_ms_p95": round(percentile(ms_of["default"], 95), 2),
            "recall_top10_ms_p50": round(percentile(ms_of["top 10"], 50), 2),
            "replay_recall_ms_p50": round(percentile(replayed.recall_ms, 50), 2),
            "search_wall_ms_p50": round(percentile(wall["memories/search"], 50) * 1000, 2),
            "recall_to_search_p50": round(ratio, 3), "backend": args.backend,
            "added_ms_p50": round(added * 1000, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--conversations", type=int, default=None, help="replay only the first N conversations")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--embedder", choices=("hashing", "local"), default="hashing",
                        help="the server's embedder (the latency target is the hashing embedder's)")
    parser.add_argument("--jobs-timeout", type=float, default=900.0, help="seconds to wait for the remember jobs")
    parser.add_argument("--backend", default="pgvector",
                        help="the vector backend users' memories and exchanges live on (ENGRAM_MEMORY_BACKEND)")
    args = parser.parse_args()
    if not args.locomo.is_file():
        print(f"skipped: {args.locomo} is not present (../shared/data/locomo)")
        print(json.dumps({"benchmark": "responses_memory", "skipped": True}))
        return 0
    out = {"benchmark": "responses_memory", **run(args)}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
