"""The memory lifecycle at scale (issue 14's benchmark): each scheduled memory job's pass over ``--memories``
memories with 20 % near-duplicates, the duplicates consolidation removes from recall, and LoCoMo recall before vs
after consolidation.

Data (database ``engram_bench_lifecycle`` on the configured server; rebuilt each run). Tenant
``bench-lifecycle``: ``--users`` scopes (``user_id``), each with ``--memories / --users`` memories added through
``write.add`` (``infer: false``, 50 messages per add, the hashing embedder — as ``benchmarks/memory.py --parts
scale``): 80 % distinct memory-like texts (the scale part's Zipf-weighted pseudo-words), then 20 % near-duplicates
of random earlier memories of the same scope, added in later adds (a verbatim add only refuses *exact* duplicates,
so they are stored, as they are when an agent restates a fact). Three kinds of near-duplicate, a third each:

* ``punctuation`` — the same words, a comma inserted and one word capitalised (a different text hash; cosine 1);
* ``filler`` — one filler word ("really", "also", "still", "actually") inserted at a random place;
* ``dropped`` — one word left out (texts of at least 8 words; else a filler).

Without a memory model consolidation merges exact and near duplicates only: cosine ≥ ``memory_near_duplicate``
(0.95). Each duplicate's cosine to its original is reported per kind, so the removal rate can be read against
that contract. ``--fake-model`` runs the passes with the scripted fake chat server as the memory model, so
consolidation also merges *related* memories (cosine ≥ 0.85) through the model (the fake answers the group's
longest text). "Removed" means that after the pass the pair is no longer both in recall while what it said still
is (one of them, or the memory the model merged them into, is active); "wrong merges" counts merged groups that
mix distinct originals.

Passes, each through the job runner (``jobs.runner.run_job`` with ``force``: recorded, leased, bounded by the
job's budget — or ``--run-budget`` seconds to prove resumption — and repeated until the pass finishes), timed in
all and per run; then each job run once more (a repeated pass must change nothing). Target: each pass over the
memories within one Lambda budget (15 minutes) on this machine.

1. ``consolidation`` over the whole tenant;
2. ``archive_stale_memories`` after 30 % of the memories were made 200 days old (``created_at`` and
   ``last_accessed_at``), 1 % of those pinned and 2 % important (≥ 0.8): exactly the rest must be archived;
3. ``enforce_memory_quotas`` with the tenant's ``max_entries`` set to 90 % of its active memories: exactly the
   excess must be archived;
4. ``sweep_expired_memories`` after 5 % were made expired working memories and 5 % other memories expired 40
   days ago (past the 30-day retention): exactly those must be deleted.

LoCoMo (``../shared/data/locomo/locomo_shared.json``, skipped when absent): its sessions added as in
``benchmarks/memory.py --parts recall`` to tenant ``bench-memory`` of this database (``--locomo-embedder``,
default the local MiniLM through the embedding cache), the default recall evaluated, the consolidation job run for
that tenant, recall evaluated again (target: not lower), with the memories merged.

    ENGRAM_DATA_DIR=/tmp/bench-memory ./dev python benchmarks/lifecycle.py --memories 100000
    ./dev python benchmarks/lifecycle.py --memories 10000 --users 100 --run-budget 30
"""

from __future__ import annotations

import os

os.environ["ENGRAM_METRICS"] = "off"  # no EMF documents on stdout from the job runner
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import dataclasses
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from common import bench_settings, percentile
from memory import DEFAULT_VARIANT, LOCOMO, CachedEmbedder, database_for, evaluate, ingest_locomo, load_locomo, recall_variants
from memory import TENANT as LOCOMO_TENANT
from memory import sentences, vocabulary

from chalicelib.embed import build_embedder
from chalicelib.memory import write
from chalicelib.memory.model import MemoryScope
from chalicelib.store.db import connect, database_url, one
from chalicelib.store.vector_stores import ensure_tenant

