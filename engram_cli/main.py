"""``engram``: the command line over Engram's knowledge core (typer + rich).

Interfaces scripts rely on (keep stable): ``engram ingest PATH... --store NAME``, ``engram search QUERY --store
NAME -k N --json`` (a JSON list of results, best first, each with at least ``filename``, ``score``, ``text``),
``engram stats --json``, ``engram keys create --tenant NAME`` (the new secret key alone on the last line of
stdout: ``| tail -1``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from chalicelib import access, deps
from chalicelib.config import settings
from chalicelib.errors import EngramError
from chalicelib.store import api_keys, vector_stores
from engram_cli import (
    agents_cli,
    conversations_cli,
    demo_memory,
    jobs_cli,
    keys_cli,
    memory_cli,
    service,
    stores_cli,
    sync_cli,
    tenants_cli,
)
from engram_cli.local.stack import DEFAULT_PORT as DEFAULT_AWS_PORT

app = typer.Typer(help="Engram: documents in, the right chunks out.", no_args_is_help=True,
                  pretty_exceptions_enable=False)


HEADLESS_STORE = "default"
# The console's path on a served API (chalicelib.api.routes.console).
CONSOLE_PATH = "/console"
# What the key `engram demo` serves with may do: everything in its tenant, operations included (the person running
# the demo runs this Engram; the console's Operations page needs it).
DEMO_GRANTS = access.Access({**access.FULL.permissions, "operations": "write"})


@app.callback(invoke_without_command=True)
def _everywhere(ctx: typer.Context,
                add_to_vector_store: list[Path] = typer.Option(
                    None, "--add-to-vector-store", help=f"Alias: engram ingest PATH --store {HEADLESS_STORE}."),
                query_vector_store: str | None = typer.Option(
                    None, "--query-vector-store", help=f"Alias: engram search QUERY --store {HEADLESS_STORE}."),
                vector_store_stats: bool = typer.Option(False, "--vector-store-stats",
                                                        help="Seed 004 alias: engram stats.")) -> None:
    """Log lines go to stderr: stdout is the commands' output (``--json`` readers parse it)."""
    from chalicelib import observability

    observability.log_to_stderr()
    if ctx.invoked_subcommand is not None:
        return
    if add_to_vector_store:
        ctx.invoke(ingest, paths=add_to_vector_store, store=HEADLESS_STORE, max_chunk_tokens=None,
                   overlap_tokens=None, force=False, as_json=False)
    elif query_vector_store is not None:
        ctx.invoke(search, query=query_vector_store, store=HEADLESS_STORE, k=10, filter_json=None, mode="hybrid",
                   threshold=0.0, as_json=False)
    elif vector_store_stats:
        ctx.invoke(stats, as_json=False, operator=False)
    else:
        console.print(ctx.get_help())
console = Console()
err_console = Console(stderr=True)

STORE_OPTION = typer.Option(..., "--store", "-s", help="Vector store name or id (created by ingest if missing).")


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


@app.command()
def ingest(paths: list[Path] = typer.Argument(..., exists=True, help="Files or folders (recursive)."),
           store: str = STORE_OPTION,
           max_chunk_tokens: int | None = typer.Option(None, help="Static strategy: max tokens per chunk."),
           overlap_tokens: int | None = typer.Option(None, help="Static strategy: overlap tokens."),
           force: bool = typer.Option(False, help="Re-ingest files whose content is unchanged."),
           as_json: bool = typer.Option(False, "--json", help="Print the per-file results as JSON.")) -> None:
    """Ingest files into a vector store; print a per-file status summary."""
    files = service.collect_files(paths)
    strategy = None
    if max_chunk_tokens is not None or overlap_tokens is not None:
        strategy = {"type": "static", "static": {"max_chunk_size_tokens": max_chunk_tokens or 800,
                                                  "chunk_overlap_tokens": 400 if overlap_tokens is None
                                                  else overlap_tokens}}
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
            note = service.build_indexes(conn)
    except EngramError as exc:
        _fail(exc)
    if note:
        err_console.print(note, highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps([service.result_dict(r) for r in results], indent=2))
        return
    table = Table(title=f"Ingested into {target.name or target.id} ({target.id})")
    for column in ("file", "status", "chunks", "embedded", "cached", "detail"):
        table.add_column(column, justify="right" if column in ("chunks", "embedded", "cached") else "left")
    for r in results:
        colour = {"completed": "green", "failed": "red", "skipped": "dim"}[r.status]
        detail = f"{r.error['code']}: {r.error['message']}" if r.error else ""
        table.add_row(r.filename, f"[{colour}]{r.status}[/]", str(r.chunk_count), str(r.embedded), str(r.cached),
                      detail)
    console.print(table)
    counts = {s: sum(r.status == s for r in results) for s in ("completed", "failed", "skipped")}
    console.print(f"{len(results)} files: {counts['completed']} completed, {counts['failed']} failed, "
                  f"{counts['skipped']} unchanged")


