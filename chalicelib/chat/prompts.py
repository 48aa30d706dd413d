"""Every prompt Engram sends to a chat model, in one place, each with a version and the shape of its answer.

A :class:`Prompt` is a system instruction, a ``name@version`` tag (recorded on what it produced: a memory's
``prompt_version``, a summary's ``prompt``) and, for a JSON answer, the pydantic model the answer must parse into
(:mod:`chalicelib.chat.structured` asks for it with ``response_format`` and validates it). Changing a prompt's text
or answer shape means raising its version, so stored output says which instruction made it.

| prompt | used by | answer |
|---|---|---|
| :data:`MEMORY_EXTRACTION` | an inferring memory add (seed 000, "Memory Extraction") | :class:`ExtractedFacts` |
| :data:`MEMORY_DECISION` | the same add, once per batch: ADD / UPDATE / INVALIDATE / NOOP | :class:`Decisions` |
| :data:`MEMORY_MERGE` | consolidating related memories (seed 000, "Consolidation") | :class:`MergedMemory` |
| :data:`EPISODE_SUMMARY` | the episodes job (seed 002 §6-8) | :class:`EpisodeSummary` |
| :data:`PERSONA` | the persona job (seed 002 §10) | free text |
| :data:`CONVERSATION_SUMMARY` | condensing long Responses histories (seed 000, "Summarization") | free text |
| :data:`QUERY_REWRITE` | vector-store search's ``rewrite_query`` | free text (one line) |

The answer models are lenient where a model's slip is harmless (a fact given as a bare string, a missing
confidence, an unknown memory type → ``fact``) and strict where it is not (empty text, numbers outside [0, 1]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = [
    "CONVERSATION_SUMMARY",
    "EPISODE_SUMMARY",
    "MEMORY_DECISION",
    "MEMORY_EXTRACTION",
    "MEMORY_MERGE",
    "PERSONA",
    "PROMPTS",
    "QUERY_REWRITE",
    "Decision",
    "Decisions",
    "EpisodeSummary",
    "ExtractedFact",
    "ExtractedFacts",
    "MergedMemory",
    "Prompt",
]

MAX_FACTS = 50  # per add: more is a model gone wrong
MAX_FACT_CHARS = 2000
MAX_TAGS = 16
MAX_TAG_CHARS = 64


@dataclass(frozen=True, slots=True)
class Prompt:
    """A system instruction with its ``name``, ``version`` (an integer raised on every change) and the pydantic
    ``answer`` model its JSON answer parses into (None: the answer is free text)."""

    name: str
    version: int
    system: str
    answer: type[BaseModel] | None = None

    @property
    def tag(self) -> str:
        """``name@version``, what outputs record (e.g. ``memory.extraction@1``)."""
        return f"{self.name}@{self.version}"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


def _tags(value: Any) -> Any:
    """Tags as a model writes them: a list of strings, blanks dropped, each cut to 64 characters, at most 16."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t.strip()[:MAX_TAG_CHARS] for t in value if t.strip()][:MAX_TAGS]
    return value  # anything else fails the list[str] check with pydantic's message


def _fact(value: Any) -> Any:
    """A fact given as a bare string is ``{"fact": value}``."""
    return {"fact": value} if isinstance(value, str) else value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _as_id(value: Any) -> Any:
    """A short id as a model writes it: ``"n0"``, ``"0"`` or ``0`` → the string."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Tags = Annotated[list[str], BeforeValidator(_tags)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
FactType = Literal["fact", "preference", "episode", "procedural"]


def _fact_type(value: Any) -> Any:
    return value if value in ("fact", "preference", "episode", "procedural") else "fact"


class ExtractedFact(_Answer):
    """One fact: ``fact`` (1-2,000 characters), ``confidence`` and ``importance`` in [0, 1], ``tags``, ``type``."""

    fact: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    confidence: Unit = 0.9
    importance: Unit = 0.5
    tags: Tags = Field(default_factory=list)
    type: Annotated[FactType, BeforeValidator(_fact_type)] = "fact"


class ExtractedFacts(_Answer):
    """The extraction answer: ``{"facts": [...]}``, at most 50."""

    facts: list[Annotated[ExtractedFact, BeforeValidator(_fact)]] = Field(max_length=MAX_FACTS)


class Decision(_Answer):
    """What to do with one new fact: ``fact`` (its short id ``n0``, ``n1``, …), ``event``, the existing memory it
    updates, contradicts or repeats (``target``, a short id ``0``, ``1``, …) and, for UPDATE, the combined
    ``text``. The ids are checked against what was shown by the caller."""

    fact: Annotated[str, BeforeValidator(_as_id)]
    event: Annotated[Literal["ADD", "UPDATE", "INVALIDATE", "NOOP"], BeforeValidator(_upper)]
    target: Annotated[str | None, BeforeValidator(_as_id)] = None
    text: str | None = None


class Decisions(_Answer):
    """The decision answer: ``{"decisions": [...]}``, one per new fact."""

    decisions: list[Decision]


class MergedMemory(_Answer):
    """The consolidation answer: ``{"memory": "..."}`` (1-2,000 characters)."""

    memory: str = Field(min_length=1, max_length=MAX_FACT_CHARS)


class EpisodeSummary(_Answer):
    """The episode answer: a short ``key``, a ``description``, ``tags`` and an ``importance`` in [0, 1]."""

    key: str = Field(min_length=1)
    description: str = Field(min_length=1)
    tags: Tags = Field(default_factory=list)
    importance: Unit = 0.5


MEMORY_EXTRACTION = Prompt("memory.extraction", 1, """You are a memory extraction system. Given a conversation, \
extract the key facts, decisions and preferences the user expressed that would be useful in future conversations: \
preferences and choices, facts about the user, their people, projects and environment, plans and commitments, and \
events with their time. Do not extract trivial or ephemeral details, greetings, or what the assistant said unless \
the user confirmed it.