TENANT = "bench-lifecycle"
DATABASE = "engram_bench_lifecycle"
BATCH = 50
DUPLICATE_SHARE = 0.2
FILLERS = ("really", "also", "still", "actually")
KINDS = ("punctuation", "filler", "dropped")


# --------------------------------------------------------------------------------------------- data

def near_duplicate(rng: random.Random, text: str, kind: str) -> str:
    """A near-duplicate of ``text`` of the given kind (module docstring)."""
    words = text.rstrip(".").split()
    if kind == "dropped" and len(words) < 8:
        kind = "filler"
    if kind == "punctuation":
        i = rng.randrange(1, len(words))
        words[i - 1] += ","
        j = rng.randrange(len(words))
        words[j] = words[j].rstrip(",").capitalize() + ("," if words[j].endswith(",") else "")
    elif kind == "filler":
        words.insert(rng.randrange(1, len(words)), rng.choice(FILLERS))
    else:
        del words[rng.randrange(1, len(words))]
    return " ".join(words) + "."


@dataclasses.dataclass
class Generated:
    """What was added: ``pairs`` (duplicate id, original id, kind), the originals' ids, add seconds."""

    pairs: list[tuple[str, str, str]]
    originals: list[str]
    memories: int
    add_s: float


def generate(conn: psycopg.Connection, settings: Any, args: argparse.Namespace) -> Generated:
    """Add every scope's originals, then its near-duplicates (module docstring)."""
    from chalicelib.embed.hashing import HashingEmbedder

    embedder = HashingEmbedder(384)
    rng = random.Random(args.seed)
    words = vocabulary(args.vocabulary, args.seed)
    per_user = max(2, args.memories // args.users)
    duplicates = round(per_user * DUPLICATE_SHARE)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    pairs: list[tuple[str, str, str]] = []
    originals: list[str] = []
    added = 0
    started = time.perf_counter()
    for u in range(args.users):
        user_id = f"user-{u:05d}"
        scope = MemoryScope(user_id=user_id)
        texts = sentences(rng, words, per_user - duplicates)
        ids: list[str] = []
        for b in range(0, len(texts), BATCH):
            ids += _add(conn, settings, scope, texts[b:b + BATCH], embedder, base + timedelta(hours=u, minutes=b))
        originals += [i for i in ids if i]
        live = [(i, t) for i, t in zip(ids, texts) if i]
        chosen = [(rng.choice(live), KINDS[k % len(KINDS)]) for k in range(duplicates)]
        variants = [near_duplicate(rng, text, kind) for (_, text), kind in chosen]
        dup_ids: list[str] = []
        for b in range(0, len(variants), BATCH):
            dup_ids += _add(conn, settings, scope, variants[b:b + BATCH], embedder, base + timedelta(hours=u, days=1))
        pairs += [(d, o, kind) for d, ((o, _), kind) in zip(dup_ids, chosen) if d]
        added += len(live) + sum(1 for d in dup_ids if d)
        if (u + 1) % max(1, args.users // 10) == 0:
            elapsed = time.perf_counter() - started
            print(f"  {u + 1}/{args.users} users, {added} memories, {added / elapsed:.0f} memories/s", flush=True)
    conn.execute("ANALYZE memories")
    return Generated(pairs, originals, added, time.perf_counter() - started)


def _add(conn: psycopg.Connection, settings: Any, scope: MemoryScope, texts: list[str], embedder: Any,
         when: datetime) -> list[str]:
    """One verbatim add; the new memory's id per text ('' for a text that was NOOP)."""
    request = write.AddRequest(messages=tuple(write.InputMessage("user", t) for t in texts), scope=scope,
                               infer=False, timestamp=when)
    result = write.add(conn, settings, TENANT, request, embedder=embedder, backend=None, model=None)
    return [c.id or "" if c.event == "ADD" else "" for c in result.changes]


def cosines(conn: psycopg.Connection, pairs: list[tuple[str, str, str]]) -> dict[str, list[float]]:
    """Per kind, each duplicate's cosine to its original (stored embeddings)."""
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    for start in range(0, len(pairs), 5000):
        chunk = pairs[start:start + 5000]
        rows = conn.execute(
            "SELECT p.kind, 1 - (d.embedding <=> o.embedding) FROM unnest(%s::text[], %s::text[], %s::text[]) "
            "AS p(dup, orig, kind) JOIN memories d ON d.tenant_id = %s AND d.id = p.dup "
            "JOIN memories o ON o.tenant_id = %s AND o.id = p.orig",
            ([d for d, _, _ in chunk], [o for _, o, _ in chunk], [k for _, _, k in chunk], TENANT, TENANT)).fetchall()
        for kind, cosine in rows:
            out[kind].append(float(cosine))
    return out


def removal(conn: psycopg.Connection, generated: Generated) -> dict[str, Any]:
    """After consolidation: per kind, the pairs removed from recall — not both still active, and what they said
    still in recall (one of them, or the memory a model merged them into, is active); wrong merges: merge targets
    whose members come from more than one original's family (an original and its duplicates)."""
    active = {r[0] for r in conn.execute("SELECT id FROM memories WHERE tenant_id = %s AND consolidated_into IS NULL "
                                         "AND archived_at IS NULL", (TENANT,)).fetchall()}
    into: dict[str, str] = dict(conn.execute("SELECT id, consolidated_into FROM memories WHERE tenant_id = %s "
                                             "AND consolidated_into IS NOT NULL", (TENANT,)).fetchall())
    per: dict[str, list[int]] = {k: [0, 0] for k in KINDS}
    for dup, orig, kind in generated.pairs:
        per[kind][1] += 1
        kept = any(m in active or into.get(m) in active for m in (dup, orig))
        per[kind][0] += kept and not (dup in active and orig in active)
    family = {o: o for o in generated.originals} | {d: o for d, o, _ in generated.pairs}
    groups: dict[str, set[str]] = {}
    for member, target in into.items():
        groups.setdefault(target, {family[target]} if target in family else set()).add(family.get(member, member))
    wrong = sum(1 for families in groups.values() if len(families) > 1)
    return {"per_kind": {k: {"removed": v[0], "pairs": v[1]} for k, v in per.items()},
            "removed": sum(v[0] for v in per.values()), "pairs": len(generated.pairs), "wrong_merges": wrong,
            "merged_away": len(into), "merge_targets": len(groups)}


# --------------------------------------------------------------------------------------------- passes

@dataclasses.dataclass
class Pass:
    """One job's pass: its runs' seconds and counts (summed), and the repeat run's."""

    job: str
    runs: list[float]
    counts: dict[str, int]
    repeat_s: float = 0.0
    repeat_counts: dict[str, int] = dataclasses.field(default_factory=dict)


def run_pass(settings: Any, job: str, tenant: str, run_budget: float | None, *, max_runs: int = 100) -> Pass:
    """Run ``job`` for ``tenant`` until its pass finishes (each run bounded by the job's budget or
    ``run_budget``), then once more.

    Raises:
        RuntimeError: a run failed, or the pass needed more than ``max_runs`` runs.
    """
    from chalicelib.jobs import runner

    out = Pass(job, [], {})
    for _ in range(max_runs):
        deadline = time.monotonic() + run_budget if run_budget else None
        outcome = runner.run_job(settings, job, tenant=tenant, force=True, deadline=deadline)
        if outcome.status == "failed":
            raise RuntimeError(f"{job} failed: {outcome.error}")
        out.runs.append(outcome.seconds)
        for key, value in outcome.counts.items():
            out.counts[key] = out.counts.get(key, 0) + value
        print(f"  {job}: run {len(out.runs)} {outcome.status} in {outcome.seconds:.1f}s {outcome.counts}", flush=True)
        if outcome.status == "finished":
            break
    else:
        raise RuntimeError(f"{job} did not finish in {max_runs} runs")
    again = runner.run_job(settings, job, tenant=tenant, force=True)
    out.repeat_s, out.repeat_counts = again.seconds, dict(again.counts)
    return out


def prepare_archive(conn: psycopg.Connection, rng: random.Random) -> dict[str, int]:
    """Age 30 % of the active memories by 200 days (1 % of them pinned, 2 % important); returns the expected
    archive count and how many are protected."""
    ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE tenant_id = %s AND consolidated_into IS NULL "
                                      "AND archived_at IS NULL ORDER BY id", (TENANT,)).fetchall()]
    aged = rng.sample(ids, round(0.3 * len(ids)))
    pinned = aged[: round(0.01 * len(aged))]
    important = aged[len(pinned): len(pinned) + round(0.02 * len(aged))]
    old = datetime.now(UTC) - timedelta(days=200)
    conn.execute("UPDATE memories SET created_at = %s, last_accessed_at = %s WHERE tenant_id = %s AND id = ANY(%s)",
                 (old, old, TENANT, aged))
    conn.execute("UPDATE memories SET pinned = true WHERE tenant_id = %s AND id = ANY(%s)", (TENANT, pinned))
    conn.execute("UPDATE memories SET importance = 0.9 WHERE tenant_id = %s AND id = ANY(%s)", (TENANT, important))
    return {"expected": len(aged) - len(pinned) - len(important), "protected": len(pinned) + len(important)}


