"""The scripted local model: a chat backend with no weights and no network, for the demo and for trying the Responses
API and memory offline. The model name :data:`MODEL` (``engram-scripted``) always reaches it, whatever else is
configured; ``ENGRAM_CHAT_PROVIDER=scripted`` (or a route ``pattern=scripted``) sends other names to it too.

It answers deterministically and says what it is. A free-text answer names itself, repeats the user's last message
and lists what the instructions' ``<memory>`` block recalled (the memories Engram put in front of the model), so
the demo shows recall working without a language model. A JSON answer (``response_format``) is the empty instance
of the requested schema (``{}`` for JSON mode): valid, and saying nothing — it never invents memories. It calls a
tool only when the request forces one (``tool_choice`` ``required`` or a named tool): ``file_search`` with the
user's last message as its query, any other function with ``{}``; after a tool's results it quotes their
beginning. Usage counts whitespace-separated words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from chalicelib.chat.base import ChatRequest, ChatResult, TextDelta, ToolCall, Usage

__all__ = ["LABEL", "MODEL", "ScriptedBackend"]

# The model name that always reaches the scripted backend (chalicelib.chat.routing).
MODEL = "engram-scripted"

# How every free-text answer begins: nobody mistakes it for a real model. It says what is true whatever is
# configured (a request naming engram-scripted reaches it even when a chat model is configured too).
LABEL = "[engram-scripted: a scripted local model, not a language model]"
_BLOCK = re.compile(r"<memory>(.*?)</memory>", re.S)
# Characters of a tool's results quoted in the answer that follows them.
QUOTED_CHARS = 300


class ScriptedBackend:
    """:class:`~chalicelib.chat.base.ChatBackend` answering from the request alone (module docstring)."""

    def complete(self, request: ChatRequest) -> ChatResult:
        """The scripted answer for ``request`` (never raises)."""
        words = sum(len((m.content or "").split()) for m in request.messages)
        call = _forced_call(request)
        if call is not None:
            return ChatResult(text="", tool_calls=(call,), finish_reason="tool_calls", usage=Usage(words, 1))
        text = _json_answer(request.response_format) if request.response_format else _answer(request)
        return ChatResult(text=text, usage=Usage(words, len(text.split())))

    def stream(self, request: ChatRequest) -> Iterator[TextDelta | ChatResult]:
        """The same answer, word by word, then the result."""
        result = self.complete(request)
        for piece in re.findall(r"\S+\s*|\s+", result.text):
            yield TextDelta(piece)
        yield result


def _forced_call(request: ChatRequest) -> ToolCall | None:
    """The tool call a forced ``tool_choice`` asks for, unless the last turn already answered a call."""
    if not request.tools or request.tool_choice in ("auto", "none"):
        return None
    if request.messages and request.messages[-1].role == "tool":
        return None
    choice = request.tool_choice
    name = choice.get("name") if isinstance(choice, dict) else request.tools[0].name
    if name is None:
        return None
    asked = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    arguments = json.dumps({"queries": [asked]}) if name == "file_search" else "{}"
    return ToolCall(id=f"call_scripted_{len(request.messages)}", name=name, arguments=arguments)


def _answer(request: ChatRequest) -> str:
    system = "\n".join(m.content or "" for m in request.messages if m.role == "system")
    asked = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    if request.messages and request.messages[-1].role == "tool":
        found = " ".join((request.messages[-1].content or "").split())
        return "\n".join([LABEL, f"You asked: {asked.strip()}",
                          f"The search found: {found[:QUOTED_CHARS] + ('…' if len(found) > QUOTED_CHARS else '')}"])
    block = _BLOCK.search(system)
    remembered = [line[2:].strip() for line in (block.group(1).splitlines() if block else [])
                  if line.startswith("- ")]
    lines = [LABEL, f"You asked: {asked.strip()}"]
    if remembered:
        lines.append("What I remember about you:")
        lines += [f"- {item}" for item in remembered]
    else:
        lines.append("Nothing I remember about you was recalled for this.")
    return "\n".join(lines)


def _json_answer(response_format: dict[str, Any]) -> str:
    schema = (response_format.get("json_schema") or {}).get("schema") if response_format.get("type") == "json_schema" \
        else None
    return json.dumps(_empty(schema, schema or {}) if schema else {})


def _empty(node: Any, root: dict[str, Any]) -> Any:
    """The smallest instance of a JSON schema: objects with their required properties, empty arrays, "" and 0."""
    if not isinstance(node, dict):
        return None
    if "$ref" in node:
        target: Any = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _empty(target, root)
    if "anyOf" in node:
        return _empty(node["anyOf"][0], root)
    kind = node.get("type")
    if kind == "object":
        properties = node.get("properties") or {}
        return {name: _empty(properties[name], root) for name in node.get("required", []) if name in properties}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False}.get(kind) if isinstance(kind, str) \
        else None