@app.command()
def search(query: str = typer.Argument(..., help="What to look for."), store: str = STORE_OPTION,
           k: int = typer.Option(10, "-k", help="Number of results (1-50)."),
           filter_json: str | None = typer.Option(None, "--filter", help="OpenAI attribute filter as JSON."),
           mode: str = typer.Option("hybrid", help="hybrid | vector | keyword"),
           threshold: float = typer.Option(0.0, "--threshold",
                                           help="Only results whose relevance score (0-1) reaches this; at 0.5 "
                                                "a query of random words finds nothing 96 % of the time."),
           as_json: bool = typer.Option(False, "--json", help="Print results as a JSON list.")) -> None:
    """Search a vector store: relevance score, file, position, snippet."""
    try:
        filters = json.loads(filter_json) if filter_json else None
    except json.JSONDecodeError as exc:
        err_console.print(f"[bold red]error[/]: --filter is not valid JSON: {exc}")
        raise typer.Exit(code=2) from None
    try:
        with deps.connect() as conn:
            hits = service.search(conn, store, query, k=k, filters=filters, mode=mode, threshold=threshold)
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
def stats(as_json: bool = typer.Option(False, "--json"),
          operator: bool = typer.Option(False, "--operator",
                                        help="Also the drop errors of keys naming no tenant (they may name other "
                                             "tenants' stores and files: the operator's view only).")) -> None:
    """Per store: files by status, chunks, bytes, embedding model and dimension, its backend and the state of its
    index there (indexed or not, points, files pending), whether it is shared; the tenant's
    drop-folder errors (with ``--operator``, also those of objects no tenant owns — a key outside any tenant's
    prefix — each labelled); the last drop-folder sync that covered the tenant (``drop_folder_sync``: scope,
    status, counts)."""
    from chalicelib.store import drop_errors

    with deps.connect() as conn:
        data = service.stats(conn)
        data["drop_errors"] = drop_errors.recent(conn, data["tenant"], unowned=operator)
        data["drop_folder_sync"] = sync_cli.last_sync(conn, data["tenant"])
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"Engram stats — tenant {data['tenant']!r}")
    for column in ("store", "completed", "in_progress", "failed", "chunks", "bytes", "embedding", "index", "shared"):
        table.add_column(column, no_wrap=column == "store")
    for s in data["stores"]:
        f = s["files"]
        table.add_row(f"{s['name'] or ''} ({s['id']})", str(f["completed"]), str(f["in_progress"]), str(f["failed"]),
                      str(s["chunks"]), str(s["usage_bytes"]), f"{s['embedding_model']} ({s['embedding_dim']}d)",
                      f"{s['backend']}: {service.index_label(s['index'])}", "yes" if s["shared"] else "")
    console.print(table)
    if data["drop_folder_sync"] is not None:
        last = data["drop_folder_sync"]
        counts = ", ".join(f"{k} {v}" for k, v in (last["counts"] or {}).items())
        console.print(f"last drop-folder sync ({escape(last['scope'])}): {last['status']} — "
                      f"{escape(last['error'] or counts or 'nothing to do')}")
    for e in data["drop_errors"]:
        owner = f"tenant {e['tenant']!r}" if e["tenant"] == data["tenant"] else (
            f"unknown tenant {e['tenant']!r}" if e["tenant"] else "no tenant")
        console.print(f"[red]drop error[/] ({escape(owner)}) s3://{escape(e['bucket'])}/{escape(e['key'])}: "
                      f"{e['code']}: {escape(e['message'])}")


