"""``engram memory``: agent memories from the command line (seed 004's ``/vadd /vquery /vget /vdelete /vstats`` and
``/vdoc`` as commands) — rich tables by default, ``--json`` for scripts (the same objects the HTTP API returns).

Every command acts for the CLI's tenant (``ENGRAM_TENANT``, or ``--tenant``) on the configured database, through
the same memory service as ``/v1/memories``. ``add`` infers (extracts facts with the memory model) when a model is
configured (``ENGRAM_MEMORY_MODEL`` or ``ENGRAM_CHAT_MODEL``) and stores the text as written otherwise;
``--infer/--no-infer`` decides explicitly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps, memory
from chalicelib.errors import EngramError
from chalicelib.memory import MemoryScope

app = typer.Typer(help="Agent memories: add, search, list, get, update, delete, history, purge, stats, restore, audit, "
                       "exchanges.",
                  no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

USER = typer.Option(None, "--user", "-u", help="The user the memories are about (user_id).")
AGENT = typer.Option(None, "--agent", "-a", help="The agent's own scope (agent_id).")
RUN = typer.Option(None, "--run", "-r", help="One run or session (run_id).")
TENANT = typer.Option(None, "--tenant", "-t", help="Tenant (default: ENGRAM_TENANT).")
JSON = typer.Option(False, "--json", help="Print JSON (the API's objects).")


def _tenant(tenant: str | None) -> str:
    return tenant or deps.current_settings().tenant


def _context(tenant: str | None) -> memory.Context:
    """The memory service's context for the CLI's tenant (actor ``cli``)."""
    return memory.context(deps.current_settings(), _tenant(tenant), actor="cli")


def _scope(user: str | None, agent: str | None, run: str | None) -> MemoryScope:
    try:
        return MemoryScope(user, agent, run)
    except ValueError:
        err_console.print("[bold red]error[/]: name a scope: --user, --agent and/or --run")
        raise typer.Exit(code=2) from None


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


def _time(value: str | None, name: str) -> datetime | None:
    """``--as-of`` / ``--timestamp``: Unix seconds or an ISO 8601 date/time (UTC unless it says otherwise)."""
    if value is None:
        return None
    try:
        if value.isdigit():
            return datetime.fromtimestamp(int(value), UTC)
        parsed = datetime.fromisoformat(value)
    except (ValueError, OverflowError):
        err_console.print(f"[bold red]error[/]: {name} must be Unix seconds or an ISO 8601 date, got {value!r}")
        raise typer.Exit(code=2) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _when(value: int | None) -> str:
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M") if value else ""


def _memories_table(title: str, rows: list[dict[str, Any]], *, scored: bool = False) -> Table:
    table = Table(title=title, show_lines=False)
    if scored:
        table.add_column("score", justify="right")
    table.add_column("memory", overflow="fold", ratio=3)
    for column in ("type", "status", "valid from"):
        table.add_column(column, overflow="fold")
    table.add_column("id", no_wrap=True)
    for m in rows:
        cells = [escape(m["memory"]), m["memory_type"], m["status"], _when(m["valid_from"]), m["id"]]
        table.add_row(*([f"{m['score']:.3f}"] if scored else []), *cells)
    return table


@app.command("add")
def add(text: list[str] = typer.Argument(None, help="What to remember (one memory per argument without inference)."),
        user: str | None = USER, agent: str | None = AGENT, run: str | None = RUN,
        file: Path | None = typer.Option(None, "--file", "-f", exists=True, dir_okay=False,
                                         help="A document: parsed, chunked and stored as knowledge memories."),
        infer: bool | None = typer.Option(None, "--infer/--no-infer",
                                          help="Extract facts with the memory model (default: when one is "
                                               "configured)."),
        memory_type: str | None = typer.Option(None, "--type", help="fact, preference, episode, procedural, ..."),
        timestamp: str | None = typer.Option(None, help="When it was said (Unix seconds or ISO 8601)."),
        pinned: bool = typer.Option(False, help="Exempt from decay and archiving."),
        tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Remember TEXT (or a --file) for a scope; prints what changed (ADD, UPDATE, INVALIDATE, NOOP)."""
    from chalicelib.api import objects
    from chalicelib.store import vector_stores

    scope = _scope(user, agent, run)
    if not text and file is None:
        err_console.print("[bold red]error[/]: give the TEXT to remember or --file PATH")
        raise typer.Exit(code=2)
    if memory_type is not None and memory_type not in memory.MEMORY_TYPES:
        err_console.print(f"[bold red]error[/]: --type must be one of {', '.join(memory.MEMORY_TYPES)}")
        raise typer.Exit(code=2)
    ctx = _context(tenant)
    try:
        with deps.connect() as conn:
            vector_stores.ensure_tenant(conn, ctx.tenant_id)
            if file is not None:
                result = memory.add_document(conn, ctx, scope, filename=file.name, data=file.read_bytes(),
                                             pinned=pinned)
            else:
                use_model = infer if infer is not None else memory.model_name(ctx.settings) is not None
                request = memory.AddRequest(messages=tuple(memory.InputMessage("user", t) for t in text),
                                            scope=scope, infer=use_model, memory_type=memory_type, pinned=pinned,
                                            timestamp=_time(timestamp, "--timestamp"))
                added = memory.add(conn, ctx, request, run_async=False)
                assert added.result is not None
                result = added.result
    except EngramError as exc:
        _fail(exc)
    body = objects.memory_add_result(result)
    if as_json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(body['results'])} change(s)")
    for column in ("event", "id", "memory", "previous"):
        table.add_column(column, overflow="fold")
    for r in body["results"]:
        table.add_row(r["event"], r["id"] or "", escape(r["memory"]), escape(r.get("previous_memory") or ""))
    console.print(table)
    usage = body["usage"]
    if usage["model_calls"]:
        console.print(f"model {usage['model']}: {usage['model_calls']} call(s), {usage['total_tokens']} tokens")


