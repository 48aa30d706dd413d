"""Request bodies of ``/v1/memories`` as pydantic models (strict types, unknown fields refused), and their
translation into the memory package's requests.

Times are integer Unix seconds, like every Engram and OpenAI timestamp. A scope names at least one of
``user_id``, ``agent_id``, ``run_id``: no read or write spans users.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from chalicelib.errors import InvalidRequestError
from chalicelib.memory import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    AddRequest,
    InputMessage,
    MemoryScope,
    MemoryType,
    Query,
    Strategy,
)
from chalicelib.validation import RequestBody

__all__ = ["AddMemories", "ListParams", "SearchMemories", "UpdateMemory", "scope_of", "to_add_request",
           "to_query", "to_time"]

MAX_ID_CHARS = 128
MAX_MESSAGES = 100
MAX_CONTENT_CHARS = 32_768
MAX_CONTENT_PARTS = 100  # text parts per message
MAX_METADATA_BYTES = 16_384  # serialised
MAX_METADATA_KEYS = 64
MAX_CATEGORIES = 16
MAX_TOP_K = 100
MAX_QUERY_CHARS = 4096
# Unix seconds between 1970 and 9999 (what a timestamptz and a datetime both hold).
MAX_UNIX_S = 253_402_300_799

ScopeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
UnixSeconds = Annotated[int, Field(ge=0, le=MAX_UNIX_S)]
Category = Annotated[str, Field(min_length=1, max_length=64)]


def _check_metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if len(value) > MAX_METADATA_KEYS:
        raise ValueError(f"at most {MAX_METADATA_KEYS} keys are allowed, got {len(value)}")
    if any(not key or len(key) > 64 for key in value):
        raise ValueError("keys must be 1 to 64 characters long")
    if len(json.dumps(value)) > MAX_METADATA_BYTES:
        raise ValueError(f"at most {MAX_METADATA_BYTES} bytes of JSON are allowed")
    return value


MemoryMetadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]


class _Body(RequestBody):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True, populate_by_name=True)


class _Scoped(_Body):
    user_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    run_id: ScopeId | None = None

    @model_validator(mode="after")
    def _one_scope(self) -> _Scoped:
        if self.user_id is None and self.agent_id is None and self.run_id is None:
            raise PydanticCustomError("missing_required_parameter", "Missing required parameter: name a scope with at "
                                      "least one of 'user_id', 'agent_id' or 'run_id'.")
        return self


class TextPart(_Body):
    """A content part ``{"type": "text", "text"}`` (also ``input_text`` / ``output_text``)."""

    type: Literal["text", "input_text", "output_text"]
    text: str = Field(max_length=MAX_CONTENT_CHARS)


class MessageIn(_Body):
    """A chat message: ``role``, ``content`` (a string or text parts, at most :data:`MAX_CONTENT_CHARS`
    characters either way: parts are joined by newlines into one memory) and an optional speaker ``name``."""

    role: Literal["user", "assistant", "system"]
    content: Annotated[str, Field(max_length=MAX_CONTENT_CHARS)] | Annotated[
        list[TextPart], Field(max_length=MAX_CONTENT_PARTS)]
    name: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)] | None = None

    @field_validator("content")
    @classmethod
    def _joined_fits(cls, value: str | list[TextPart]) -> str | list[TextPart]:
        if not isinstance(value, str):
            length = sum(len(p.text) for p in value) + max(0, len(value) - 1)  # joined by newlines
            if length > MAX_CONTENT_CHARS:
                raise ValueError(f"its text parts join into {length} characters; at most {MAX_CONTENT_CHARS} are "
                                 "allowed per message")
        return value

    def text(self) -> str:
        """The message's text (parts joined by newlines)."""
        return self.content if isinstance(self.content, str) else "\n".join(p.text for p in self.content)


class AddMemories(_Scoped):
    """``POST /v1/memories``."""

    messages: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)] | Annotated[
        list[MessageIn], Field(min_length=1, max_length=MAX_MESSAGES)]
    metadata: MemoryMetadata | None = None
    infer: bool = True
    memory_type: MemoryType | None = None
    categories: Annotated[list[Category], Field(max_length=MAX_CATEGORIES)] | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    pinned: bool = False
    expires_at: UnixSeconds | None = None
    timestamp: UnixSeconds | None = None
    run_async: bool | None = Field(default=None, alias="async")
    verified: bool = False
    source_type: Literal["user_stated", "inferred", "asset_derived"] | None = None

    @model_validator(mode="after")
    def _working_needs_a_run(self) -> AddMemories:
        if self.memory_type == "working" and self.run_id is None:
            raise ValueError("working memory belongs to a run: 'run_id' is required with memory_type 'working'")
        return self


