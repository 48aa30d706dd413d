"""``engram sync [--tenant T] [--store S] [--json]``: bring the stores to match the drop bucket now — objects whose
S3 event was missed are ingested, changed ones re-ingested, deleted ones removed (:mod:`chalicelib.events.sync`) —
on the running local stack (its bucket and queues), else on ``ENGRAM_BUCKET`` and the configured queues. The same
run as the hourly ``sync_drop_folder`` job: exclusive, recorded in ``job_runs`` (``engram jobs list``, ``engram
stats``); run until the pass is complete."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import typer
from rich.console import Console
from rich.markup import escape

from chalicelib import deps
from chalicelib.config import settings
from chalicelib.errors import EngramError

__all__ = ["JOB", "last_sync", "sync"]

JOB = "sync_drop_folder"
console = Console()
err_console = Console(stderr=True)


def sync(tenant: str | None = typer.Option(None, "--tenant", "-t",
                                           help="Only this tenant (default: every tenant; with --store, "
                                                "ENGRAM_TENANT)."),
         store: str | None = typer.Option(None, "--store", "-s", help="Only this store (name or id) of the tenant."),
         as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON.")) -> None:
    """Sync the drop folder with its bucket now and print the counts (scanned, new, modified, deleted, unchanged,
    failed). The differences go to the ingestion queue (the pump applies them); without one, they are applied
    before the command returns. Exit 1 if the sync failed or another one is running, 2 on bad input."""
    from chalicelib.dispatch.local import LocalDispatcher
    from chalicelib.events import sync as drop_sync
    from chalicelib.jobs import runner
    from engram_cli.local import run

    run.attach_to_running(settings().data_dir)
    config = settings()
    if store is not None and tenant is None:
        tenant = config.tenant
    if not config.bucket:
        err_console.print("[bold red]error[/]: no local stack is running (start `engram serve`) and ENGRAM_BUCKET "
                          "is unset: there is no drop folder to sync")
        raise typer.Exit(code=2)
    try:
        scope = drop_sync.scope(config, tenant, store) if tenant is not None else None
    except EngramError as exc:
        err_console.print(f"[bold red]error[/]: {escape(exc.message)}" + (f" ({exc.code})" if exc.code else ""))
        raise typer.Exit(code=2) from None
    # The store by id once it exists; by name when only the bucket holds it yet (the sync's events create it).
    options = {"store": scope.store_id or store} if scope is not None and store is not None else None
    inline = not deps.dispatcher(config).durable  # no queue: apply here, before the process exits
    if inline:
        deps.set_dispatcher(LocalDispatcher(config, threads=0))
    started, counts, runs = time.monotonic(), drop_sync.zero_counts(), 0
    try:
        while True:
            outcome = runner.run_job(config, JOB, tenant=tenant, force=True, options=options)
            runs += 1
            for name in drop_sync.COUNTS:
                counts[name] += int(outcome.counts.get(name, 0))
            if outcome.status != "partial":
                break
    finally:
        if inline:
            deps.set_dispatcher(None)
    result = {"scope": outcome.scope, "status": outcome.status, "counts": counts, "runs": runs,
              "seconds": round(time.monotonic() - started, 3), "error": outcome.error, "reason": outcome.reason}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        detail = outcome.error or outcome.reason or ", ".join(f"{k} {v}" for k, v in counts.items())
        console.print(f"sync ({escape(outcome.scope)}): {outcome.status} in {result['seconds']:.2f} s — "
                      f"{escape(detail)}")
    if outcome.status in ("failed", "skipped"):
        raise typer.Exit(code=1)


def last_sync(conn: psycopg.Connection, tenant: str) -> dict[str, Any] | None:
    """The newest ``sync_drop_folder`` run that covered ``tenant`` (every tenant's, the tenant's, or one of its
    stores'): ``{"scope", "status", "started_at", "finished_at" (Unix seconds or None), "counts", "error"}``, or
    None when none ran yet."""
    from chalicelib.jobs import store

    row = store.last_run_covering(conn, JOB, tenant)
    if row is None:
        return None
    return {"scope": row.scope, "status": row.status, "started_at": int(row.started_at.timestamp()),
            "finished_at": int(row.finished_at.timestamp()) if row.finished_at else None, "counts": row.counts,
            "error": row.error}
