"""Token-bounded, boundary-aware chunking (OpenAI's ``static`` and ``auto`` strategies).

Sizes are in the embedder's own tokens (word pieces for all-MiniLM-L6-v2), so a chunk never holds text the
embedder would silently truncate: the effective maximum is ``min(requested, embedder.max_input_tokens)`` and the
resolved sizes are what gets recorded and returned.

Splitting is recursive in the sense of the seeds' "recursive" strategy: text is cut into units at the strongest
boundary that keeps each unit within the limit (paragraph > line > sentence > word > characters), units are
packed greedily, and a full chunk is cut back to the strongest boundary in its last third. Overlap repeats whole
trailing units of the previous chunk, up to ``chunk_overlap_tokens`` tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from chalicelib.embed.base import Tokenizer
from chalicelib.errors import InvalidRequestError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.store.chunks import Chunk
from chalicelib.validation import RequestBody, param_path, validate_tagged
from chalicelib.wire import StaticChunkingStrategy

# OpenAI's static strategy bounds and defaults (vector-store file `chunking_strategy`, OPENAI-COMPAT.md §2).
MIN_CHUNK_TOKENS = 100
MAX_CHUNK_TOKENS = 4096
DEFAULT_CHUNK_TOKENS = 800
DEFAULT_OVERLAP_TOKENS = 400

# Boundary strengths: a unit that starts a paragraph is a better place to cut than one that starts a word.
PARAGRAPH, LINE, SENTENCE, WORD, CHAR = 4, 3, 2, 1, 0
# A full chunk is cut back to a stronger boundary only within its last third (of its tokens).
_CUTBACK_FRACTION = 1 / 3

_PARAGRAPH_RE = re.compile(r"\n[ \t]*\n\s*")
_LINE_RE = re.compile(r"\n\s*")
_SENTENCE_RE = re.compile(r"(?<=[.!?;:。！？；])[\"')\]»”’]*\s+|(?<=[。！？])")
_WORD_RE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ChunkingStrategy:
    """A resolved static strategy: chunks of at most ``max_chunk_size_tokens`` tokens, consecutive chunks sharing
    at most ``chunk_overlap_tokens`` tokens (≤ half the maximum)."""

    max_chunk_size_tokens: int
    chunk_overlap_tokens: int

    def to_openai(self) -> StaticChunkingStrategy:
        """The OpenAI wire shape: ``{"type": "static", "static": {...}}`` (``auto`` is reported resolved)."""
        return {
            "type": "static",
            "static": {
                "max_chunk_size_tokens": self.max_chunk_size_tokens,
                "chunk_overlap_tokens": self.chunk_overlap_tokens,
            },
        }


class _AutoChunking(RequestBody):
    """``{"type": "auto"}``."""

    type: Literal["auto"]


class _StaticSizes(RequestBody):
    """``static`` of a static strategy: sizes in tokens (OpenAI's bounds; the SDK always sends both)."""

    max_chunk_size_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, ge=MIN_CHUNK_TOKENS, le=MAX_CHUNK_TOKENS)
    chunk_overlap_tokens: int = Field(default=DEFAULT_OVERLAP_TOKENS, ge=0)


class _StaticChunking(RequestBody):
    """``{"type": "static", "static": {...}}``."""

    type: Literal["static"]
    static: _StaticSizes


_STRATEGIES: dict[str, type[_AutoChunking] | type[_StaticChunking]] = {"auto": _AutoChunking,
                                                                       "static": _StaticChunking}


