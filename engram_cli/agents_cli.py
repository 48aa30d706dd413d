"""``engram agents``: agent profiles (``/v1/agents``) from the command line — create, list, show, delete. A profile
gives responses that name it (``extra_body={"agent": ID}``) their model, instructions, ``file_search`` stores and
memory settings."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps
from chalicelib.errors import EngramError

app = typer.Typer(help="Agent profiles: create, list, show, delete.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _tenant(tenant: str | None) -> str:
    return tenant or deps.current_settings().tenant


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


@app.command("create")
def create(name: str = typer.Option(..., help="A name for people."),
           model: str | None = typer.Option(None, help="Chat model (default: the request's)."),
           instructions: str | None = typer.Option(None, help="System instructions."),
           store: list[str] = typer.Option([], "--store", "-s", help="vs_ id for file_search (repeatable)."),
           recall: bool = typer.Option(True, "--recall/--no-recall", help="Recall memories before answering."),
           remember: bool = typer.Option(True, "--remember/--no-remember", help="Remember exchanges after."),
           memory: bool = typer.Option(False, "--memory/--no-memory", help="Turn memory on for this agent."),
           tenant: str | None = typer.Option(None, "--tenant", "-t"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Create a profile; prints its id (``agent_…``)."""
    from chalicelib.api import objects
    from chalicelib.responses import agents, schemas
    from chalicelib.store import vector_stores
    from chalicelib.validation import validate

    tools: list[dict[str, Any]] = [{"type": "file_search", "vector_store_ids": store}] if store else []
    values: dict[str, Any] = {"name": name, "model": model, "instructions": instructions, "tools": tools,
                              "memory": {"recall": recall, "remember": remember} if memory else None,
                              "metadata": {}}
    try:
        if values["memory"] is not None:
            validate(schemas.MemoryOptions, values["memory"])
        with deps.connect() as conn:
            vector_stores.ensure_tenant(conn, _tenant(tenant))
            agents.check_tools(conn, _tenant(tenant), tools)
            agent = agents.create(conn, _tenant(tenant), values)
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(objects.agent_object(agent), indent=2))
        return
    console.print(f"created agent {agent.id} ({escape(name)})")


@app.command("list")
def list_agents(tenant: str | None = typer.Option(None, "--tenant", "-t"),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """The tenant's profiles, newest first."""
    from chalicelib.api import objects
    from chalicelib.responses import agents
    from chalicelib.store.paging import Page

    with deps.connect() as conn:
        rows, _ = agents.list_page(conn, _tenant(tenant), Page(limit=100))
    data = [objects.agent_object(a) for a in rows]
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"agents of tenant {_tenant(tenant)!r}")
    for column in ("id", "name", "model", "tools", "memory"):
        table.add_column(column, overflow="fold")
    for a in data:
        table.add_row(a["id"], escape(a["name"] or ""), a["model"] or "", ", ".join(t["type"] for t in a["tools"]),
                      json.dumps(a["memory"]) if a["memory"] else "off")
    console.print(table)


@app.command("show")
def show(agent_id: str = typer.Argument(..., help="agent_..."),
         tenant: str | None = typer.Option(None, "--tenant", "-t")) -> None:
    """One profile as JSON."""
    from chalicelib.api import objects
    from chalicelib.responses import agents

    try:
        with deps.connect() as conn:
            agent = agents.get(conn, _tenant(tenant), agent_id)
    except EngramError as exc:
        _fail(exc)
    print(json.dumps(objects.agent_object(agent), indent=2))


@app.command("delete")
def delete(agent_id: str = typer.Argument(..., help="agent_..."),
           tenant: str | None = typer.Option(None, "--tenant", "-t")) -> None:
    """Delete a profile (its memories stay in the agent_id scope)."""
    from chalicelib.responses import agents

    try:
        with deps.connect() as conn:
            agents.delete(conn, _tenant(tenant), agent_id)
    except EngramError as exc:
        _fail(exc)
    console.print(f"deleted {agent_id}")