def active_count(conn: psycopg.Connection) -> int:
    """The tenant's active memories (what quotas count)."""
    from chalicelib.memory.active import ACTIVE

    return int(one(conn.execute(f"SELECT count(*) FROM memories WHERE tenant_id = %s AND {ACTIVE}", (TENANT,)))[0])


def prepare_expiry(conn: psycopg.Connection, rng: random.Random) -> int:
    """Make 5 % of the active memories expired working memories and 5 % others expired 40 days ago; returns how
    many must be deleted."""
    ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE tenant_id = %s AND archived_at IS NULL "
                                      "AND consolidated_into IS NULL ORDER BY id", (TENANT,)).fetchall()]
    chosen = rng.sample(ids, round(0.1 * len(ids)))
    half = len(chosen) // 2
    conn.execute("UPDATE memories SET memory_type = 'working', expires_at = now() - interval '1 hour' "
                 "WHERE tenant_id = %s AND id = ANY(%s)", (TENANT, chosen[:half]))
    conn.execute("UPDATE memories SET expires_at = now() - interval '40 days' WHERE tenant_id = %s AND id = ANY(%s)",
                 (TENANT, chosen[half:]))
    return len(chosen)


# --------------------------------------------------------------------------------------------- LoCoMo

def locomo_before_after(args: argparse.Namespace, settings: Any) -> dict[str, Any] | None:
    """Default recall on the LoCoMo half before and after a consolidation pass of its tenant."""
    if not args.locomo.is_file():
        print(f"\nLoCoMo skipped: {args.locomo} is not present")
        return None
    settings = dataclasses.replace(settings, embedding_provider=args.locomo_embedder,
                                   embedding_model=("hashing-384" if args.locomo_embedder == "hashing"
                                                    else bench_settings().embedding_model))
    sessions, questions, last, _ = load_locomo(args.locomo)
    conn = connect(settings)
    embedder = CachedEmbedder(conn, build_embedder(settings))
    mapping, _ = ingest_locomo(conn, settings, sessions, embedder)
    embedder.embed([q.text for q in questions])
    make = recall_variants(argparse.Namespace(ablation=False, strategies=[]))[DEFAULT_VARIANT]
    before, _, _ = evaluate(conn, settings, questions, mapping, last, embedder, make, "end")
    consolidated = run_pass(settings, "consolidation", LOCOMO_TENANT, None)
    after, _, _ = evaluate(conn, settings, questions, mapping, last, embedder, make, "end")
    merged = conn.execute("SELECT memory FROM memories WHERE tenant_id = %s AND consolidated_into IS NOT NULL "
                          "ORDER BY memory LIMIT 8", (LOCOMO_TENANT,)).fetchall()
    conn.close()
    return {"embedder": embedder.model, "questions": len(questions), "before": before["overall"],
            "after": after["overall"], "merged": consolidated.counts.get("merged", 0),
            "consolidation_s": round(sum(consolidated.runs), 2), "examples": [m[0] for m in merged]}


