"""Asking a chat model for JSON and getting a validated object back.

:func:`ask` sends a :class:`~chalicelib.chat.prompts.Prompt`'s system instruction and the caller's content with
``response_format`` set to the prompt's answer model as a JSON schema (OpenAI's Structured Outputs,
``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``; each backend falls back to what it
has: JSON mode, or Bedrock's forced tool), parses the answer (code fences and text around the object tolerated),
validates it with the answer model and the caller's own ``check`` (ids the model may only copy, counts), and
sends a malformed answer back once with what is wrong. A second malformed answer raises
:class:`MalformedAnswer`, carrying the tokens spent, so the caller decides: fail with nothing written (a memory
add), fall back (an episode summary) or skip (a consolidation group).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from chalicelib.chat.base import ChatBackend, ChatMessage, ChatRequest, Usage
from chalicelib.chat.prompts import Prompt

__all__ = ["ATTEMPTS", "Answer", "MalformedAnswer", "ask", "parse_object", "response_format"]

# Answers asked for: the first, and one retry of a malformed answer with the problem named.
ATTEMPTS = 2
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)
# JSON Schema keywords OpenAI's strict Structured Outputs refuse (pydantic emits them for constraints/defaults).
_UNSUPPORTED = ("default", "minLength", "maxLength")

T = TypeVar("T")


class MalformedAnswer(ValueError):
    """The model's answer was not the JSON asked for, twice. ``problem`` names what was wrong the last time;
    ``usage`` and ``calls`` are what the attempts cost."""

    def __init__(self, problem: str, *, usage: Usage, calls: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.usage = usage
        self.calls = calls


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    """A validated answer: ``value`` (what ``check`` returned, else the answer model), the ``usage`` and
    ``calls`` it took, and the ``prompt`` tag (``name@version``) that produced it."""

    value: T
    usage: Usage
    calls: int
    prompt: str


def response_format(prompt: Prompt) -> dict[str, Any] | None:
    """OpenAI's ``response_format`` for ``prompt``'s answer model (None for a free-text prompt): a strict JSON
    schema — every property required, no additional properties, no ``default`` or string-length keywords, which
    strict mode refuses (OpenAI, "Structured Outputs: supported schemas"). The lenient answer model still parses
    what a non-strict backend sends."""
    if prompt.answer is None:
        return None
    schema = _strict(copy.deepcopy(prompt.answer.model_json_schema()))
    return {"type": "json_schema",
            "json_schema": {"name": prompt.name.replace(".", "_"), "schema": schema, "strict": True}}


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        for key in _UNSUPPORTED:
            node.pop(key, None)
        for value in node.values():
            _strict(value)
        if node.get("type") == "object" and isinstance(node.get("properties"), dict):
            node["required"] = list(node["properties"])
            node["additionalProperties"] = False
    elif isinstance(node, list):
        for value in node:
            _strict(value)
    return node


def parse_object(answer: str) -> dict[str, Any]:
    """The JSON object in a model's answer (code fences and text around it tolerated).

    Raises:
        ValueError: no JSON object found.
    """
    text = _FENCE.sub("", answer.strip())
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        try:
            data = json.loads(text[start:end + 1]) if 0 <= start < end else None
        except ValueError:
            data = None
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


def ask(backend: ChatBackend, model: str, prompt: Prompt, content: str, *,
        check: Callable[[Any], T] | None = None, max_output_tokens: int | None = None) -> Answer[T]:
    """Ask ``model`` the ``prompt`` about ``content`` and return the validated answer.

    ``check`` receives the parsed answer model and returns the caller's value, raising ``ValueError`` with a
    message the model can act on (it is sent back once) when the answer does not fit what the model was shown.

    Raises:
        MalformedAnswer: two malformed answers (not JSON, not the answer model, refused by ``check``).
        UpstreamError / UpstreamTimeoutError / RateLimitError / InvalidRequestError: the backend failed.
    """
    assert prompt.answer is not None, f"{prompt.tag} has no JSON answer"
    conversation = [ChatMessage("system", prompt.system), ChatMessage("user", content)]
    usage, calls, problem = Usage(), 0, ""
    for _ in range(ATTEMPTS):
        result = backend.complete(ChatRequest(model=model, messages=tuple(conversation), tool_choice="none",
                                              temperature=0.0, max_output_tokens=max_output_tokens,
                                              response_format=response_format(prompt)))
        calls += 1
        usage = usage + result.usage
        try:
            parsed: Any = prompt.answer.model_validate(parse_object(result.text))
            value: T = check(parsed) if check is not None else parsed
            return Answer(value=value, usage=usage, calls=calls, prompt=prompt.tag)
        except ValidationError as exc:
            problem = _describe(exc)
        except ValueError as exc:
            problem = str(exc)
        conversation += [ChatMessage("assistant", result.text),
                         ChatMessage("user", f"That answer is invalid: {problem}. Answer again with the JSON object "
                                             "only.")]
    raise MalformedAnswer(problem, usage=usage, calls=calls)


def _describe(error: ValidationError) -> str:
    """A validation error in a line: ``facts.0.fact: String should have at least 1 character; …``."""
    parts = []
    for entry in error.errors()[:5]:
        where = ".".join(str(p) for p in entry.get("loc", ())) or "answer"
        parts.append(f"{where}: {entry.get('msg', 'invalid')}")
    return "; ".join(parts)
