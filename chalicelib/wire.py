"""Shapes that cross module boundaries: OpenAI's value types as validated annotations, statuses as ``Literal``\\s and
wire objects as ``TypedDict``\\s. Plain value types, importable from every layer (the HTTP edge, the domain, the
event handlers) without pulling in any of them.

Limits follow OpenAI's vector-store and Responses contracts (OPENAI-COMPAT.md §2–4): at most 16 metadata or
attribute pairs, keys of 1–64 characters, string values of at most 512 characters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from pydantic import AfterValidator

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_PAIRS",
    "MAX_VALUE_CHARS",
    "Attributes",
    "ErrorBody",
    "FileCounts",
    "FileStatus",
    "LastError",
    "Metadata",
    "check_pairs",
]

# OpenAI's limits on metadata and attributes (OPENAI-COMPAT.md §2 and §3).
MAX_PAIRS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512

# A vector-store file's status (OpenAI's ``vector_store.file.status``).
FileStatus = Literal["in_progress", "completed", "failed", "cancelled"]


class LastError(TypedDict):
    """``last_error`` of a failed file or job: OpenAI's ``code`` (``server_error``, ``invalid_file``,
    ``unsupported_file``, ``rate_limit_exceeded``) and a human ``message``."""

    code: str
    message: str


class FileCounts(TypedDict):
    """``file_counts`` of a vector store or a file batch: files per status, and their ``total``."""

    in_progress: int
    completed: int
    failed: int
    cancelled: int
    total: int


class ErrorBody(TypedDict):
    """The inside of OpenAI's error envelope ``{"error": ErrorBody}``."""

    message: str
    type: str
    param: str | None
    code: str | None


def check_pairs(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Enforce OpenAI's metadata/attribute limits on ``value`` (None passes).

    Raises:
        ValueError: more than :data:`MAX_PAIRS` pairs, a key outside 1–:data:`MAX_KEY_CHARS` characters, or a
            string value longer than :data:`MAX_VALUE_CHARS` (pydantic turns it into a 400 naming the field).
    """
    if value is None:
        return None
    if len(value) > MAX_PAIRS:
        raise ValueError(f"at most {MAX_PAIRS} key-value pairs are allowed, got {len(value)}")
    for key, item in value.items():
        if not key or len(key) > MAX_KEY_CHARS:
            raise ValueError(f"keys must be 1 to {MAX_KEY_CHARS} characters long")
        if isinstance(item, str) and len(item) > MAX_VALUE_CHARS:
            raise ValueError(f"string values must be at most {MAX_VALUE_CHARS} characters long (key {key[:64]!r})")
    return value


# Object metadata: up to 16 string pairs (vector stores, responses, and Engram's own objects).
Metadata = Annotated[dict[str, str], AfterValidator(check_pairs)]
# Vector-store file attributes: up to 16 pairs of strings, numbers or booleans (filterable).
Attributes = Annotated[dict[str, bool | int | float | str], AfterValidator(check_pairs)]