# --------------------------------------------------------------------------------------------- main

def merge_responder(body: dict[str, Any]) -> Any:
    """The fake memory model's consolidation answer: the group's longest text (near-duplicates of one fact: the
    longest variant keeps every word of most of them)."""
    from tests.fakes.chat_server import text

    listing = body["messages"][-1].get("content") or ""
    texts = [line[2:] for line in listing.split("\n") if line.startswith("- ")]
    return text(json.dumps({"memory": max(texts, key=len) if texts else "?"}))


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.fake_model:
        from tests.fakes.chat_server import FakeChatServer

        with FakeChatServer(responder=merge_responder) as fake:
            return run_with(args, bench_settings(embedding_provider="hashing", embedding_model="hashing-384",
                                                 chat_base_url=fake.base_url, chat_api_key="sk-bench",
                                                 chat_max_retries=0, chat_model=None,
                                                 memory_model="fake-memory-model"))
    return run_with(args, bench_settings(embedding_provider="hashing", embedding_model="hashing-384",
                                         chat_base_url=None, chat_model=None, memory_model=None))


def run_with(args: argparse.Namespace, base: Any) -> dict[str, Any]:
    with psycopg.connect(database_url(base), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE)))
    settings = database_for(base, DATABASE)
    conn = connect(settings)
    ensure_tenant(conn, TENANT)
    rng = random.Random(args.seed)
    print(f"adding {args.memories} memories over {args.users} users (20 % near-duplicates), hashing embedder",
          flush=True)
    generated = generate(conn, settings, args)
    sims = cosines(conn, generated.pairs)
    print(f"added {generated.memories} memories ({len(generated.pairs)} near-duplicates) in {generated.add_s:.0f}s "
          f"({generated.memories / generated.add_s:.0f}/s)", flush=True)
    out: dict[str, Any] = {"memories": generated.memories, "users": args.users, "duplicates": len(generated.pairs),
                           "add_s": round(generated.add_s, 1), "passes": {}}

    consolidation = run_pass(settings, "consolidation", TENANT, args.run_budget)
    removed = removal(conn, generated)
    out["passes"]["consolidation"] = dataclasses.asdict(consolidation)
    out["duplicates_removed"] = removed

    expected_archive = prepare_archive(conn, rng)
    archive = run_pass(settings, "archive_stale_memories", TENANT, args.run_budget)
    out["passes"]["archive_stale_memories"] = dataclasses.asdict(archive) | {"expected": expected_archive["expected"]}

    active = active_count(conn)
    from chalicelib.store.tenants import set_limits

    quota = round(0.9 * active)
    set_limits(conn, TENANT, {"max_entries": quota})
    quotas = run_pass(settings, "enforce_memory_quotas", TENANT, args.run_budget)
    out["passes"]["enforce_memory_quotas"] = dataclasses.asdict(quotas) | {"expected": active - quota,
                                                                           "active_after": active_count(conn)}
    set_limits(conn, TENANT, {"max_entries": None})

    expected_sweep = prepare_expiry(conn, rng)
    sweep = run_pass(settings, "sweep_expired_memories", TENANT, args.run_budget)
    out["passes"]["sweep_expired_memories"] = dataclasses.asdict(sweep) | {"expected": expected_sweep}
    conn.close()

    # LoCoMo's pass runs without a model: the fake's merge (the longest text) would lose turns a real model keeps.
    out["locomo"] = (locomo_before_after(args, dataclasses.replace(settings, memory_model=None, chat_model=None,
                                                                   chat_base_url=None))
                     if args.locomo_part else None)
    out["model"] = "fake (merges related memories, cosine >= 0.85)" if args.fake_model else None
    report(out, sims, removed)
    return out


