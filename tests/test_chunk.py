"""Chunking properties: token bounds (exact, by the tokenizer), overlap bounds, coverage, strategy resolution."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.errors import InvalidRequestError
from chalicelib.ingest.chunk import ChunkingStrategy, chunk_document, resolve_chunking_strategy
from chalicelib.ingest.document import PageSpan, ParsedDocument


class PieceTokenizer:
    """Counts words and punctuation marks separately, and splits long words into 4-character pieces (so a
    'word' can exceed a chunk) — shaped like WordPiece, fast for property tests."""

    _piece = re.compile(r"\w{1,4}|[^\w\s]")

    def count(self, text: str) -> int:
        return len(self._piece.findall(text))


TOKENIZER = PieceTokenizer()


def _check(text: str, strategy: ChunkingStrategy) -> list:
    chunks = chunk_document(ParsedDocument(text), strategy, TOKENIZER)
    covered = [False] * len(text)
    for i, c in enumerate(chunks):
        assert c.index == i
        assert c.text == text[c.char_start:c.char_end]
        assert c.token_count == TOKENIZER.count(c.text) <= strategy.max_chunk_size_tokens
        for p in range(c.char_start, c.char_end):
            covered[p] = True
    for p, ch in enumerate(text):
        assert covered[p] or ch.isspace(), f"character {p} ({ch!r}) is in no chunk"
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.char_start > prev.char_start  # progress
        overlap = text[nxt.char_start:prev.char_end] if nxt.char_start < prev.char_end else ""
        assert TOKENIZER.count(overlap) <= strategy.chunk_overlap_tokens
    return chunks


words = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=30)
sentences = st.lists(words, min_size=1, max_size=40).map(lambda ws: " ".join(ws) + ".")
paragraphs = st.lists(sentences, min_size=1, max_size=8).map(" ".join)
documents = st.lists(paragraphs, min_size=0, max_size=12).map("\n\n".join)


@settings(max_examples=150, deadline=None)
@given(text=documents, size=st.integers(20, 300), overlap_share=st.floats(0, 0.5))
def test_chunks_are_bounded_overlap_bounded_and_cover_the_text(text, size, overlap_share):
    _check(text, ChunkingStrategy(size, int(size * overlap_share)))


@settings(max_examples=50, deadline=None)
@given(text=st.text(min_size=0, max_size=3000), size=st.integers(20, 120))
def test_arbitrary_unicode_never_breaks_the_bounds(text, size):
    _check(text, ChunkingStrategy(size, size // 2))


def test_a_single_huge_word_is_cut_to_the_limit():
    text = "x" * 5000
    chunks = _check(text, ChunkingStrategy(100, 0))
    assert len(chunks) == 13 and "".join(c.text for c in chunks) == text


def test_paragraph_boundaries_are_preferred():
    para = " ".join(f"Sentence {i} is here." for i in range(12))  # 72 tokens: a full chunk would take 4 more
    text = "\n\n".join([para] * 6)
    chunks = _check(text, ChunkingStrategy(100, 0))
    assert all(c.text.startswith("Sentence 0 ") for c in chunks)


def test_overlap_repeats_trailing_sentences():
    text = " ".join(f"Sentence number {i} ends here." for i in range(60))
    chunks = _check(text, ChunkingStrategy(100, 50))
    assert len(chunks) > 3
    assert all(b.char_start < a.char_end for a, b in zip(chunks, chunks[1:]))


def test_pages_are_attributed():
    text = "Page one text.\n\nPage two text."
    doc = ParsedDocument(text, pages=(PageSpan(1, 0, 14), PageSpan(2, 16, 30)))
    [chunk] = chunk_document(doc, ChunkingStrategy(100, 0), TOKENIZER)
    assert (chunk.page_start, chunk.page_end) == (1, 2)


def test_empty_text_has_no_chunks():
    assert chunk_document(ParsedDocument("  \n\n "), ChunkingStrategy(100, 10), TOKENIZER) == []


@pytest.mark.parametrize("requested, limit, expected", [
    pytest.param(None, 8191, (800, 400), id="auto-default"),
    pytest.param({"type": "auto"}, 254, (254, 127), id="auto-adapts-to-minilm"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 300, "chunk_overlap_tokens": 30}}, 8191,
                 (300, 30), id="static"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}, 254,
                 (254, 127), id="static-scaled-to-embedder"),
])
def test_strategy_resolution(requested, limit, expected):
    resolved = resolve_chunking_strategy(requested, embedder_max_tokens=limit)
    assert (resolved.max_chunk_size_tokens, resolved.chunk_overlap_tokens) == expected
    assert resolved.to_openai()["type"] == "static"


@pytest.mark.parametrize("requested, param, code", [
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 99, "chunk_overlap_tokens": 0}},
                 "chunking_strategy.static.max_chunk_size_tokens", "integer_below_min_value", id="too-small"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 4097, "chunk_overlap_tokens": 0}},
                 "chunking_strategy.static.max_chunk_size_tokens", "integer_above_max_value", id="too-big"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 101}},
                 "chunking_strategy.static.chunk_overlap_tokens", "integer_above_max_value", id="overlap-over-half"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": -1}},
                 "chunking_strategy.static.chunk_overlap_tokens", "integer_below_min_value", id="overlap-negative"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": "800"}},
                 "chunking_strategy.static.max_chunk_size_tokens", "invalid_type", id="string"),
    pytest.param({"type": "static"}, "chunking_strategy.static", "missing_required_parameter", id="missing-static"),
    pytest.param({"type": "semantic"}, "chunking_strategy.type", "invalid_value", id="unknown-type"),
    pytest.param({}, "chunking_strategy.type", "missing_required_parameter", id="no-type"),
    pytest.param("auto", "chunking_strategy", "invalid_type", id="not-an-object"),
    pytest.param({"type": "auto", "max_chunk_size_tokens": 300}, "chunking_strategy.max_chunk_size_tokens",
                 "unknown_parameter", id="unknown-field"),
    pytest.param({"type": "static", "static": {"max_chunk_size_tokens": 300, "overlap": 3}},
                 "chunking_strategy.static.overlap", "unknown_parameter", id="unknown-nested-field"),
])
def test_strategy_errors_name_the_field(requested, param, code):
    with pytest.raises(InvalidRequestError) as info:
        resolve_chunking_strategy(requested, embedder_max_tokens=8191)
    assert (info.value.param, info.value.code) == (param, code)