@app.command()
def delete(store: str = STORE_OPTION,
           file: str | None = typer.Option(None, "--file", help="Only this file (name or id) of the store."),
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
def demo(folder: Path | None = typer.Argument(None, help="Documents to ingest (default: bundled examples)."),
         store: str = typer.Option("demo", "--store", "-s"),
         serve_api: bool = typer.Option(True, "--serve/--no-serve", help="Leave the stack and API running afterwards."),
         host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(8000, "--port"),
         aws_port: int = typer.Option(DEFAULT_AWS_PORT, "--aws-port", help="Local AWS endpoint port (0: any free)."),
         workers: int = typer.Option(1, "--workers", help="Pump workers per queue."),
         timeout_s: float = typer.Option(1800.0, "--timeout", help="Seconds to wait for ingestion.")) -> None:
    """The main job on the local stack: bring up the embedded database, moto (S3/SQS) and the event pump, drop a
    folder into the bucket, wait until every file is processed, run a few searches, then serve the OpenAI-compatible
    API with a fresh key for the CLI's tenant and print how to point the SDK at it."""
    from engram_cli.local import drop as drop_files
    from engram_cli.local import run

    folder = folder or Path(__file__).resolve().parent.parent / "examples" / "docs"
    config = settings()
    database = "DATABASE_URL" if config.database_url else f"embedded ({config.data_dir})"
    from chalicelib.search.backends import for_backend

    vectors = f"{config.vector_backend} ({for_backend(config.vector_backend, config, 0).describe()})"
    console.print(f"[bold]Engram demo[/]: database {database}, "
                  f"embedder {config.embedding_provider}:{config.embedding_model}, vector backend {vectors}")
    from engram_cli.local.stack import StackRunningError

    try:
        services = run.start_services(config, aws_port=aws_port, workers=workers)
    except (OSError, StackRunningError) as exc:
        err_console.print(f"[bold red]error[/]: {exc}")
        raise typer.Exit(code=2) from None
    try:
        state = services.state
        with deps.connect() as conn:  # drops never create tenants; the CLI's own tenant is created as ingest does
            vector_stores.ensure_tenant(conn, config.tenant)
        items = drop_files.plan([folder], config.tenant, store)
        drop_files.upload(state.client("s3"), state.bucket, items)
        names = {i.name for i in items if not i.name.endswith(drop_files.SIDECAR_SUFFIX)}
        console.print(f"dropped {len(items)} objects into s3://{state.bucket}/{config.tenant}/{store}/ "
                      f"(local AWS endpoint {state.endpoint})", highlight=False)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console) as progress:
            task = progress.add_task("ingesting through S3 → SQS → handlers", total=len(names))
            rows = run.wait_for_files(settings(), state, config.tenant, store, names, timeout_s=timeout_s,
                                      on_progress=lambda done: progress.update(task, completed=done))
        table = Table(title=f"Ingested into {store} through the local pipeline")
        for column in ("file", "status", "chunks", "detail"):
            table.add_column(column, justify="right" if column == "chunks" else "left")
        for name in sorted(names):
            row = rows.get(name)
            status = row.status if row else "missing"
            colour = {"completed": "green", "failed": "red"}.get(status, "yellow")
            detail = f"{row.last_error['code']}: {row.last_error['message']}" if row and row.last_error else ""
            table.add_row(name, f"[{colour}]{status}[/]", str(row.chunk_count if row else 0), detail)
        console.print(table)
        counts = {s: sum(r.status == s for r in rows.values()) for s in ("completed", "failed")}
        console.print(f"{len(names)} files: {counts['completed']} completed, {counts['failed']} failed, "
                      f"{len(names) - counts['completed'] - counts['failed']} unfinished")
        for query in service.DEMO_QUERIES:
            search(query, store=store, k=3, filter_json=None, mode="hybrid", threshold=0.0, as_json=False)
        shown = demo_memory.run(settings(), config.tenant, console)
        if serve_api:
            with deps.connect() as conn:  # the demo's user runs this Engram: an operator key (docs/console.md)
                _, secret = api_keys.create_key(conn, config.tenant, "demo", grants=DEMO_GRANTS)
            _serve_until_interrupted(services, host, port, api_key=secret, store=store, memory_model=shown["model"])
        else:
            console.print("Memory through the OpenAI SDK, against `engram serve` (or `./dev demo`):\n"
                          + demo_memory.snippet("http://127.0.0.1:8000/v1", "<an API key>", shown["model"]),
                          highlight=False, soft_wrap=True)
            console.print(f"The console, once served (`./dev demo` or `engram serve`): {console_url(host, port)} — "
                          "sign in with an API key (engram keys create --tenant NAME --operator)", highlight=False,
                          soft_wrap=True)
    finally:
        services.stop()


