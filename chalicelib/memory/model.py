"""What a memory is: its kinds (one closed list), the events of its history, who it belongs to (a scope) and the
row it is stored as. Plain values, no database.

**Memory types** (:data:`MEMORY_TYPES`), after seed 000 (episodic facts) and seed 002 (short-term working memory;
semantic persona, knowledge, entities, processes, skills):

- ``fact`` — something true about the user or their world ("Uses PostgreSQL 16");
- ``preference`` — a like, dislike or choice ("Prefers Python for scripting");
- ``episode`` — something that happened, with its time ("Moved to Berlin in May 2023"); also the summary of a
  conversation episode (seed 002 §6, §8: made by the episodes job, its raw messages kept with it);
- ``instance`` — an episode older than 30 days (seed 002 §7, §9): its raw messages compressed, its summary kept
  searchable;
- ``procedural`` — how the user wants things done ("Always write tests first");
- ``working`` — short-term state of one run (a plan, notes, recent context), with a TTL;
- ``persona`` — the user's profile document (style, behaviour patterns);
- ``knowledge`` / ``entity`` / ``process`` / ``skill`` — semantic knowledge the agent learnt.

**Events** (:data:`EVENTS`) recorded in a memory's history: ``ADD`` (new), ``UPDATE`` (a new version replaces it:
the old one is closed with ``valid_to`` and ``superseded_by``), ``INVALIDATE`` (contradicted: closed with
``valid_to`` and ``invalidated_by``, kept), ``DELETE`` (removed; its history keeps the event, not the text),
``ARCHIVE`` / ``RESTORE`` (hidden from recall and back), ``CONSOLIDATE`` (merged into another), ``EXPIRE``,
``FEEDBACK`` (a user's rating of the memory: ``POSITIVE``, ``NEGATIVE`` or ``VERY_NEGATIVE`` with a reason, in the
event's details; the memory itself is unchanged). An add that learns nothing new answers ``NOOP`` (no history row).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

__all__ = [
    "EVENTS",
    "MEMORY_TYPES",
    "Event",
    "Memory",
    "MemoryScope",
    "MemoryType",
    "normalise",
    "text_hash",
]

MemoryType = Literal["fact", "preference", "episode", "instance", "procedural", "working", "persona", "knowledge",
                     "entity", "process", "skill"]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
Event = Literal["ADD", "UPDATE", "INVALIDATE", "DELETE", "ARCHIVE", "RESTORE", "CONSOLIDATE", "EXPIRE", "FEEDBACK"]
EVENTS: tuple[str, ...] = get_args(Event)
SourceKind = Literal["api", "response", "conversation", "file", "job"]

_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?;,]+$")


def normalise(text: str) -> str:
    """The form exact-duplicate detection compares: NFKC, case-folded, whitespace collapsed, trailing punctuation
    dropped ("Likes  pizza." and "likes pizza" are the same memory)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACES.sub(" ", folded).strip())


def text_hash(text: str) -> str:
    """Hex SHA-256 of :func:`normalise` (``memories.hash``)."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whom a memory belongs to: a user, an agent and/or a run (mem0's three ids; at least one). A read names a
    scope and sees the memories whose ids equal every id it names (a search by ``user_id`` also sees that user's
    memories of any agent or run; one by ``user_id`` and ``agent_id`` only that pair's)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.user_id is None and self.agent_id is None and self.run_id is None:
            raise ValueError("a memory scope names at least one of user_id, agent_id, run_id")

    def as_dict(self) -> dict[str, str | None]:
        """``{"user_id", "agent_id", "run_id"}``."""
        return {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}

    def named(self) -> dict[str, str]:
        """Only the ids this scope names."""
        return {k: v for k, v in self.as_dict().items() if v is not None}


@dataclass(frozen=True, slots=True)
class Memory:
    """A row of ``memories`` (migrations/0010_memories.sql; times are timezone-aware UTC; confidence and
    importance in [0, 1]; ``prompt_version``: the ``name@version`` tags of the prompts whose answers wrote its
    text, space-separated, None when stored as written — migration 0021)."""

    seq: int
    id: str
    tenant_id: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    memory: str
    hash: str
    memory_type: str
    categories: list[str]
    confidence: float
    importance: float
    metadata: dict[str, Any]
    source_kind: str
    source_id: str | None
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: str | None
    invalidated_by: str | None
    pinned: bool
    access_count: int
    last_accessed_at: datetime | None
    expires_at: datetime | None
    archived_at: datetime | None
    consolidated_into: str | None
    verified: bool
    source_type: str | None
    created_at: datetime
    updated_at: datetime
    embedding_model: str
    prompt_version: str | None = None

    @property
    def scope(self) -> MemoryScope:
        """The memory's scope."""
        return MemoryScope(self.user_id, self.agent_id, self.run_id)

    def status(self, now: datetime) -> str:
        """``active``, ``superseded``, ``invalidated``, ``consolidated``, ``archived`` or ``expired`` (at ``now``)."""
        if self.superseded_by is not None:
            return "superseded"
        if self.invalidated_by is not None or (self.valid_to is not None and self.valid_to <= now):
            return "invalidated"
        if self.consolidated_into is not None:
            return "consolidated"
        if self.archived_at is not None:
            return "archived"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"
