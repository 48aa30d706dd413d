"""``engram keys``: API keys — create (with a permission per resource and an optional memory scope: what an agent
holding the key may do, :mod:`chalicelib.access`), list, revoke. Only SHA-256 hashes of keys are stored."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import access, deps
from chalicelib.errors import EngramError, InvalidRequestError
from chalicelib.store import api_keys

app = typer.Typer(help="API keys: create, list, revoke (only their SHA-256 hashes are stored).",
                  no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

_LEVEL_HELP = "none, read or write"


def _fail(exc: EngramError) -> None:
    err_console.print(f"[bold red]error[/]: {exc.message}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


def _when(value: Any) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M") if value is not None else ""


def key_dict(key: api_keys.ApiKey) -> dict[str, Any]:
    """JSON shape of an API key (times in Unix seconds, null when unset; ``permissions`` for every resource and the
    bound ``memory_scope`` or null); never the secret or its hash."""
    def ts(value: Any) -> int | None:
        return int(value.timestamp()) if value is not None else None

    return {"id": key.id, "tenant_id": key.tenant_id, "name": key.name, "key_hint": key.key_hint,
            "created_at": ts(key.created_at), "last_used_at": ts(key.last_used_at), "revoked_at": ts(key.revoked_at),
            **key.access.as_dict()}


def grants(levels: dict[str, str | None], *, read_only: bool, scope: dict[str, str | None],
           operations: str | None = None) -> access.Access:
    """The :class:`~chalicelib.access.Access` the options ask for: no data-resource option and no ``--read-only``
    is full access to the tenant's data; ``--read-only`` makes every data resource not named ``read``; once one is
    named, the others are ``none`` (unless ``--read-only``). ``operations`` (``--operator`` is ``write``) is
    ``none`` unless given, whatever else is. ``scope``: the memory scope ids given (None: not given).

    Raises:
        InvalidRequestError: a level other than none / read / write, or a malformed scope id.
    """
    named = {resource: level for resource, level in levels.items() if level is not None}
    if not named and not read_only:
        permissions: dict[str, Any] = {r: "write" for r in access.DATA_RESOURCES}
    else:
        fallback = "read" if read_only else "none"
        permissions = {r: named.get(r, fallback) for r in access.DATA_RESOURCES}
    permissions["operations"] = operations or "none"
    return access.parse(permissions, {name: value for name, value in scope.items() if value is not None})


def _describe(grant: access.Access) -> str:
    if grant.full:
        extra = {"write": " and operator", "read": ", operations read"}.get(grant.level("operations"), "")
        return "full access" + extra
    levels = ", ".join(f"{r} {grant.level(r)}" for r in access.RESOURCES)
    bound = " ".join(f"{k}={v}" for k, v in grant.memory_scope.items())
    return levels + (f"; memories only of {bound}" if bound else "")


@app.command("create")
def create(tenant: str = typer.Option(..., "--tenant", "-t", help="Tenant the key acts as (created if new)."),
           name: str | None = typer.Option(None, "--name", help="A label for the key."),
           files: str | None = typer.Option(None, "--files", help=f"Files and uploads: {_LEVEL_HELP}."),
           vector_stores: str | None = typer.Option(None, "--vector-stores",
                                                    help=f"Vector stores, their files, search: {_LEVEL_HELP}."),
           responses: str | None = typer.Option(None, "--responses",
                                                help=f"Responses, conversations, agent profiles: {_LEVEL_HELP}."),
           memories: str | None = typer.Option(None, "--memories",
                                               help=f"Memories (/v1/memories, mem0, MCP memory tools): {_LEVEL_HELP}."),
           read_only: bool = typer.Option(False, "--read-only",
                                          help="Resources not named get read (without it, none once one is named)."),
           user_id: str | None = typer.Option(None, "--user-id", help="Bind the key's memory calls to this user."),
           agent_id: str | None = typer.Option(None, "--agent-id", help="Bind the key's memory calls to this agent."),
           run_id: str | None = typer.Option(None, "--run-id", help="Bind the key's memory calls to this run."),
           operator: bool = typer.Option(False, "--operator",
                                         help="Also operations write: the tenant's limits, running jobs now "
                                              "(consolidation), the jobs' runs (/v1/jobs, /v1/tenant/limits)."),
           operations: str | None = typer.Option(None, "--operations",
                                                 help=f"Operations (what --operator gives at write): {_LEVEL_HELP}.")
           ) -> None:
    """Create an API key; the secret is printed once, alone on the last line of stdout. Without options the key
    has full access to its tenant's data. Name a resource's level to restrict it (the others become none, or read
    with --read-only); --user-id / --agent-id / --run-id bind every memory call of the key to that scope;
    --operator adds what the people who run Engram do (no key has it unless created with it)."""
    try:
        if operator and operations not in (None, "write"):
            raise InvalidRequestError("--operator is --operations write; give one or the other.",
                                      param="operations", code="invalid_value")
        wanted = grants({"files": files, "vector_stores": vector_stores, "responses": responses,
                         "memories": memories}, read_only=read_only,
                        scope={"user_id": user_id, "agent_id": agent_id, "run_id": run_id},
                        operations="write" if operator else operations)
        with deps.connect() as conn:
            key, secret = api_keys.create_key(conn, tenant, name, grants=wanted)
    except EngramError as exc:
        _fail(exc)
    err_console.print(f"created API key {key.id} for tenant {key.tenant_id!r}"
                      + (f" ({escape(key.name)})" if key.name else "") + f" with {escape(_describe(key.access))}"
                      + " — store the key now, it is not shown again:")
    print(secret)


@app.command("list")
def list_(tenant: str | None = typer.Option(None, "--tenant", "-t", help="Only this tenant's keys."),
          as_json: bool = typer.Option(False, "--json", help="Print the keys as a JSON list.")) -> None:
    """List API keys (all tenants unless --tenant), oldest first, revoked ones included, with what each may do."""
    with deps.connect() as conn:
        keys = api_keys.list_keys(conn, tenant)
    if as_json:
        print(json.dumps([key_dict(k) for k in keys], indent=2))
        return
    table = Table(title="API keys" + (f" of tenant {tenant!r}" if tenant else ""))
    for column in ("id", "tenant", "name", "hint", "access", "created", "last used", "revoked"):
        table.add_column(column, no_wrap=column in ("id", "hint"), overflow="fold")  # ids are copied from here whole
    for k in keys:
        table.add_row(k.id, k.tenant_id, escape(k.name or ""), k.key_hint, escape(_describe(k.access)),
                      _when(k.created_at), _when(k.last_used_at),
                      f"[red]{_when(k.revoked_at)}[/]" if k.revoked_at else "")
    console.print(table)


@app.command("revoke")
def revoke(key_id: str = typer.Argument(..., help="The key's id (key_...), as shown by `engram keys list`.")) -> None:
    """Revoke an API key: requests using it are refused from now on. Exit 1 if unknown or already revoked."""
    with deps.connect() as conn:
        if api_keys.revoke_key(conn, key_id):
            console.print(f"revoked API key {escape(key_id)}")
            return
        known = any(k.id == key_id for k in api_keys.list_keys(conn))
    reason = "is already revoked" if known else "does not exist (see `engram keys list`)"
    err_console.print(f"[bold red]error[/]: API key {escape(repr(key_id))} {reason}")
    raise typer.Exit(code=1)