@app.command()
def serve(host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
          port: int = typer.Option(8000, "--port", help="TCP port (0: any free port)."),
          workers: int = typer.Option(1, "--workers", help="Pump workers per queue (concurrent handler calls)."),
          aws_port: int = typer.Option(DEFAULT_AWS_PORT, "--aws-port",
                                       help="Port of the local AWS endpoint: moto S3, SQS, Secrets Manager "
                                            "(0: any free)."),
          pump: bool = typer.Option(True, "--pump/--no-pump",
                                    help="Run the event pump here (--no-pump: `engram pump`)."),
          api_key: str | None = typer.Option(None, hidden=True),
          store: str | None = typer.Option(None, hidden=True)) -> None:
    """The whole local stack until Ctrl-C: embedded database, moto (S3 drop bucket, SQS queues with DLQs, the bucket
    notification, the DSN secret), the event pump feeding the Chalice handlers, and the OpenAI-compatible API
    (and GET /health)."""
    from engram_cli.local import run
    from engram_cli.local.stack import StackRunningError

    config = settings()
    try:
        services = run.start_services(config, aws_port=aws_port, workers=workers, pump=pump)
    except (OSError, StackRunningError) as exc:
        err_console.print(f"[bold red]error[/]: {exc}")
        raise typer.Exit(code=2) from None
    try:
        _serve_until_interrupted(services, host, port, api_key=api_key, store=store)
    finally:
        services.stop()


def _serve_until_interrupted(services: Any, host: str, port: int, *, api_key: str | None, store: str | None,
                             memory_model: str | None = None) -> None:
    """Start the API on ``services``, print where everything is (with ``memory_model``, the SDK call of the demo's
    conversation with memory on), block until Ctrl-C or SIGTERM."""
    config = settings()
    if config.auth_mode == "dev":
        err_console.print(f"[bold red on yellow] WARNING: ENGRAM_AUTH_MODE=dev — ANY bearer token is accepted and acts "
                          f"as tenant {config.tenant!r}. Never expose this server. [/]")
    running = services.serve_api(host, port)
    state = services.state
    key = api_key or "<a key from: engram keys create --tenant NAME | tail -1>"
    console.print(f"[bold green]Engram console[/] on {console_url(running.host, running.port)} — sign in with "
                  + ("the key below" if api_key else "an API key (engram keys create --tenant NAME --operator)"),
                  highlight=False, soft_wrap=True)
    console.print(f"[bold green]Engram API[/] serving on {running.url} (health: http://{running.host}:{running.port}/health)\n"
                  f"Local AWS (moto) on {state.endpoint}: drop files with `engram drop PATH --store NAME` or any S3 "
                  f"client into s3://{state.bucket}/<tenant>/<store>/; event pump "
                  f"{'running' if services.pump else 'not running (start `engram pump`)'}", highlight=False)
    console.print("Point the OpenAI SDK at it:\n"
                  f"    from openai import OpenAI\n"
                  f"    client = OpenAI(base_url=\"{running.url}\", api_key=\"{key}\")\n"
                  + (f"    store = next(s for s in client.vector_stores.list() if s.name == \"{store}\")\n"
                     f"    client.vector_stores.search(store.id, query=\"...\")\n" if store else "")
                  + f"or: export OPENAI_BASE_URL={running.url} OPENAI_API_KEY={key}", highlight=False, soft_wrap=True)
    if memory_model is not None:
        console.print("A response with memory on:\n" + demo_memory.snippet(running.url, key, memory_model),
                      highlight=False, soft_wrap=True)
    _block_until_signal()


def console_url(host: str, port: int) -> str:
    """Where the console of an API served on ``host:port`` is (``/console``)."""
    return f"http://{host}:{port}{CONSOLE_PATH}"


def _block_until_signal() -> None:
    """Sleep until Ctrl-C or SIGTERM (both end the wait normally)."""
    import signal
    import threading

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


@app.command()
def pump(workers: int = typer.Option(1, "--workers", help="Pollers per queue (concurrent handler calls per queue)."),
         schedule_speedup: float = typer.Option(1.0, "--schedule-speedup",
                                                help="Run schedules this many times faster (tests).")) -> None:
    """Run the event pump alone against the stack an `engram serve --no-pump` (or `serve`) runs for this data
    folder: long-poll the queues, invoke the Chalice handlers, fire the schedules, until Ctrl-C or SIGTERM."""
    from engram_cli.local import run

    state = run.attach_to_running(settings().data_dir)
    if state is None:
        err_console.print(f"[bold red]error[/]: no local stack runs for {settings().data_dir}; start `engram serve`")
        raise typer.Exit(code=2)
    running = run.start_pump(state, workers=workers, schedule_speedup=schedule_speedup)
    err_console.print(f"event pump on {state.endpoint}: queues {', '.join(state.roles.values())}")
    try:
        _block_until_signal()
    finally:
        running.stop()


