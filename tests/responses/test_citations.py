"""Citation markers → clean text + ``file_citation`` annotations, whole or streamed in arbitrary pieces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from chalicelib.responses.citations import CitationStripper, marker, strip

SOURCES = {"file-abc": "a.txt", "file-XYZ_9": "b.pdf"}


def test_markers_become_annotations_at_the_right_index():
    text, annotations = strip("Paris is the capital <|file-abc|>. Berlin too<|file-XYZ_9|>.", SOURCES)
    assert text == "Paris is the capital. Berlin too."
    assert annotations == [
        {"type": "file_citation", "file_id": "file-abc", "filename": "a.txt", "index": len("Paris is the capital")},
        {"type": "file_citation", "file_id": "file-XYZ_9", "filename": "b.pdf", "index": len("Paris is the capital. Berlin too")},
    ]


def test_unknown_files_are_stripped_without_annotation_and_lookalikes_stay():
    text, annotations = strip("x <|file-nope|> y <|not a marker|> a<b and <|file- z", SOURCES)
    assert text == "x y <|not a marker|> a<b and <|file- z"
    assert annotations == []


def test_repeated_citation_of_one_file_at_one_place_is_one_annotation():
    text, annotations = strip("Fact <|file-abc|><|file-abc|> and <|file-abc|>", SOURCES)
    assert text == "Fact and"
    assert [a["index"] for a in annotations] == [4, 8]


def test_marker_helper_matches_the_convention():
    assert marker("file-abc") == "<|file-abc|>"
    text, (annotation,) = strip("see" + marker("file-abc"), SOURCES)
    assert text == "see" and annotation["index"] == 3


def test_trailing_whitespace_and_partial_markers_are_released_at_the_end():
    stripper = CitationStripper(SOURCES)
    pieces = stripper.feed("Answer:  ") + stripper.feed("<|fi")
    assert "".join(v for k, v in pieces if k == "delta") == "Answer:"
    rest = stripper.close()
    assert stripper.text == "Answer:  <|fi"
    assert rest == [("delta", "  <|fi")]


ALPHABET = st.sampled_from(["a", " ", ".", "<", "|", ">", "f", "<|file-abc|>", "<|file-XYZ_9|>", "<|file-q|>",
                            "\n", "file-", "<|"])


@hsettings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=30), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_streaming_in_any_pieces_gives_the_whole_text_result(tokens, cuts):
    raw = "".join(tokens)
    expected = strip(raw, SOURCES)
    stripper = CitationStripper(SOURCES)
    bounds = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    events = []
    for start, end in zip(bounds, bounds[1:]):
        events += stripper.feed(raw[start:end])
    events += stripper.close()
    assert (stripper.text, stripper.annotations) == expected
    assert "".join(v for k, v in events if k == "delta") == expected[0]
    assert [v for k, v in events if k == "annotation"] == expected[1]
    assert "<|file-abc|>" not in stripper.text
