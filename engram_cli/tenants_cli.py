"""``engram tenants``: a tenant's limits (seed 000 "Data Retention": storage, files, memory entries, archiving)
and its memory defaults for responses."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from chalicelib import deps
from chalicelib.errors import EngramError

app = typer.Typer(help="Tenants: limits, memory defaults and the drop folder.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}")
    raise typer.Exit(code=2)


@app.command("limits")
def limits(tenant: str = typer.Argument(..., help="The tenant."),
           set_: list[str] = typer.Option([], "--set", help="NAME=VALUE (an integer; 'default' resets)."),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a tenant's limits, or change some with --set."""
    from chalicelib.store import tenants

    changes: dict[str, int | None] = {}
    for item in set_:
        name, sep, value = item.partition("=")
        if not sep or not (value.isdigit() or value == "default"):
            err_console.print(f"[bold red]error[/]: --set takes NAME=INTEGER or NAME=default, got {item!r}")
            raise typer.Exit(code=2)
        changes[name.strip()] = None if value == "default" else int(value)
    try:
        with deps.connect() as conn:
            current = tenants.set_limits(conn, tenant, changes) if changes else tenants.limits(conn, tenant)
    except EngramError as exc:
        _fail(exc)
    data = {name: getattr(current, name) for name in tenants.TenantLimits.names()}
    if as_json:
        print(json.dumps(data, indent=2))
        return
    table = Table(title=f"limits of tenant {tenant!r}")
    table.add_column("limit")
    table.add_column("value", justify="right")
    for name, value in data.items():
        table.add_row(name, f"{value:,}")
    console.print(table)


@app.command("memory")
def memory_defaults(tenant: str = typer.Argument(..., help="The tenant."),
                    set_json: str | None = typer.Option(None, "--set", help='JSON, e.g. \'{"recall": true}\'; '
                                                                            '"null" turns the defaults off.')) -> None:
    """Show (or set) the tenant's memory defaults for responses: memory is on for every response when set."""
    from chalicelib.responses.schemas import MemoryOptions
    from chalicelib.store import tenants
    from chalicelib.validation import validate

    try:
        with deps.connect() as conn:
            if set_json is not None:
                try:
                    value = json.loads(set_json)
                except json.JSONDecodeError as exc:
                    err_console.print(f"[bold red]error[/]: --set is not JSON: {exc}")
                    raise typer.Exit(code=2) from None
                if value is not None:
                    value = validate(MemoryOptions, value).model_dump(exclude_none=True)
                tenants.set_memory_defaults(conn, tenant, value)
            print(json.dumps(tenants.memory_defaults(conn, tenant)))
    except EngramError as exc:
        _fail(exc)


@app.command("drop-folder")
def drop_folder(tenant: str = typer.Argument(..., help="The tenant."),
                enable: bool | None = typer.Option(None, "--enable/--disable",
                                                   help="Turn the tenant's drop folder on or off.")) -> None:
    """Show (or turn on or off) the tenant's drop folder: when off, every object written under ``<tenant>/`` in the
    drop bucket is refused (``engram stats`` lists it as drop_folder_disabled) and nothing is ingested."""
    from chalicelib.store import tenants

    try:
        with deps.connect() as conn:
            if enable is not None:
                tenants.set_drop_folder(conn, tenant, enable)
            enabled = tenants.drop_folder_enabled(conn, tenant)
    except EngramError as exc:
        _fail(exc)
    print(json.dumps({"tenant": tenant, "drop_folder": "enabled" if enabled else "disabled"}))
