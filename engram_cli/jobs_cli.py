"""``engram jobs``: the scheduled jobs of :mod:`chalicelib.jobs.table` — list them with their cadence and last run,
or run one now (``engram jobs run NAME [--tenant T]``), bounded, exclusive and recorded like a scheduled run."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TypedDict

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps

app = typer.Typer(help="Scheduled jobs: list them with their last run, or run one now.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def _ts(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value is not None else None


class JobRow(TypedDict):
    """One line of ``engram jobs list`` (``--json`` prints a list of them): the job's table row and, per scope it
    ran for, its last run (times in Unix seconds; all None for a job never run)."""

    job: str
    lane: str
    cadence_s: float
    budget_s: float
    description: str
    scope: str | None
    last_started_at: int | None
    last_finished_at: int | None
    last_status: str | None
    last_counts: dict[str, int] | None
    last_error: str | None
    due_at: int | None
    running: bool


@app.command("list")
def list_jobs(as_json: bool = typer.Option(False, "--json", help="Print the jobs as a JSON list.")) -> None:
    """Every job: lane, cadence, budget, and its last run (all tenants' scope, plus any per-tenant runs)."""
    from chalicelib.jobs import store
    from chalicelib.jobs.table import JOBS

    with deps.connect() as conn:
        states = store.states(conn)
    by_job: dict[str, list[store.JobState]] = {}
    for found in states:
        by_job.setdefault(found.job, []).append(found)
    rows: list[JobRow] = []
    for job in JOBS:
        scopes: list[store.JobState | None] = [*by_job.get(job.name, [])] or [None]
        for state in scopes:
            rows.append({
                "job": job.name, "lane": job.lane, "cadence_s": job.cadence_s, "budget_s": job.budget_s,
                "description": job.description, "scope": state.scope if state else None,
                "last_started_at": _ts(state.started_at) if state else None,
                "last_finished_at": _ts(state.finished_at) if state else None,
                "last_status": state.status if state else None,
                "last_counts": state.counts if state else None,
                "last_error": state.error if state else None,
                "due_at": _ts(state.due_at) if state else None,
                "running": bool(state and state.leased_until is not None),
            })
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="Scheduled jobs")
    for column in ("job", "lane", "cadence", "budget", "scope", "last run", "status", "counts"):
        table.add_column(column, overflow="fold", no_wrap=column == "job")
    for row in rows:
        when = row["last_started_at"]
        started = "" if when is None else datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M")
        counts = ", ".join(f"{k} {v}" for k, v in (row["last_counts"] or {}).items())
        status = row["last_status"] or ("never run" if row["scope"] is None else "")
        if row["running"]:
            status += " (running)"
        table.add_row(row["job"], row["lane"], _duration(row["cadence_s"]), _duration(row["budget_s"]),
                      row["scope"] or "", started, status, escape(counts))
    console.print(table)


@app.command("run")
def run_job(name: str = typer.Argument(..., help="The job's name (see `engram jobs list`)."),
            tenant: str | None = typer.Option(None, "--tenant", "-t", help="Only this tenant's data."),
            as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON.")) -> None:
    """Run one job now, whatever its cadence (still exclusive: exit 1 if another run holds it)."""
    from chalicelib.jobs import runner, table

    try:
        table.job(name)
    except KeyError:
        err_console.print(f"[bold red]error[/]: no job named {escape(repr(name))} (see `engram jobs list`)")
        raise typer.Exit(code=2) from None
    outcome = runner.run_job(deps.current_settings(), name, tenant=tenant, force=True)
    if as_json:
        print(json.dumps({"job": outcome.job, "scope": outcome.scope, "status": outcome.status,
                          "counts": outcome.counts, "cursor": outcome.cursor, "error": outcome.error,
                          "seconds": round(outcome.seconds, 3), "reason": outcome.reason}, indent=2))
    else:
        counts = ", ".join(f"{k} {v}" for k, v in outcome.counts.items()) or "nothing to do"
        detail = outcome.error or outcome.reason or counts
        console.print(f"{outcome.job} ({outcome.scope}): {outcome.status} in {outcome.seconds:.2f} s — "
                      f"{escape(detail)}")
    if outcome.status in ("failed", "skipped"):
        raise typer.Exit(code=1)
