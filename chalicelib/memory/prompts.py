"""The two model calls of an inferring add, and the validation of what the model answers.

1. **Extraction** (seed 000, "Memory Extraction Process"): the conversation, its date and the user's language in,
   ``{"facts": [{"fact", "confidence", "tags", "type", "importance"}]}`` out — facts useful in future
   conversations, written in the user's language, dated when they say when.
2. **Decision**, once for the whole batch: the new facts and the existing memories most similar to them, shown
   with short ids ("0", "1", …, never real ids, so the model cannot invent one), in; one decision per new fact out:
   ``ADD``, ``UPDATE`` (it refines memory ``target``: a new version replaces it), ``INVALIDATE`` (it contradicts
   memory ``target``: the old one is closed and kept, the new fact is added) or ``NOOP`` (already known).

Both answers are JSON objects checked field by field (:class:`MalformedOutput` names the problem, which the
writer sends back to the model once before giving up).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from chalicelib.memory.model import MEMORY_TYPES

__all__ = [
    "DECISION_PROMPT",
    "EXTRACTION_PROMPT",
    "Decision",
    "Fact",
    "MalformedOutput",
    "decision_request",
    "extraction_request",
    "parse_decisions",
    "parse_facts",
    "parse_object",
]

MAX_FACTS = 50  # per add: more is a model gone wrong
MAX_FACT_CHARS = 2000

EXTRACTION_PROMPT = """You are a memory extraction system. Given a conversation, extract the key facts, decisions and \
preferences the user expressed that would be useful in future conversations: preferences and choices, facts about \
the user, their people, projects and environment, plans and commitments, and events with their time. Do not \
extract trivial or ephemeral details, greetings, or what the assistant said unless the user confirmed it.

Write each fact as a short standalone sentence in the same language the user writes in. Resolve relative times \
("yesterday", "last week") against the conversation date given below and write the absolute date.

Answer with one JSON object and nothing else:
{"facts": [{"fact": "...", "confidence": 0.0-1.0, "tags": ["..."], "type": "fact|preference|episode|procedural", \
"importance": 0.0-1.0}]}
Answer {"facts": []} when there is nothing worth remembering."""

DECISION_PROMPT = """You maintain a user's long-term memory. You are given EXISTING memories (each with a short id) \
and NEW facts just learnt (ids n0, n1, ...). Decide, for every new fact, exactly one event:
- "ADD": it is new information.
- "UPDATE": it refines or extends an existing memory about the same thing without contradicting it; give that \
memory's id as "target" and the combined text as "text".
- "INVALIDATE": it contradicts an existing memory (the world changed, or the old memory was wrong); give that \
memory's id as "target". The old memory is kept as history and the new fact is added.
- "NOOP": an existing memory already says it.
Only use ids from the EXISTING list. Answer with one JSON object and nothing else:
{"decisions": [{"fact": "n0", "event": "ADD|UPDATE|INVALIDATE|NOOP", "target": "0", "text": "..."}]}"""

_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$", re.IGNORECASE)


class MalformedOutput(ValueError):
    """The model's answer is not the JSON asked for; the message says what is wrong (it is sent back once)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One extracted fact: ``text``, ``confidence`` and ``importance`` in [0, 1], ``tags``, ``memory_type``."""

    text: str
    confidence: float
    importance: float
    tags: list[str]
    memory_type: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with new fact ``fact`` (its index): ``event`` ∈ ADD, UPDATE, INVALIDATE, NOOP; ``target`` the
    index of the existing memory it updates or contradicts (or, for NOOP, repeats; None when unknown); ``text``
    the updated text (UPDATE)."""

    fact: int
    event: str
    target: int | None
    text: str | None


def extraction_request(conversation: str, *, date: str, language_hint: str | None = None) -> list[dict[str, str]]:
    """The extraction call's messages: the system prompt, then the dated conversation."""
    hint = f"\nThe user writes in: {language_hint}." if language_hint else ""
    return [{"role": "system", "content": EXTRACTION_PROMPT},
            {"role": "user", "content": f"Conversation date: {date}.{hint}\n\nConversation:\n{conversation}"}]


