"""Scheduled jobs run bounded (they stop at their budget and the next run resumes from the saved cursor), exclusive
(two runs of one job never overlap; a dead run's lease is taken over), recorded (job_runs), idempotent and scoped to
a tenant when asked — with real Postgres and toy jobs standing in for real ones."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time

import pytest

from chalicelib.jobs import runner, store
from chalicelib.jobs.model import Job, JobContext, JobResult
from chalicelib.store.db import connect

# What the toy jobs did, per test: appended to by the job functions below (the runner imports them by path).
CALLS: list[tuple[str | None, dict | None]] = []
ITEMS = 10  # the counting job's pass: items 0..9, one per step
STEP_S = 0.05
_gate = threading.Event()
_started = threading.Event()


def count_items(ctx: JobContext) -> JobResult:
    """Handles items from the cursor on, one per STEP_S, until done or out of time (saving a checkpoint each)."""
    CALLS.append((ctx.tenant, dict(ctx.cursor) if ctx.cursor else None))
    position = int((ctx.cursor or {}).get("next", 0))
    done = 0
    while position < ITEMS:
        if ctx.out_of_time(_step_s()):
            return JobResult({"items": done}, cursor={"next": position})
        time.sleep(_step_s())
        position += 1
        done += 1
        ctx.checkpoint({"next": position})
    return JobResult({"items": done})


def _step_s() -> float:
    return STEP_S


def wait_for_gate(ctx: JobContext) -> JobResult:
    """Blocks until the test opens the gate (a long run another run must not overlap)."""
    _started.set()
    _gate.wait(10)
    return JobResult({"waited": 1})


def explode(ctx: JobContext) -> JobResult:
    raise RuntimeError("boom")


def _job(name: str, function: str, *, budget_s: float = 5.0, cadence_s: float = 300.0) -> Job:
    return Job(name, f"tests.jobs.test_runner:{function}", cadence_s, "housekeeping", budget_s)


@pytest.fixture(autouse=True)
def fresh(settings):
    CALLS.clear()
    _gate.clear()
    _started.clear()
    with connect(settings) as conn:
        conn.execute("DELETE FROM job_state")
        conn.execute("DELETE FROM job_runs")
    yield


def _runs(settings, job: str) -> list[tuple[str, dict, dict | None, dict | None]]:
    with connect(settings) as conn:
        return [(r.status, r.counts, r.cursor_in, r.cursor_out) for r in reversed(store.latest_runs(conn, job))]


def test_a_bounded_run_stops_at_its_budget_and_the_next_one_resumes(settings):
    job = _job("count", "count_items", budget_s=STEP_S * 4.5)
    first = runner.run_job(settings, job)
    assert first.status == "partial" and 1 <= first.counts["items"] < ITEMS and first.cursor
    assert first.seconds <= job.budget_s + 0.5
    # The unfinished pass is due again at once (no cadence wait), and resumes where it stopped.
    done = first.counts["items"]
    for _ in range(ITEMS):
        outcome = runner.run_job(settings, job)
        assert outcome.status in ("partial", "finished")
        done += outcome.counts["items"]
        if outcome.status == "finished":
            break
    assert done == ITEMS  # every item exactly once across the runs
    starts = [cursor for _, cursor in CALLS]
    assert starts[0] is None and all(c and c["next"] > 0 for c in starts[1:])
    runs = _runs(settings, "count")
    assert runs[0][0] == "partial" and runs[-1][0] == "finished" and runs[-1][3] is None
    # Finished: not due again until its cadence has passed.
    assert runner.run_job(settings, job).status == "skipped"


def test_two_runs_never_overlap(settings):
    job = _job("gate", "wait_for_gate")
    results: dict[str, runner.RunOutcome] = {}
    thread = threading.Thread(target=lambda: results.setdefault("first", runner.run_job(settings, job, force=True)))
    thread.start()
    assert _started.wait(10)
    second = runner.run_job(settings, job, force=True)  # forced, yet the lease holds
    assert second.status == "skipped"
    _gate.set()
    thread.join(10)
    assert results["first"].status == "finished" and CALLS == []
    assert [status for status, *_ in _runs(settings, "gate")] == ["finished"]


def test_a_killed_run_is_taken_over_when_its_lease_runs_out_and_resumes_at_its_checkpoint(settings):
    job = _job("count", "count_items")
    with connect(settings) as conn:  # a run that checkpointed at item 6, then its process died
        taken, _ = store.acquire(conn, "count", store.ALL_TENANTS, "dead-host:1:x", lease_s=60, force=True)
        assert taken
        run_id = store.start_run(conn, "count", store.ALL_TENANTS, "dead-host:1:x", None)
        store.checkpoint(conn, "count", store.ALL_TENANTS, "dead-host:1:x", run_id, {"next": 6})
    assert runner.run_job(settings, job, force=True).status == "skipped"  # its lease still holds
    with connect(settings) as conn:
        conn.execute("UPDATE job_state SET leased_until = now() - interval '1 second'")
    outcome = runner.run_job(settings, job)
    assert outcome.status == "finished" and outcome.counts == {"items": ITEMS - 6}
    assert CALLS == [(None, {"next": 6})]
    statuses = [status for status, *_ in _runs(settings, "count")]
    assert statuses == ["abandoned", "finished"]


def test_a_failing_run_is_recorded_and_keeps_its_cursor(settings):
    outcome = runner.run_job(settings, _job("boom", "explode"), force=True)
    assert outcome.status == "failed" and "boom" in outcome.error
    ((status, counts, _, _),) = _runs(settings, "boom")
    assert status == "failed" and counts == {}
    with connect(settings) as conn:
        (state,) = [s for s in store.states(conn) if s.job == "boom"]
    assert state.error and "RuntimeError: boom" in state.error and state.leased_until is None


def test_runs_for_a_tenant_have_their_own_scope(settings):
    job = _job("count", "count_items")
    assert runner.run_job(settings, job, tenant="acme").status == "finished"
    assert runner.run_job(settings, job, tenant="beta").status == "finished"  # not blocked by acme's
    assert runner.run_job(settings, job).status == "finished"  # nor by either: '*' is a scope of its own
    assert [tenant for tenant, _ in CALLS] == ["acme", "beta", None]
    with connect(settings) as conn:
        assert {s.scope for s in store.states(conn)} == {"acme", "beta", "*"}


def test_a_lane_runs_its_due_jobs_within_its_budget(settings, monkeypatch):
    from chalicelib.jobs import table

    jobs = (_job("count", "count_items", budget_s=60), _job("boom", "explode"), _job("gate", "wait_for_gate"))
    monkeypatch.setattr(table, "JOBS", jobs)
    monkeypatch.setattr(sys.modules[__name__], "STEP_S", 0.3)
    _gate.set()
    outcomes = runner.run_lane(settings, "housekeeping", budget_s=runner.MIN_RUN_S + 0.3 * 1.5)
    # The first job used the whole lane budget and stopped early; the others wait for the next tick.
    assert outcomes["count"].status == "partial"
    assert outcomes["boom"].status == "skipped" and outcomes["gate"].status == "skipped"
    outcomes = runner.run_lane(settings, "housekeeping")
    assert [outcomes[name].status for name in ("count", "boom", "gate")] == ["finished", "failed", "finished"]


def test_housekeeping_jobs_are_idempotent(settings):
    """Run twice, every housekeeping job finds nothing left the second time."""
    from chalicelib.jobs.table import jobs_of

    config = dataclasses.replace(settings, bucket=None)
    for row in jobs_of("housekeeping"):
        first = runner.run_job(config, row, force=True)
        second = runner.run_job(config, row, force=True)
        assert first.status == second.status == "finished", (row.name, first, second)
        assert all(value == 0 for value in second.counts.values()), (row.name, second.counts)