def resolve_chunking_strategy(requested: Any, *, embedder_max_tokens: int,
                              param: str = "chunking_strategy") -> ChunkingStrategy:
    """Turn a request's ``chunking_strategy`` (None, ``{"type": "auto"}`` or ``{"type": "static", "static":
    {...}}``) into sizes the embedder can read.

    ``auto`` is OpenAI's 800/400 reduced to the embedder's limit with the same 1:2 overlap ratio. A static request
    above the limit is scaled down the same way (the overlap keeps its proportion), never truncated by the model.

    Raises:
        InvalidRequestError: unknown type or field, non-integer sizes, max outside 100–4096, overlap negative or
            above half of max (``param`` names the field, ``code`` is OpenAI's, see :mod:`chalicelib.validation`).
    """
    if requested is None:
        requested = {"type": "auto"}
    strategy = validate_tagged(_STRATEGIES, requested, prefix=param)
    if isinstance(strategy, _AutoChunking):
        max_tokens, overlap = DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
    else:
        max_tokens, overlap = strategy.static.max_chunk_size_tokens, strategy.static.chunk_overlap_tokens
        if overlap > max_tokens // 2:
            field = param_path(param, "static", "chunk_overlap_tokens")
            raise InvalidRequestError(
                f"Invalid '{field}': integer above maximum value. Expected a value <= {max_tokens // 2} (half of "
                f"max_chunk_size_tokens), but got {overlap} instead.", param=field, code="integer_above_max_value")
    if max_tokens > embedder_max_tokens:
        overlap = min(overlap * embedder_max_tokens // max_tokens, embedder_max_tokens // 2)
        max_tokens = embedder_max_tokens
    return ChunkingStrategy(max_chunk_size_tokens=max_tokens, chunk_overlap_tokens=overlap)


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    tokens: int
    boundary: int  # strength of the boundary at `start`


def chunk_document(document: ParsedDocument, strategy: ChunkingStrategy, tokenizer: Tokenizer) -> list[Chunk]:
    """Split ``document.text`` into chunks of at most ``strategy.max_chunk_size_tokens`` tokens (counted by
    ``tokenizer`` on the final chunk text, so the bound is exact), overlapping by at most
    ``strategy.chunk_overlap_tokens`` tokens. Every non-whitespace character lies in at least one chunk.
    An empty or whitespace-only text gives ``[]``."""
    text = document.text
    limit = strategy.max_chunk_size_tokens
    units = _units(text, tokenizer, limit)
    if not units:
        return []
    spans = _pack(units, text, tokenizer, limit, strategy.chunk_overlap_tokens)
    chunks = []
    for index, (start, end, tokens) in enumerate(spans):
        page_start, page_end = document.page_range(start, end)
        chunks.append(Chunk(index, text[start:end], tokens, start, end, page_start, page_end))
    return chunks


def _units(text: str, tokenizer: Tokenizer, limit: int) -> list[_Unit]:
    """Cut ``text`` into stripped spans of ≤ ``limit`` tokens, each at the strongest boundary that allows it."""
    units: list[_Unit] = []
    for start, end in _split(text, 0, len(text), _PARAGRAPH_RE):
        _descend(text, start, end, PARAGRAPH, tokenizer, limit, units)
    return units


_LEVELS = ((LINE, _LINE_RE), (SENTENCE, _SENTENCE_RE), (WORD, _WORD_RE))


def _descend(text: str, start: int, end: int, boundary: int, tokenizer: Tokenizer, limit: int,
             out: list[_Unit]) -> None:
    """Append units for ``text[start:end]``: always split to sentences (so chunks can fill up and overlap across
    paragraph ends), further to words and characters only where a sentence exceeds ``limit``."""
    for level, pattern in _LEVELS:
        if level >= boundary and boundary != PARAGRAPH:
            continue
        if level == WORD:
            tokens = tokenizer.count(text[start:end])
            if tokens <= limit:
                out.append(_Unit(start, end, tokens, boundary))
                return
        parts = _split(text, start, end, pattern)
        if len(parts) > 1:
            for i, (s, e) in enumerate(parts):
                _descend(text, s, e, boundary if i == 0 else level, tokenizer, limit, out)
            return
    tokens = tokenizer.count(text[start:end])
    if tokens <= limit:
        out.append(_Unit(start, end, tokens, boundary))
        return
    # A single "word" longer than the limit (a URL, a base64 blob, CJK without spaces): cut by characters.
    _cut_characters(text, start, end, boundary, tokenizer, limit, out)


def _cut_characters(text: str, start: int, end: int, boundary: int, tokenizer: Tokenizer, limit: int,
                    out: list[_Unit]) -> None:
    pos = start
    while pos < end:
        lo, hi = pos + 1, end  # largest stop in [lo, hi] whose slice fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if tokenizer.count(text[pos:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        out.append(_Unit(pos, lo, tokenizer.count(text[pos:lo]), boundary if pos == start else CHAR))
        pos = lo


def _split(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Non-empty stripped ``[s, e)`` pieces of ``text[start:end]`` between matches of ``pattern``."""
    pieces = []
    pos = start
    for match in pattern.finditer(text, start, end):
        pieces.append((pos, match.start()) if match.start() > pos else (pos, match.end()))
        pos = match.end()
    pieces.append((pos, end))
    out = []
    for s, e in pieces:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def _pack(units: list[_Unit], text: str, tokenizer: Tokenizer, limit: int, overlap: int) -> list[tuple[int, int, int]]:
    """Greedy packing of units into ``(char_start, char_end, tokens)`` spans with boundary-aware cut-back and
    whole-unit overlap."""
    spans: list[tuple[int, int, int]] = []
    first = 0
    while first < len(units):
        last = first  # inclusive
        total = units[first].tokens
        while last + 1 < len(units) and total + units[last + 1].tokens <= limit:
            last += 1
            total += units[last].tokens
        if last + 1 < len(units):
            last = _cut_back(units, first, last, total)
        # Token counts of joined units can exceed their sum for some tokenizers: verify and shrink.
        start, end = units[first].start, units[last].end
        tokens = tokenizer.count(text[start:end])
        while tokens > limit and last > first:
            last -= 1
            end = units[last].end
            tokens = tokenizer.count(text[start:end])
        spans.append((start, end, tokens))
        if last + 1 >= len(units):
            break
        nxt = last + 1
        carried = 0
        while nxt - 1 > first and carried + units[nxt - 1].tokens <= overlap:
            nxt -= 1
            carried += units[nxt].tokens
        first = nxt
    return spans


def _cut_back(units: list[_Unit], first: int, last: int, total: int) -> int:
    """Index of the last unit to keep: the unit before the strongest boundary found in the chunk's last third."""
    best, best_strength = last, units[last + 1].boundary
    budget = total * _CUTBACK_FRACTION
    tail = 0
    i = last
    while i > first and tail + units[i].tokens <= budget:
        tail += units[i].tokens
        if units[i].boundary > best_strength:
            best, best_strength = i - 1, units[i].boundary
        i -= 1
    return best