def decision_request(existing: list[str], facts: list[Fact]) -> list[dict[str, str]]:
    """The decision call's messages: existing memories as ``[{"id": "0", "text"}, …]``, new facts as
    ``[{"id": "n0", "text"}, …]``."""
    payload = {"existing": [{"id": str(i), "text": text} for i, text in enumerate(existing)],
               "new": [{"id": f"n{i}", "text": fact.text} for i, fact in enumerate(facts)]}
    return [{"role": "system", "content": DECISION_PROMPT},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False)}]


def parse_facts(answer: str) -> list[Fact]:
    """The facts of an extraction answer.

    Raises:
        MalformedOutput: not a JSON object with a ``facts`` list of valid entries.
    """
    data = parse_object(answer)
    facts = data.get("facts")
    if not isinstance(facts, list):
        raise MalformedOutput('the answer must be {"facts": [...]}')
    if len(facts) > MAX_FACTS:
        raise MalformedOutput(f"at most {MAX_FACTS} facts per conversation")
    out = []
    for i, item in enumerate(facts):
        if isinstance(item, str):
            item = {"fact": item}
        if not isinstance(item, dict):
            raise MalformedOutput(f"facts[{i}] must be an object")
        text = item.get("fact")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_FACT_CHARS:
            raise MalformedOutput(f"facts[{i}].fact must be a non-empty string of at most {MAX_FACT_CHARS} characters")
        kind = item.get("type", "fact")
        out.append(Fact(text=text.strip(), confidence=_unit(item.get("confidence", 0.9), f"facts[{i}].confidence"),
                        importance=_unit(item.get("importance", 0.5), f"facts[{i}].importance"),
                        tags=_tags(item.get("tags", []), f"facts[{i}].tags"),
                        memory_type=kind if kind in MEMORY_TYPES else "fact"))
    return out


def parse_decisions(answer: str, *, facts: int, existing: int) -> list[Decision]:
    """One decision per new fact (``facts`` of them) over ``existing`` shown memories.

    Raises:
        MalformedOutput: not a JSON object with a ``decisions`` list; a fact decided twice or not at all; an
            unknown event; a ``target`` that is not one of the shown ids; an UPDATE without text.
    """
    data = parse_object(answer)
    decisions = data.get("decisions")
    if not isinstance(decisions, list):
        raise MalformedOutput('the answer must be {"decisions": [...]}')
    seen: dict[int, Decision] = {}
    for i, item in enumerate(decisions):
        if not isinstance(item, dict):
            raise MalformedOutput(f"decisions[{i}] must be an object")
        fact = _index(item.get("fact"), "n", facts, f"decisions[{i}].fact")
        event = str(item.get("event", "")).upper()
        if event not in ("ADD", "UPDATE", "INVALIDATE", "NOOP"):
            raise MalformedOutput(f"decisions[{i}].event must be ADD, UPDATE, INVALIDATE or NOOP")
        target = None
        if event in ("UPDATE", "INVALIDATE") or item.get("target") not in (None, ""):
            target = _index(item.get("target"), "", existing, f"decisions[{i}].target")
        text = item.get("text")
        if event == "UPDATE" and (not isinstance(text, str) or not text.strip()):
            raise MalformedOutput(f"decisions[{i}].text is required for UPDATE")
        if fact in seen:
            raise MalformedOutput(f"new fact n{fact} is decided twice")
        seen[fact] = Decision(fact, event, target, text.strip() if isinstance(text, str) else None)
    missing = [f"n{i}" for i in range(facts) if i not in seen]
    if missing:
        raise MalformedOutput(f"no decision for {', '.join(missing)}")
    return [seen[i] for i in range(facts)]


def parse_object(answer: str) -> dict[str, Any]:
    """The JSON object a model answered (code fences and text around it tolerated).

    Raises:
        MalformedOutput: no JSON object found.
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
        raise MalformedOutput("the answer is not a JSON object")
    return data


def _unit(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise MalformedOutput(f"{where} must be a number between 0 and 1")
    return float(value)


def _tags(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise MalformedOutput(f"{where} must be a list of strings")
    return [t.strip()[:64] for t in value if t.strip()][:16]


def _index(value: Any, prefix: str, count: int, where: str) -> int:
    text = str(value).strip() if value is not None else ""
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    if not text.isdigit() or not 0 <= int(text) < count:
        shown = f"{prefix}0..{prefix}{count - 1}" if count else "none"
        raise MalformedOutput(f"{where} must be one of the ids shown ({shown}), got {value!r}")
    return int(text)