@app.command("mcp")
def mcp_stdio(api_key: str | None = typer.Option(None, "--api-key", envvar="ENGRAM_API_KEY",
                                                help="Act as this API key (its tenant, permissions and memory "
                                                     "scope); default: ENGRAM_TENANT with full access.")) -> None:
    """Serve Engram's MCP tools (memory and knowledge) over stdin/stdout, for desktop clients on this machine
    (Claude Desktop, Cursor, ...): the same tools as the API's /mcp, on this data folder's database."""
    from chalicelib.access import FULL
    from chalicelib.api import mcp_server
    from chalicelib.api.context import acting_as, resolve_access

    try:
        tenant, grants = resolve_access(f"Bearer {api_key}") if api_key else (settings().tenant, FULL)
    except EngramError as exc:
        _fail(exc)
    kind = "full access" if grants.full else "a restricted key"
    err_console.print(f"engram mcp: serving tenant {tenant!r} over stdio ({kind})")
    with acting_as(tenant, grants):
        mcp_server.serve_stdio()


@app.command()
def drop(paths: list[Path] = typer.Argument(..., exists=True, help="Files or folders (recursive)."),
         store: str = typer.Option(..., "--store", "-s", help="Vector store name or id (created if missing)."),
         tenant: str | None = typer.Option(None, "--tenant", "-t", help="Tenant (default: ENGRAM_TENANT).")) -> None:
    """Upload files into the drop bucket at <tenant>/<store>/<relative path> (sidecar *.metadata.json files as they
    are): the running local stack's, else ENGRAM_BUCKET on AWS. The ingest handler takes it from there."""
    import boto3

    from engram_cli.local import drop as drop_files
    from engram_cli.local import run

    state = run.attach_to_running(settings().data_dir)
    configured_bucket = settings().bucket
    if state is not None:
        s3, bucket = state.client("s3"), state.bucket
        with deps.connect() as conn:  # locally the CLI administers its database: the tenant exists, as ingest does
            vector_stores.ensure_tenant(conn, tenant or settings().tenant)
    elif configured_bucket:
        s3, bucket = boto3.client("s3", region_name=settings().aws_region), configured_bucket
    else:
        err_console.print("[bold red]error[/]: no local stack is running (start `engram serve`) and ENGRAM_BUCKET "
                          "is unset")
        raise typer.Exit(code=2)
    items = drop_files.plan(paths, tenant or settings().tenant, store)
    size = drop_files.upload(s3, bucket, items)
    console.print(f"uploaded {len(items)} files ({size} bytes) to s3://{bucket}/{tenant or settings().tenant}/{store}/",
                  highlight=False)


@app.command()
def redrive(queue: str = typer.Option("all", "--queue", "-q",
                                      help="A queue's role (ingest, embed, memory: see the message table) or all.")
            ) -> None:
    """Move the messages of the dead-letter queues back to their source queues, unchanged: the running local
    stack's, else the AWS queues named by ENGRAM_INGEST_QUEUE, ENGRAM_EMBED_QUEUE, ENGRAM_MEMORY_QUEUE ... (or the
    default names)."""
    import boto3

    from chalicelib.dispatch.table import QUEUES
    from engram_cli.local import redrive as redriver
    from engram_cli.local import run

    roles = [spec.role for spec in QUEUES]
    if queue != "all" and queue not in roles:
        err_console.print(f"[bold red]error[/]: --queue must be one of {', '.join(roles)} or all")
        raise typer.Exit(code=2)
    state = run.attach_to_running(settings().data_dir)
    sqs = state.client("sqs") if state else boto3.client("sqs", region_name=settings().aws_region)
    if state is not None:  # the local stack's queues (a stack may run without some of the table's)
        targets = {role: state.queue_url(state.roles[role]) for role in roles if role in state.roles}
    else:
        targets = {spec.role: redriver.queue_url(sqs, spec.configured(settings()) or spec.name) for spec in QUEUES
                   if queue in ("all", spec.role)}
    if queue != "all" and queue not in targets:
        err_console.print(f"[bold red]error[/]: the local stack has no {queue} queue")
        raise typer.Exit(code=2)
    for role, url in targets.items():
        if queue in ("all", role):
            moved = redriver.redrive(sqs, url)
            console.print(f"{role}: moved {moved} messages from the dead-letter queue back to {url}", highlight=False)


app.command("sync")(sync_cli.sync)
app.add_typer(stores_cli.app, name="stores")
app.add_typer(jobs_cli.app, name="jobs")
app.add_typer(memory_cli.app, name="memory")
app.add_typer(agents_cli.app, name="agents")
app.add_typer(tenants_cli.app, name="tenants")
app.add_typer(conversations_cli.app, name="conversations")

app.add_typer(keys_cli.app, name="keys")


def main() -> Any:
    """Console-script entry point."""
    return app()


if __name__ == "__main__":
    main()
