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
    """List the tenant's vector stores (with whether each is shared); or run a subcommand."""
    if ctx.invoked_subcommand is not None:
        return
    with deps.connect() as conn:
        rows = service.stats(conn)["stores"]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"Vector stores of tenant {settings().tenant!r}")
    for column in ("id", "name", "files", "chunks", "model", "backend", "shared"):
        table.add_column(column)
    for s in rows:
        table.add_row(s["id"], escape(s["name"] or ""), str(s["files"]["total"]), str(s["chunks"]),
                      s["embedding_model"], s["backend"], _shared_label(s))
    console.print(table)


@app.command("reindex")
def reindex(store: str = typer.Argument(..., help="The store's name or id (vs_...) in ENGRAM_TENANT."),
            backend: str = typer.Option(..., "--backend", "-b", help="Where its vectors go: qdrant or pgvector."),
            as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON.")) -> None:
    """Move a store to another vector backend without re-embedding (vectors from its rows or the embedding
    cache). Searches keep working during the move; an interrupted move resumes when run again. Exit 2 on bad
    input, 1 if the move failed (run it again to resume)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from chalicelib.search.backends.reindex import move

    config = settings()
    try:
        with deps.connect() as conn:
            found = vector_stores.find(conn, config.tenant, store)
            if found is None:
                err_console.print(f"[bold red]error[/]: no vector store {escape(repr(store))} in tenant "
                                  f"{escape(repr(config.tenant))}")
                raise typer.Exit(code=2)
            with Progress(TextColumn("moving {task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err_console, disable=as_json) as bar:
                task = bar.add_task(f"{found.id} to {backend}", total=None)
                moved = move(conn, config, found, backend,
                             progress=lambda done, total: bar.update(task, completed=done, total=total))
    except EngramError as exc:
        err_console.print(f"[bold red]error[/]: {escape(exc.message)}" + (f" ({exc.code})" if exc.code else ""))
        raise typer.Exit(code=2 if exc.status < 500 else 1) from None
    outcome = {"id": found.id, "backend": moved.backend, "files": moved.files, "changed": moved.changed,
               "embedded": moved.embedded, "resumed": moved.resumed}
    if as_json:
        print(json.dumps(outcome))
        return
    console.print(f"vector store {found.id} is on {moved.backend}: {moved.files} files moved"
                  + (" (resumed)" if moved.resumed else "") + f", {moved.changed} changed during the move, "
                  f"{moved.embedded} vectors embedded again", highlight=False, soft_wrap=True)


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
