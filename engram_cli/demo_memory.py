"""The demo's second half: agent memory. After the knowledge searches, ``engram demo`` adds a few memories for one
user, searches them, then holds a short conversation through the Responses API with memory on — each turn's
recalled memories shown beside the answer — and prints the SDK call that does the same against the served API.

The conversation uses the configured chat model when there is one (``ENGRAM_CHAT_MODEL`` with a backend); without
one it uses the scripted local model (:mod:`chalicelib.chat.scripted`), and says so: its answers only repeat what
recall put in front of it, which is the point of the demo.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chalicelib import deps, memory
from chalicelib.chat import scripted as scripted_model
from chalicelib.config import Settings

__all__ = ["SCRIPTED_MODEL", "USER", "run", "snippet"]

USER = "ada"
MEMORIES = ("I'm Ada. I moved to Lisbon last year.", "I'm vegetarian and I love cooking Indian food.",
            "I go hiking most weekends.", "I prefer short answers.")
SEARCH = "where does ada live?"
TURNS = ("What could I cook for dinner tonight?", "Any ideas for a weekend walk near home?")
SCRIPTED_MODEL = scripted_model.MODEL
# The demo recalls the user's two best memories. With all-MiniLM-L6-v2 each question's own memory matches it at
# cosine 0.41 (dinner → cooking) and 0.53 (a weekend walk → hiking), the others at 0.03-0.18; 0.1 lets the best
# two through.
RECALL = {"top_k": 2, "score_threshold": 0.1}


def chat_model(settings: Settings) -> tuple[str, bool]:
    """``(model, scripted)``: the configured chat model when a backend serves it, else the scripted local model
    (``scripted`` True), which every Engram serves."""
    from chalicelib.errors import InvalidRequestError

    if settings.chat_model:
        try:
            deps.chat_backend(settings.chat_model, settings)
            return settings.chat_model, False
        except InvalidRequestError:
            pass
    return SCRIPTED_MODEL, True


def run(settings: Settings, tenant: str, console: Console) -> dict[str, Any]:
    """Show memory end to end for ``tenant`` (module docstring); returns what was shown: ``{"added", "found",
    "turns": [{"input", "recalled", "answer"}], "model", "scripted"}``.

    Raises:
        EngramError: the database, the embedder or the chat model failed.
    """
    from chalicelib.responses import conversations, service
    from chalicelib.store import vector_stores

    ctx = memory.context(settings, tenant, actor="cli")
    scope = memory.MemoryScope(user_id=USER)
    with deps.connect() as conn:
        vector_stores.ensure_tenant(conn, tenant)
        memory.purge(conn, ctx, scope)  # the demo user starts afresh on every run
        request = memory.AddRequest(messages=tuple(memory.InputMessage("user", m) for m in MEMORIES), scope=scope,
                                    infer=False)
        added = memory.add(conn, ctx, request, run_async=False).result
        hits = memory.search(conn, ctx, memory.Query(query=SEARCH, scope=scope, top_k=3), touch=False)
    assert added is not None
    table = Table(title=f"Memories of user {USER!r} (added as written, no model needed)")
    table.add_column("event")
    table.add_column("memory", overflow="fold")
    for change in added.changes:
        table.add_row(change.event, escape(change.text))
    console.print(table)
    found = Table(title=f"Memory search: {SEARCH!r}")
    found.add_column("score", justify="right")
    found.add_column("memory", overflow="fold")
    for hit in hits:
        found.add_row(f"{hit.score:.3f}", escape(hit.memory.memory))
    console.print(found)

    model, scripted = chat_model(settings)
    console.print(f"[bold]A conversation with memory on[/] (model {model}"
                  + (": the scripted local model, since no chat model is configured — it only repeats what recall "
                     "gave it" if scripted else "") + ")", highlight=False)
    conversation = conversations.create(settings, tenant, {})["id"]
    turns = []
    for text in TURNS:
        body = {"model": model, "input": text, "conversation": conversation, "include": ["memory_search_call.results"],
                "memory": {"user_id": USER, **RECALL}}
        response = service.create_response(settings, tenant, body)
        recalled = [r["text"] for item in response["output"] if item.get("type") == "memory_search_call"
                    for r in item.get("results") or [] if r.get("type") == "memory"]
        answer = "\n".join(part["text"] for item in response["output"] if item.get("type") == "message"
                           for part in item["content"] if part.get("type") == "output_text")
        console.print(f"[bold cyan]user[/] {escape(text)}\n  [dim]recalled:[/] "
                      + (escape("; ".join(recalled)) if recalled else "[dim]nothing[/]")
                      + f"\n[bold green]assistant[/] {escape(answer)}", highlight=False)
        turns.append({"input": text, "recalled": recalled, "answer": answer})
    return {"added": [c.text for c in added.changes], "found": [h.memory.memory for h in hits], "turns": turns,
            "model": model, "scripted": scripted}


def snippet(base_url: str, key: str, model: str) -> str:
    """The SDK call that holds the demo's conversation against the served API."""
    return (f"    from openai import OpenAI\n"
            f"    client = OpenAI(base_url=\"{base_url}\", api_key=\"{key}\")\n"
            f"    r = client.responses.create(model=\"{model}\", input=\"{TURNS[0]}\",\n"
            f"                                extra_body={{\"memory\": {{\"user_id\": \"{USER}\"}}}})\n"
            f"    print(r.output_text, r.usage.model_extra[\"memory\"])")
