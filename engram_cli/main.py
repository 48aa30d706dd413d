"""``engram``: the command line over Engram's knowledge core (typer + rich).

Interfaces scripts rely on (keep stable): ``engram ingest PATH... --store NAME``, ``engram search QUERY --store
NAME -k N --json`` (a JSON list of results, best first, each with at least ``filename``, ``score``, ``text``),
``engram stats --json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from chalicelib import deps
from chalicelib.config import settings
from chalicelib.errors import EngramError
from engram_cli import service

app = typer.Typer(help="Engram: documents in, the right chunks out.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err_console = Console(stderr=True)

STORE_OPTION = typer.Option(..., "--store", "-s", help="Vector store name or id (created by ingest if missing).")


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


@app.command()
def ingest(paths: list[Path] = typer.Argument(..., exists=True, help="Files or folders (recursive)."),
           store: str = STORE_OPTION,
           max_chunk_tokens: Optional[int] = typer.Option(None, help="Static strategy: max tokens per chunk."),
           overlap_tokens: Optional[int] = typer.Option(None, help="Static strategy: overlap tokens."),
           force: bool = typer.Option(False, help="Re-ingest files whose content is unchanged."),
           as_json: bool = typer.Option(False, "--json", help="Print the per-file results as JSON.")) -> None:
    """Ingest files into a vector store; print a per-file status summary."""
    files = service.collect_files(paths)
    strategy = None
    if max_chunk_tokens is not None or overlap_tokens is not None:
        strategy = {"type": "static", "static": {"max_chunk_size_tokens": max_chunk_tokens or 800,
                                                  "chunk_overlap_tokens": overlap_tokens if overlap_tokens is not None else 400}}
    try:
        with deps.connect() as conn:
            target = service.open_store(conn, store)
            results = []
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err_console, transient=as_json) as progress:
                task = progress.add_task("ingesting", total=len(files))
                for path, name in files:
                    progress.update(task, description=f"ingesting {name[-40:]}")
                    results.append(service.ingest_path(conn, target, path, name, strategy, force=force))
                    progress.advance(task)
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps([service.result_dict(r) for r in results], indent=2))
        return
    table = Table(title=f"Ingested into {target.name or target.id} ({target.id})")
    for column in ("file", "status", "chunks", "embedded", "cached", "detail"):
        table.add_column(column, justify="right" if column in ("chunks", "embedded", "cached") else "left")
    for r in results:
        colour = {"completed": "green", "failed": "red", "skipped": "dim"}[r.status]
        detail = f"{r.error['code']}: {r.error['message']}" if r.error else ""
        table.add_row(r.filename, f"[{colour}]{r.status}[/]", str(r.chunk_count), str(r.embedded), str(r.cached), detail)
    console.print(table)
    counts = {s: sum(r.status == s for r in results) for s in ("completed", "failed", "skipped")}
    console.print(f"{len(results)} files: {counts['completed']} completed, {counts['failed']} failed, "
                  f"{counts['skipped']} unchanged")


@app.command()
def search(query: str = typer.Argument(..., help="What to look for."), store: str = STORE_OPTION,
           k: int = typer.Option(10, "-k", help="Number of results (1-50)."),
           filter_json: Optional[str] = typer.Option(None, "--filter", help="OpenAI attribute filter as JSON."),
           mode: str = typer.Option("hybrid", help="hybrid | vector | keyword"),
           as_json: bool = typer.Option(False, "--json", help="Print results as a JSON list.")) -> None:
    """Search a vector store: score, file, position, snippet."""
    try:
        filters = json.loads(filter_json) if filter_json else None
    except json.JSONDecodeError as exc:
        err_console.print(f"[bold red]error[/]: --filter is not valid JSON: {exc}")
        raise typer.Exit(code=2)
    try:
        with deps.connect() as conn:
            hits = service.search(conn, store, query, k=k, filters=filters, mode=mode)
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps([service.hit_dict(h) for h in hits], indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(hits)} results for {query!r}", show_lines=True)
    for column in ("score", "file", "position", "snippet"):
        table.add_column(column, overflow="fold")
    for h in hits:
        table.add_row(f"{h.score:.3f}", h.filename, service.position(h), service.snippet(h.text))
    console.print(table)


@app.command()
def stores(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the tenant's vector stores."""
    with deps.connect() as conn:
        rows = service.stats(conn)["stores"]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"Vector stores of tenant {settings().tenant!r}")
    for column in ("id", "name", "files", "chunks", "model"):
        table.add_column(column)
    for s in rows:
        table.add_row(s["id"], s["name"] or "", str(s["files"]["total"]), str(s["chunks"]), s["embedding_model"])
    console.print(table)


@app.command()
def stats(as_json: bool = typer.Option(False, "--json")) -> None:
    """Per store: files by status, chunks, bytes, embedding model and dimension."""
    with deps.connect() as conn:
        data = service.stats(conn)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"Engram stats — tenant {data['tenant']!r}")
    for column in ("store", "completed", "in_progress", "failed", "chunks", "bytes", "embedding"):
        table.add_column(column)
    for s in data["stores"]:
        f = s["files"]
        table.add_row(f"{s['name'] or ''} ({s['id']})", str(f["completed"]), str(f["in_progress"]), str(f["failed"]),
                      str(s["chunks"]), str(s["usage_bytes"]), f"{s['embedding_model']} ({s['embedding_dim']}d)")
    console.print(table)


@app.command()
def delete(store: str = STORE_OPTION,
           file: Optional[str] = typer.Option(None, "--file", help="Only this file (name or id) of the store."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")) -> None:
    """Delete a vector store (with its chunks), or one file from it."""
    what = f"file {file!r} from store {store!r}" if file else f"vector store {store!r} and all its chunks"
    if not yes and sys.stdin.isatty() and not typer.confirm(f"Delete {what}?"):
        raise typer.Exit(code=1)
    try:
        with deps.connect() as conn:
            service.delete(conn, store, file)
    except EngramError as exc:
        _fail(exc)
    console.print(f"deleted {what}")


@app.command()
def demo(folder: Optional[Path] = typer.Argument(None, help="Documents to ingest (default: bundled examples)."),
         store: str = typer.Option("demo", "--store", "-s")) -> None:
    """The main job on the embedded defaults: ingest a folder, then run a few searches and print the results."""
    folder = folder or Path(__file__).resolve().parent.parent / "examples" / "docs"
    console.print(f"[bold]Engram demo[/]: database {'DATABASE_URL' if settings().database_url else 'embedded (' + str(settings().data_dir) + ')'}, "
                  f"embedder {settings().embedding_provider}:{settings().embedding_model}")
    ingest([folder], store=store, max_chunk_tokens=None, overlap_tokens=None, force=False, as_json=False)
    for query in service.DEMO_QUERIES:
        search(query, store=store, k=3, filter_json=None, mode="hybrid", as_json=False)


def main() -> Any:
    """Console-script entry point."""
    return app()


if __name__ == "__main__":
    main()