Write each fact as a short standalone sentence in the same language the user writes in. Resolve relative times \
("yesterday", "last week") against the conversation date given below and write the absolute date.

Answer with one JSON object and nothing else:
{"facts": [{"fact": "...", "confidence": 0.0-1.0, "tags": ["..."], "type": "fact|preference|episode|procedural", \
"importance": 0.0-1.0}]}
Answer {"facts": []} when there is nothing worth remembering.""", ExtractedFacts)

MEMORY_DECISION = Prompt("memory.decision", 1, """You maintain a user's long-term memory. You are given EXISTING \
memories (each with a short id) and NEW facts just learnt (ids n0, n1, ...). Decide, for every new fact, exactly one \
event:
- "ADD": it is new information.
- "UPDATE": it refines or extends an existing memory about the same thing without contradicting it; give that \
memory's id as "target" and the combined text as "text".
- "INVALIDATE": it contradicts an existing memory (the world changed, or the old memory was wrong); give that \
memory's id as "target". The old memory is kept as history and the new fact is added.
- "NOOP": an existing memory already says it.
Only use ids from the EXISTING list. Answer with one JSON object and nothing else:
{"decisions": [{"fact": "n0", "event": "ADD|UPDATE|INVALIDATE|NOOP", "target": "0", "text": "..."}]}""", Decisions)

MEMORY_MERGE = Prompt("memory.merge", 1, """You merge related memories about the same person into one memory. Keep \
every distinct fact and date, drop repetition, do not invent anything. Write one or two plain sentences in the \
memories' language. Answer with one JSON object and nothing else: {"memory": "..."}""", MergedMemory)

EPISODE_SUMMARY = Prompt("memory.episode_summary", 1, """You summarise one past conversation for a memory \
system. Answer with one JSON object and nothing else: {"key": "a short title (at most 12 words)", "description": \
"2-4 sentences: what was discussed, decided or learnt, with dates", "tags": ["up to 5 topic words"], "importance": \
0.0-1.0}""", EpisodeSummary)

PERSONA = Prompt("memory.persona", 1, """You maintain a user's profile for an assistant. From the memories given, \
write the profile in three short sections with these headings: "Preferences:", "Communication style:", "Behaviour \
patterns:". Use bullet points, keep only what the memories say, and write in the memories' language. Answer with \
the profile text only.""")

# The summary's length target (500 tokens) follows the seed design.
CONVERSATION_SUMMARY = Prompt("responses.conversation_summary", 1, "Summarize the following conversation "
                              "concisely. Preserve key facts, decisions, names, numbers and open questions that "
                              "would be needed to continue the conversation. Do not include greetings or filler.")

QUERY_REWRITE = Prompt("search.query_rewrite", 1, "Rewrite the user's query for searching a collection of "
                       "documents. Keep its meaning and language; spell out abbreviations, fix typos and drop filler "
                       "words; add no facts. Answer with the rewritten query only, on one line, without quotes.")

PROMPTS: tuple[Prompt, ...] = (MEMORY_EXTRACTION, MEMORY_DECISION, MEMORY_MERGE, EPISODE_SUMMARY, PERSONA,
                               CONVERSATION_SUMMARY, QUERY_REWRITE)