def report(out: dict[str, Any], sims: dict[str, list[float]], removed: dict[str, Any]) -> None:
    """Print the tables."""
    print(f"\nlifecycle: {out['memories']} memories over {out['users']} users, {out['duplicates']} near-duplicates "
          f"(hashing embedder; added in {out['add_s']:.0f}s); memory model: {out['model'] or 'none'}")
    print(f"  {'job pass':26s} {'runs':>5s} {'seconds':>9s} {'max run s':>10s} {'count':>22s} {'expected':>9s} "
          f"{'repeat s':>9s} {'repeat count':>13s}")
    for name, p in out["passes"].items():
        counts = ", ".join(f"{k} {v}" for k, v in p["counts"].items())
        repeat = sum(v for k, v in p["repeat_counts"].items() if k not in ("scopes", "deleted"))
        print(f"  {name:26s} {len(p['runs']):5d} {sum(p['runs']):9.1f} {max(p['runs']):10.1f} {counts:>22s} "
              f"{p.get('expected', ''):>9} {p['repeat_s']:9.1f} {repeat:13d}")
    print("  target: each pass within one Lambda budget (900 s)")
    print(f"\n  {'near-duplicate kind':16s} {'pairs':>6s} {'cosine p5/p50':>14s} {'>= 0.95':>8s} {'removed':>8s}")
    for kind in KINDS:
        values = sims[kind]
        row = removed["per_kind"][kind]
        share = sum(v >= 0.95 for v in values) / len(values) if values else float("nan")
        print(f"  {kind:16s} {row['pairs']:6d} {percentile(values, 5):6.3f}/{percentile(values, 50):6.3f} "
              f"{share:8.1%} {row['removed'] / max(1, row['pairs']):8.1%}")
    total = removed["removed"] / max(1, removed["pairs"])
    print(f"  {'all':16s} {removed['pairs']:6d} {'':14s} {'':8s} {total:8.1%}   target >= 95 %")
    at = [(d, k) for k in KINDS for d in sims[k]]
    print(f"  wrong merges (groups mixing distinct originals): {removed['wrong_merges']} of "
          f"{removed['merge_targets']} groups; memories merged away: {removed['merged_away']}; pairs at cosine >= 0.95: "
          f"{sum(d >= 0.95 for d, _ in at)} of {len(at)}")
    locomo = out.get("locomo")
    if locomo:
        print(f"\nLoCoMo recall before / after consolidation ({locomo['questions']} questions, {locomo['embedder']}; "
              f"{locomo['merged']} memories merged in {locomo['consolidation_s']:.1f}s)")
        for metric in ("R@5", "R@10", "R@20", "All@10", "nDCG@10"):
            print(f"  {metric:8s} {locomo['before'][metric]:7.3f} {locomo['after'][metric]:7.3f}")
        print("  target: not lower after; merged texts, e.g.: " + "; ".join(repr(t[:40]) for t in locomo["examples"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--run-budget", type=float, default=None,
                        help="seconds per job run (default: the job's own budget); a pass then takes several runs")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--locomo-embedder", default="local", help="embedder of the LoCoMo part (local or hashing)")
    parser.add_argument("--no-locomo", dest="locomo_part", action="store_false")
    parser.add_argument("--fake-model", action="store_true",
                        help="consolidate with the scripted fake chat server as the memory model (related merges)")
    args = parser.parse_args()
    out = {"benchmark": "lifecycle", **run(args)}
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