@app.command("search")
def search(query: str = typer.Argument(..., help="What to recall."), user: str | None = USER,
           agent: str | None = AGENT, run: str | None = RUN,
           top_k: int = typer.Option(10, "--top-k", "-k", min=1, max=100, help="Results (1-100)."),
           ranking: str = typer.Option("balanced", help="semantic | keyword | balanced | recency | priority"),
           as_of: str | None = typer.Option(None, "--as-of", help="What was valid then (Unix seconds or ISO 8601)."),
           include_invalidated: bool = typer.Option(False, help="Show closed memories too."),
           tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Search a scope's memories; scores with their parts."""
    from chalicelib.api import objects

    if ranking not in memory.STRATEGIES:
        err_console.print(f"[bold red]error[/]: --ranking must be one of {', '.join(memory.STRATEGIES)}")
        raise typer.Exit(code=2)
    query_ = memory.Query(query=query, scope=_scope(user, agent, run), top_k=top_k,
                          strategy=memory.STRATEGIES[ranking], include_invalidated=include_invalidated,
                          as_of=_time(as_of, "--as-of"))
    try:
        with deps.connect() as conn:
            hits = memory.search(conn, _context(tenant), query_)
    except EngramError as exc:
        _fail(exc)
    page = objects.memory_search_page(query, hits)
    if as_json:
        print(json.dumps(page["data"], indent=2, ensure_ascii=False))
        return
    console.print(_memories_table(f"{len(hits)} memories for {query!r}", page["data"], scored=True))


@app.command("list")
def list_memories(user: str | None = USER, agent: str | None = AGENT, run: str | None = RUN,
                  memory_type: str | None = typer.Option(None, "--type", help="Only this type."),
                  include_inactive: bool = typer.Option(False, "--all", help="Closed, archived, expired too."),
                  limit: int = typer.Option(50, min=1, max=100), tenant: str | None = TENANT,
                  as_json: bool = JSON) -> None:
    """A scope's memories, newest first."""
    from chalicelib.api import objects
    from chalicelib.store.paging import Page

    with deps.connect() as conn:
        rows, has_more = memory.list_page(conn, _context(tenant), _scope(user, agent, run), Page(limit=limit),
                                          memory_types=[memory_type] if memory_type else None,
                                          include_inactive=include_inactive)
    data = [objects.memory_object(m) for m in rows]
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console.print(_memories_table(f"{len(data)} memories" + (" (more: raise --limit)" if has_more else ""), data))


@app.command("get")
def get(memory_id: str = typer.Argument(..., help="mem_..."), tenant: str | None = TENANT,
        as_json: bool = JSON) -> None:
    """One memory, every field."""
    from chalicelib.api import objects

    try:
        with deps.connect() as conn:
            body = objects.memory_object(memory.get(conn, _context(tenant), memory_id))
    except EngramError as exc:
        _fail(exc)
    _show_object(memory_id, body, as_json)


def _show_object(title: str, body: dict[str, Any], as_json: bool) -> None:
    """One wire object: JSON, or a two-column table (times shown as dates, lists and objects as JSON)."""
    if as_json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return
    table = Table(title=title, show_header=False)
    for key, value in body.items():
        shown = _when(value) if key.endswith(("_at", "valid_from", "valid_to")) and isinstance(value, int) else value
        table.add_row(key, escape(json.dumps(shown, ensure_ascii=False) if isinstance(shown, dict | list)
                                  else str(shown if shown is not None else "")))
    console.print(table)


@app.command("update")
def update(memory_id: str = typer.Argument(..., help="mem_..."), text: str = typer.Argument(..., help="The new text."),
           timestamp: str | None = typer.Option(None, help="When it became true (Unix seconds or ISO 8601)."),
           tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Give a memory new text: a new version with the same id; the old one stays visible with --as-of."""
    from chalicelib.api import objects

    try:
        with deps.connect() as conn:
            updated = memory.update(conn, _context(tenant), memory_id, text=text,
                                    valid_from=_time(timestamp, "--timestamp"))
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(objects.memory_object(updated), indent=2, ensure_ascii=False))
        return
    console.print(f"updated {memory_id}: {escape(updated.memory)}")


@app.command("delete")
def delete(memory_id: str = typer.Argument(..., help="mem_..."), tenant: str | None = TENANT) -> None:
    """Delete a memory and its earlier versions (its history keeps the events, not the text)."""
    with deps.connect() as conn:
        deleted = memory.delete(conn, _context(tenant), memory_id)
    if not deleted:
        err_console.print(f"[bold red]error[/]: no memory {memory_id!r}")
        raise typer.Exit(code=2)
    console.print(f"deleted {memory_id}")


@app.command("history")
def history(memory_id: str = typer.Argument(..., help="mem_..."), tenant: str | None = TENANT,
            as_json: bool = JSON) -> None:
    """Every event of a memory, oldest first."""
    from chalicelib.api import objects

    try:
        with deps.connect() as conn:
            rows, _ = memory.history(conn, _context(tenant), memory_id)
    except EngramError as exc:
        _fail(exc)
    data = [objects.memory_history_entry(r) for r in rows]
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"history of {memory_id}")
    for column in ("when", "event", "actor", "old", "new"):
        table.add_column(column, overflow="fold")
    for e in data:
        table.add_row(_when(e["created_at"]), e["event"], e["actor"], escape(e["old_memory"] or ""),
                      escape(e["new_memory"] or ""))
    console.print(table)


@app.command("purge")
def purge(user: str | None = USER, agent: str | None = AGENT, run: str | None = RUN,
          everything: bool = typer.Option(False, "--all", help="Every user, agent and run of the tenant (instead "
                                          "of --user / --agent / --run)."),
          yes: bool = typer.Option(False, "--yes", help="Do not ask."), tenant: str | None = TENANT,
          as_json: bool = JSON) -> None:
    """Remove a scope's memories and every trace of their text (history, jobs, idempotency records, cache)."""
    if everything and (user or agent or run):
        err_console.print("[bold red]error[/]: --all purges every scope; do not name one with it")
        raise typer.Exit(code=2)
    scope = None if everything else _scope(user, agent, run)
    named = "the whole tenant" if scope is None else scope.named()
    if not yes and not typer.confirm(f"Purge every memory of {named}?"):
        raise typer.Exit(code=1)
    with deps.connect() as conn:
        counts = memory.purge(conn, _context(tenant), scope)
    if as_json:
        ids = scope.as_dict() if scope is not None else {"user_id": None, "agent_id": None, "run_id": None}
        print(json.dumps({"deleted": True, **ids, "scope": {**ids, "all": scope is None}, "counts": counts},
                         indent=2))
        return
    console.print("purged: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))


@app.command("stats")
def stats(user: str | None = USER, agent: str | None = AGENT, run: str | None = RUN, tenant: str | None = TENANT,
          as_json: bool = JSON) -> None:
    """Counts of the tenant's memories (or one scope's): by status and, for active ones, by type; and its stored
    exchanges."""
    scope = MemoryScope(user, agent, run) if (user or agent or run) else None
    with deps.connect() as conn:
        data = memory.stats(conn, _context(tenant), scope)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"memories of tenant {_tenant(tenant)!r}" + (f" {scope.named()}" if scope else ""))
    table.add_column("count")
    table.add_column("n", justify="right")
    for key, value in data.items():
        if key == "active_by_type":
            for kind, n in value.items():
                table.add_row(f"active {kind}", str(n))
        else:
            table.add_row(key, str(value))
    console.print(table)


@app.command("reindex")
def reindex(backend: str = typer.Option(..., "--backend", "-b", help="Where the histories go: qdrant or pgvector."),
            tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Move the tenant's memories and exchanges to another vector backend without embedding anything again (the
    tenant's new histories go there too). Searches keep working during the move; an interrupted move resumes when
    run again. Exit 2 on bad input, 1 if the move failed (run it again to resume)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from chalicelib.search.backends import names

    if backend not in names():
        err_console.print(f"[bold red]error[/]: unknown vector backend {escape(repr(backend))}: choose one of "
                          f"{', '.join(names())}")
        raise typer.Exit(code=2)
    try:
        with deps.connect() as conn, Progress(
                TextColumn("moving {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=err_console, disable=as_json) as bar:
            task = bar.add_task(f"histories of {_tenant(tenant)} to {backend}", total=None)
            moved = memory.reindex(conn, _context(tenant), backend,
                                   progress=lambda done, total: bar.update(task, completed=done, total=total))
    except EngramError as exc:
        err_console.print(f"[bold red]error[/]: {escape(exc.message)}" + (f" ({exc.code})" if exc.code else ""))
        raise typer.Exit(code=2 if exc.status < 500 else 1) from None
    outcome = {"tenant": _tenant(tenant), "backend": moved.backend, "partitions": moved.partitions,
               "rows": moved.rows, "resumed": moved.resumed}
    if as_json:
        print(json.dumps(outcome, indent=2))
        return
    console.print(f"{outcome['tenant']}: {moved.partitions} histories on {moved.backend}, {moved.rows} rows written"
                  + (" (resumed)" if moved.resumed else ""))


exchanges_app = typer.Typer(help="Stored exchanges (each completed turn with memory on): list, get, delete; "
                                 "`engram memory stats` counts them.", no_args_is_help=True)
app.add_typer(exchanges_app, name="exchanges")


@exchanges_app.command("list")
def list_exchanges(user: str | None = USER, agent: str | None = AGENT, run: str | None = RUN,
                   thread: str | None = typer.Option(None, "--thread", help="Only this thread's."),
                   session: str | None = typer.Option(None, "--session", help="Only this session's."),
                   limit: int = typer.Option(50, min=1, max=100), tenant: str | None = TENANT,
                   as_json: bool = JSON) -> None:
    """A scope's stored exchanges, newest first."""
    from chalicelib.api import objects
    from chalicelib.store.paging import Page

    with deps.connect() as conn:
        rows, has_more = memory.exchanges_page(conn, _context(tenant), _scope(user, agent, run), Page(limit=limit),
                                               thread_id=thread, session_id=session)
    data = [objects.exchange_object(e) for e in rows]
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(data)} exchanges" + (" (more: raise --limit)" if has_more else ""))
    for column in ("id", "when", "thread", "user", "assistant"):
        table.add_column(column, overflow="fold")
    for e in data:
        table.add_row(e["id"], _when(e["created_at"]), e["thread_id"], escape(e["user_prompt"][:200]),
                      escape(e["assistant_response"][:200]))
    console.print(table)


@exchanges_app.command("get")
def get_exchange(exchange_id: str = typer.Argument(..., help="exch_..."), tenant: str | None = TENANT,
                 as_json: bool = JSON) -> None:
    """One stored exchange, every field."""
    from chalicelib.api import objects

    try:
        with deps.connect() as conn:
            body = objects.exchange_object(memory.exchange(conn, _context(tenant), exchange_id))
    except EngramError as exc:
        _fail(exc)
    _show_object(exchange_id, body, as_json)


@exchanges_app.command("delete")
def delete_exchange(exchange_id: str = typer.Argument(..., help="exch_..."), tenant: str | None = TENANT) -> None:
    """Delete one stored exchange: recall no longer finds it (the conversation it came from stays)."""
    with deps.connect() as conn:
        if not memory.delete_exchange(conn, _context(tenant), exchange_id):
            err_console.print(f"[bold red]error[/]: no exchange {exchange_id!r} (not_found)")
            raise typer.Exit(code=2)
    console.print(f"deleted {exchange_id}")


@app.command("restore")
def restore(memory_id: str = typer.Argument(..., help="mem_..."), tenant: str | None = TENANT) -> None:
    """Bring an archived or merged memory back into recall."""
    try:
        with deps.connect() as conn:
            memory.restore(conn, _context(tenant), memory_id)
    except EngramError as exc:
        _fail(exc)
    console.print(f"restored {memory_id}")


@app.command("audit")
def audit_log(limit: int = typer.Option(50, min=1, max=100), event: str | None = typer.Option(None),
              user: str | None = USER, tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """The tenant's memory lifecycle audit, newest first (ids and counts, never text)."""
    from chalicelib.api import objects

    with deps.connect() as conn:
        rows, _ = memory.audit_page(conn, _context(tenant), limit=limit, event=event, user_id=user)
    data = [objects.memory_audit_entry(r) for r in rows]
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"memory audit of tenant {_tenant(tenant)!r}")
    for column in ("when", "event", "entity", "scope", "actor", "details"):
        table.add_column(column, overflow="fold")
    for e in data:
        scope = " ".join(f"{k[0]}={e[k]}" for k in ("user_id", "agent_id", "run_id") if e.get(k))
        table.add_row(_when(e["created_at"]), e["event"], e["entity_id"] or e["entity_type"], escape(scope),
                      e["actor"], escape(json.dumps(e["details"])))
    console.print(table)
