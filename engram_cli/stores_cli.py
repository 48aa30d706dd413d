"""``engram stores``: the tenant's vector stores (the default: a table, or ``--json``), the operator's sharing
of a store with every tenant, read-only (``engram stores share VS_ID`` / ``unshare VS_ID``; ``engram stores
shared`` lists every shared store; what sharing lets other tenants do: chalicelib/store/vector_stores.py), and
moving a store between vector backends without re-embedding (``engram stores reindex STORE --backend
qdrant|pgvector``: chalicelib/search/backends/reindex.py)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps
from chalicelib.config import settings
from chalicelib.errors import EngramError
from chalicelib.store import vector_stores
from engram_cli import service

app = typer.Typer(help="Vector stores: list the tenant's; share one with every tenant (read-only) or stop sharing; "
                       "move one to another vector backend.", invoke_without_command=True)
console = Console()
err_console = Console(stderr=True)


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


@app.callback()
def stores(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print the stores as JSON.")
           ) -> None:
    """List the tenant's vector stores (backend, the state of its index there: indexed or not, points, files
    pending; whether each is shared); or run a subcommand."""
    if ctx.invoked_subcommand is not None:
        return
    with deps.connect() as conn:
        rows = service.stats(conn)["stores"]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"Vector stores of tenant {settings().tenant!r}")
    for column in ("id", "name", "files", "chunks", "model", "backend", "index", "shared"):
        table.add_column(column, no_wrap=column in ("name", "shared"))
    for s in rows:
        table.add_row(s["id"], escape(s["name"] or ""), str(s["files"]["total"]), str(s["chunks"]),
                      s["embedding_model"], s["backend"], service.index_label(s["index"]), _shared_label(s))
    console.print(table)
    for s in rows:
        if s["index"]["indexed"] is not True:
            console.print(f"{s['id']}: {escape(s['index']['detail'])}", highlight=False, soft_wrap=True)


@app.command("reindex")
def reindex(store: str = typer.Argument(..., help="The store's name or id (vs_...) in ENGRAM_TENANT."),
            backend: str = typer.Option(..., "--backend", "-b", help="Where its vectors go: qdrant or pgvector."),
            as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON.")) -> None:
    """Move a store to another vector backend without re-embedding (vectors from its rows or the embedding
    cache), then build the new backend's index. Searches keep working during the move. It runs here, or — while
    `engram serve` runs on this data folder and holds the embedded engine — in the stack, which this command asks
    and then watches; progress shows either way. Interrupted (Ctrl-C, a crash, the stack stopped), it resumes where
    it stopped when run again (Ctrl-C while the stack moves it only stops watching). Exit 2 on bad input, 1 if the
    move failed (run it again to resume)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from chalicelib.search.backends.reindex import MoveBusy, move, request
    from engram_cli.local import run

    stack = run.attach_to_running(settings().data_dir)
    config = settings()
    ran_in = "cli" if stack is None else "stack"
    try:
        with deps.connect() as conn:
            found = vector_stores.find(conn, config.tenant, store)
            if found is None:
                err_console.print(f"[bold red]error[/]: no vector store {escape(repr(store))} in tenant "
                                  f"{escape(repr(config.tenant))}")
                raise typer.Exit(code=2)
            with Progress(TextColumn("moving {task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err_console, disable=as_json) as bar:
                where = "" if stack is None else " (in engram serve's stack)"
                task = bar.add_task(f"{found.id} to {backend}{where}", total=None)

                def show(done: int, total: int | None) -> None:
                    bar.update(task, completed=done, total=total)

                if stack is None:
                    try:
                        moved = move(conn, config, found, backend, progress=show)
                        outcome = {"files": moved.files, "changed": moved.changed, "embedded": moved.embedded,
                                   "resumed": moved.resumed}
                    except MoveBusy:
                        ran_in = "another process"
                        outcome = _watch(conn, config.tenant, found.id, backend, show, None)
                else:
                    request(conn, config, found, backend)
                    outcome = _watch(conn, config.tenant, found.id, backend, show, stack.pid)
    except EngramError as exc:
        err_console.print(f"[bold red]error[/]: {escape(exc.message)}" + (f" ({exc.code})" if exc.code else ""))
        raise typer.Exit(code=2 if exc.status < 500 else 1) from None
    except KeyboardInterrupt:
        what = ("the stack goes on moving it: run the command again to watch" if stack is not None
                else "run the command again to resume")
        err_console.print(f"interrupted: {what}")
        raise typer.Exit(code=130) from None
    result = {"id": found.id, "backend": backend, "ran_in": ran_in, **outcome}
    if as_json:
        print(json.dumps(result))
        return
    done = f"{result['files']} files moved" + (" (resumed)" if result["resumed"] else "")
    if result.get("changed") is not None:
        done += f", {result['changed']} changed during the move, {result['embedded']} vectors embedded again"
    console.print(f"vector store {found.id} is on {backend}: {done}"
                  + ("" if ran_in == "cli" else f" (moved by {ran_in})"), highlight=False, soft_wrap=True)


# Seconds between looks at a move another process runs; after STALLED_S seconds without progress, say so once.
WATCH_INTERVAL_S = 0.25
STALLED_S = 120.0


def _watch(conn: Any, tenant: str, store_id: str, target: str, show: Any, pid: int | None) -> dict[str, Any]:
    """Follow a move another process runs (the stack, whose process is ``pid``) through its row until the store is
    on ``target``; returns ``{"files" (the store's files, all moved), "changed", "embedded" (None: the mover's own
    counts), "resumed"}``.

    Raises:
        typer.Exit: (1) the move stopped with an error, or the stack went away before it finished.
    """
    import os
    import time

    from chalicelib.store import reindex as moves

    first = moves.progress(conn, tenant, store_id)
    resumed = bool(first and first.files_done)
    warned = False
    while True:
        state = moves.progress(conn, tenant, store_id)
        if state is None:
            current = vector_stores.find(conn, tenant, store_id)
            if current is not None and current.backend == target:
                files = len(moves.files_after(conn, tenant, store_id, None))
                show(files, files)
                return {"files": files, "changed": None, "embedded": None, "resumed": resumed}
            err_console.print(f"[bold red]error[/]: the move of {store_id} to {target} was abandoned (the store is "
                              f"on {current.backend if current else 'nothing: deleted'})")
            raise typer.Exit(code=1)
        show(state.files_done, state.total_files)
        if state.last_error:
            err_console.print(f"[bold red]error[/]: the move stopped: {escape(state.last_error)} (run the command "
                              "again to resume)")
            raise typer.Exit(code=1)
        if state.idle_s > STALLED_S and not warned:
            warned = True
            err_console.print(f"the move has not advanced for {state.idle_s:.0f} s: is the stack's pump running "
                              "(`engram serve` without --no-pump)? Still watching; Ctrl-C stops watching.")
        if pid is not None:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                err_console.print("[bold red]error[/]: `engram serve` stopped during the move: run the command again "
                                  "to resume it")
                raise typer.Exit(code=1) from None
            except PermissionError:
                pass
        time.sleep(WATCH_INTERVAL_S)


@app.command("share")
def share(store_id: str = typer.Argument(..., help="The store's id (vs_...), of any tenant."),
          by: str | None = typer.Option(None, "--by", help="Who shares it (default: your login name).")) -> None:
    """Share a store with every tenant, read-only: they can retrieve it by id, search it and name it in
    file_search; only its owner can change it or see its files."""
    _set(store_id, True, by or _login())


@app.command("unshare")
def unshare(store_id: str = typer.Argument(..., help="The store's id (vs_...).")) -> None:
    """Stop sharing a store: other tenants no longer see it (404 again)."""
    _set(store_id, False, None)


@app.command("shared")
def shared(as_json: bool = typer.Option(False, "--json", help="Print the stores as JSON.")) -> None:
    """Every shared store, any tenant's: owner, when and by whom it was shared."""
    with deps.connect() as conn:
        rows = [_shared_dict(s) for s in vector_stores.list_shared(conn)]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="Shared vector stores (read-only for every tenant)")
    for column in ("id", "name", "owner", "chunks", "shared"):
        table.add_column(column)
    for s in rows:
        table.add_row(s["id"], escape(s["name"] or ""), escape(s["tenant_id"]), str(s["chunks"]), _shared_label(s))
    console.print(table)


def _set(store_id: str, value: bool, by: str | None) -> None:
    try:
        with deps.connect() as conn:
            store = vector_stores.set_shared(conn, store_id, value, by=by)
    except EngramError as exc:
        _fail(exc)
    what = "shared with every tenant (read-only)" if value else "no longer shared"
    console.print(f"vector store {store.id} ({escape(store.name or '')}, tenant {escape(repr(store.tenant_id))}) "
                  f"is {what}", highlight=False, soft_wrap=True)


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in this environment (containers)
        return "operator"


def _shared_dict(store: vector_stores.VectorStore) -> dict[str, Any]:
    """JSON shape of a shared store (times in Unix seconds)."""
    return {"id": store.id, "name": store.name, "tenant_id": store.tenant_id, "chunks": store.chunk_count,
            "embedding_model": store.embedding_model, **service.sharing(store)}


def _shared_label(row: dict[str, Any]) -> str:
    if not row["shared"]:
        return ""
    return "yes" + (f" (by {escape(row['shared_by'])})" if row.get("shared_by") else "")