class Weights(_Body):
    """Explicit ranking weights (≥ 0, not all 0)."""

    vector: float = Field(default=0.0, ge=0.0, le=100.0)
    text: float = Field(default=0.0, ge=0.0, le=100.0)
    recency: float = Field(default=0.0, ge=0.0, le=100.0)
    importance: float = Field(default=0.0, ge=0.0, le=100.0)

    @model_validator(mode="after")
    def _some_weight(self) -> Weights:
        if self.vector + self.text <= 0:
            raise ValueError("at least one of 'vector' and 'text' must be above 0")
        return self


class SearchMemories(_Scoped):
    """``POST /v1/memories/search``."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    filters: dict[str, Any] | None = None
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    memory_types: Annotated[list[MemoryType], Field(max_length=16)] | None = None
    created_after: UnixSeconds | None = None
    created_before: UnixSeconds | None = None
    ranking: Literal["semantic", "keyword", "balanced", "recency", "priority"] | Weights = DEFAULT_STRATEGY  # type: ignore[assignment]
    include_invalidated: bool = False
    as_of: UnixSeconds | None = None


class UpdateMemory(_Body):
    """``POST /v1/memories/{id}``: fields sent change (``expires_at: null`` clears it)."""

    memory: str | None = Field(default=None, min_length=1, max_length=MAX_CONTENT_CHARS)
    metadata: MemoryMetadata | None = None
    memory_type: MemoryType | None = None
    categories: Annotated[list[Category], Field(max_length=MAX_CATEGORIES)] | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    pinned: bool | None = None
    expires_at: UnixSeconds | None = None
    timestamp: UnixSeconds | None = None
    verified: bool | None = None


class ListParams(_Scoped):
    """``GET /v1/memories`` query: the scope, optional ``memory_type`` and ``include_inactive``."""

    memory_type: MemoryType | None = None
    include_inactive: bool = False


def to_time(value: int | None) -> datetime | None:
    """Unix seconds → a timezone-aware UTC datetime (None stays None)."""
    return None if value is None else datetime.fromtimestamp(value, UTC)


def scope_of(body: _Scoped) -> MemoryScope:
    """The scope a body names."""
    return MemoryScope(body.user_id, body.agent_id, body.run_id)


def to_add_request(body: AddMemories, *, source_kind: str = "api", source_id: str | None = None) -> AddRequest:
    """The memory package's add request for a validated body (a string ``messages`` is one user message).

    Raises:
        InvalidRequestError: every message is empty or a system message (nothing to remember).
    """
    if isinstance(body.messages, str):
        messages: tuple[InputMessage, ...] = (InputMessage("user", body.messages),)
    else:
        messages = tuple(InputMessage(m.role, m.text(), m.name) for m in body.messages)
    if not any(m.role != "system" and m.content.strip() for m in messages):
        raise InvalidRequestError("Invalid 'messages': no user or assistant message has any text.",
                                  param="messages", code="invalid_value")
    return AddRequest(messages=messages, scope=scope_of(body), infer=body.infer, metadata=body.metadata or {},
                      memory_type=body.memory_type, categories=tuple(body.categories or ()),
                      importance=body.importance, pinned=body.pinned, expires_at=to_time(body.expires_at),
                      timestamp=to_time(body.timestamp), source_kind=source_kind, source_id=source_id,
                      verified=body.verified, source_type=body.source_type)


def to_query(body: SearchMemories) -> Query:
    """The memory package's search query for a validated body."""
    if isinstance(body.ranking, str):
        strategy = STRATEGIES[body.ranking]
    else:
        strategy = Strategy(body.ranking.vector, body.ranking.text, body.ranking.recency, body.ranking.importance)
    return Query(query=body.query, scope=scope_of(body), top_k=body.top_k, score_threshold=body.score_threshold,
                 filters=body.filters, memory_types=tuple(body.memory_types or ()),
                 created_after=to_time(body.created_after), created_before=to_time(body.created_before),
                 strategy=strategy, include_invalidated=body.include_invalidated, as_of=to_time(body.as_of))
