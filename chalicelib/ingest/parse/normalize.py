"""Text clean-up shared by all parsers: newlines, control characters, Unicode form, blank lines, CJK spacing."""

from __future__ import annotations

import re
import unicodedata

from chalicelib.ingest.parse.rtl import to_logical

# Line and paragraph separators of Unicode and ASCII, mapped onto "\n"; a form feed (page break) becomes a blank line.
_NEWLINES = str.maketrans({"\r": "\n", "\v": "\n", "\x85": "\n", "\u2028": "\n", "\u2029": "\n\n", "\f": "\n\n"})
# C0/C1 controls except tab and newline, DEL, lone surrogates (not encodable as UTF-8) and stray byte-order marks.
# NUL must go: PostgreSQL ``text`` cannot hold it.
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufeff]")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0]+$", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n){2,}")
_SPACE_RUNS = re.compile(r"[ \t\u00a0]{2,}")

# Scripts written without spaces between words: CJK punctuation, kana, CJK ideographs (incl. extension A and
# compatibility), full/half-width forms. Hangul is excluded: Korean separates words with spaces.
_CJK = "\u3000-\u303f\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}])(?:[ \\t]*\\n[ \\t]*|[ \\t]+)(?=[{_CJK}])")

# Latin ligatures (U+FB00-FB06) that PDFs often emit; expanded so that "misﬁts" matches a search for "misfits".
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                            "\ufb05": "st", "\ufb06": "st"})


def clean_text(text: str) -> str:
    """Normalise extracted text for storage and chunking; returns a new ``str``.

    Newlines become ``"\\n"``; NUL and other control characters, lone surrogates and BOMs are removed; the text is
    put in Unicode NFC; trailing spaces are stripped from each line; runs of blank lines collapse to one (so
    paragraphs are separated by exactly ``"\\n\\n"``); leading and trailing blank space is removed.
    """
    text = _CONTROLS.sub("", text.replace("\r\n", "\n").translate(_NEWLINES))
    text = unicodedata.normalize("NFC", text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


def clean_layout_text(text: str) -> str:
    """``clean_text`` for text recovered from a page layout (PDF), which carries typesetting artefacts.

    Additionally collapses runs of spaces to one, expands Latin ligatures, puts right-to-left lines extracted in
    visual order into logical order and Arabic presentation forms back to letters (see ``rtl.to_logical``), and
    removes spaces and single line breaks between two CJK characters (PDF extractors put them between every
    glyph of vertical or justified CJK text; the languages do not use them). Blank lines (paragraph breaks) are
    kept.
    """
    text = to_logical(clean_text(text.translate(_LIGATURES)))
    text = _SPACE_RUNS.sub(" ", text)
    return _CJK_GAP.sub("", text)


def join_blocks(blocks: list[str]) -> str:
    """Join already-cleaned blocks (paragraphs, table rows groups ...) with blank lines, skipping empty ones."""
    return "\n\n".join(block for block in blocks if block)
