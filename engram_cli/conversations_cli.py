"""``engram conversations``: the Conversations API from the command line — list a tenant's conversations, show one's
history, continue one (the next turn is a response created in the conversation, answered by the configured chat
model), or start one. Rich output by default, ``--json`` for scripts (the same objects the HTTP API returns).

Every command acts for the CLI's tenant (``ENGRAM_TENANT``, or ``--tenant``) through the same code as
``/v1/conversations`` and ``/v1/responses``; ``continue`` uses ``--model`` or ``ENGRAM_CHAT_MODEL`` and the
configured chat backend (``ENGRAM_CHAT_BASE_URL`` …), and summarizes a long history as the API does.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps
from chalicelib.errors import EngramError
from chalicelib.store.paging import Page

app = typer.Typer(help="Conversations: list, show, continue, create.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

TENANT = typer.Option(None, "--tenant", "-t", help="Tenant (default: ENGRAM_TENANT).")
JSON = typer.Option(False, "--json", help="Print JSON (the API's objects).")
# A function output or file-search result is shown cut to this many characters.
SHOWN_CHARS = 300


def _tenant(tenant: str | None) -> str:
    return tenant or deps.current_settings().tenant


def _fail(exc: EngramError) -> NoReturn:
    err_console.print(f"[bold red]error[/]: {escape(exc.message)}" + (f" ({exc.code})" if exc.code else ""))
    raise typer.Exit(code=2)


def _when(value: int | None) -> str:
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M") if value else ""


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def render(item: dict[str, Any]) -> str:
    """One item as a line of rich markup: ``role: text`` for a message, the call and its arguments, a function's
    output (cut), a file search's queries and result count."""
    from chalicelib.responses.items import text_of

    kind = item.get("type")
    if kind == "message":
        role = item.get("role", "user")
        colour = {"user": "cyan", "assistant": "green"}.get(role, "magenta")
        return f"[bold {colour}]{role}[/]: {escape(text_of(item))}"
    if kind == "function_call":
        return f"[yellow]→ {escape(item.get('name', ''))}({escape(item.get('arguments', ''))})[/]"
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return f"[yellow]← {escape(_cut(text))}[/]"
    if kind == "file_search_call":
        queries = ", ".join(item.get("queries") or [])
        found = len(item.get("results") or [])
        return f"[blue]⌕ file_search {escape(queries)} ({found} results)[/]"
    return escape(json.dumps(item, ensure_ascii=False))


def _show(conversation: dict[str, Any], items: list[dict[str, Any]]) -> None:
    meta = ", ".join(f"{k}={v}" for k, v in conversation["metadata"].items())
    console.print(f"[bold]{conversation['id']}[/] · created {_when(conversation['created_at'])}"
                  + (f" · {escape(meta)}" if meta else "") + f" · {len(items)} items", highlight=False)
    for item in items:
        console.print(render(item), highlight=False)


@app.command("list")
def list_conversations(limit: int = typer.Option(20, min=1, max=100, help="How many (newest first)."),
                       tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """The tenant's conversations, newest first."""
    from chalicelib.responses import conversations

    data, has_more = conversations.list_conversations(deps.current_settings(), _tenant(tenant), Page(limit=limit))
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(data)} conversation(s)" + (" (more: raise --limit)" if has_more else ""))
    table.add_column("id", no_wrap=True)
    table.add_column("created")
    table.add_column("metadata", overflow="fold")
    for c in data:
        table.add_row(c["id"], _when(c["created_at"]), escape(json.dumps(c["metadata"], ensure_ascii=False)))
    console.print(table)


@app.command("show")
def show(conversation_id: str = typer.Argument(..., help="conv_..."), tenant: str | None = TENANT,
         as_json: bool = JSON) -> None:
    """A conversation and every item in it, oldest first."""
    from chalicelib.responses import conversations

    try:
        conversation, items = conversations.transcript(deps.current_settings(), _tenant(tenant), conversation_id)
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps({**conversation, "items": items}, indent=2, ensure_ascii=False))
        return
    _show(conversation, items)


@app.command("continue")
def continue_conversation(
        conversation_id: str = typer.Argument(..., help="conv_..."),
        message: str | None = typer.Argument(None, help="The next user message (default: read from stdin)."),
        model: str | None = typer.Option(None, "--model", "-m", help="Chat model (default: ENGRAM_CHAT_MODEL)."),
        instructions: str | None = typer.Option(None, help="System instructions for this turn."),
        tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Print the conversation so far, send MESSAGE as its next turn and print the answer (added to the
    conversation with the message)."""
    from chalicelib.responses import conversations, service

    settings, owner = deps.current_settings(), _tenant(tenant)
    chosen = model or settings.chat_model
    if not chosen:
        err_console.print("[bold red]error[/]: no chat model: pass --model or set ENGRAM_CHAT_MODEL")
        raise typer.Exit(code=2)
    try:
        conversation, items = conversations.transcript(settings, owner, conversation_id)
        if not as_json:
            _show(conversation, items)
        text = (message if message is not None else sys.stdin.read()).strip()
        if not text:
            err_console.print("[bold red]error[/]: no message (give it as an argument or on stdin)")
            raise typer.Exit(code=2)
        body: dict[str, Any] = {"model": chosen, "input": text, "conversation": conversation_id}
        if instructions:
            body["instructions"] = instructions
        response = service.create_response(settings, owner, body)
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(response, indent=2, ensure_ascii=False))
        return
    console.print(render({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
                  highlight=False)
    for item in response["output"]:
        console.print(render(item), highlight=False)
    usage = response.get("usage") or {}
    summary = usage.get("summary")
    note = f" (history summarized: {summary['summarized_turns']} turns)" if summary else ""
    err_console.print(f"{response['model']}: {usage.get('total_tokens', 0)} tokens{note}", highlight=False)


@app.command("create")
def create(metadata: list[str] = typer.Option(None, "--metadata", help="key=value (repeatable, at most 16)."),
           tenant: str | None = TENANT, as_json: bool = JSON) -> None:
    """Start an empty conversation; prints its id."""
    from chalicelib.responses import conversations

    pairs: dict[str, str] = {}
    for entry in metadata or []:
        key, sep, value = entry.partition("=")
        if not sep or not key:
            err_console.print(f"[bold red]error[/]: --metadata takes key=value, got {escape(repr(entry))}")
            raise typer.Exit(code=2)
        pairs[key] = value
    try:
        conversation = conversations.create(deps.current_settings(), _tenant(tenant), {"metadata": pairs})
    except EngramError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(conversation, indent=2, ensure_ascii=False))
        return
    print(conversation["id"])
