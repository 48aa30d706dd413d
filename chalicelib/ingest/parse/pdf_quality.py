"""How much extracted PDF text looks like mis-decoded glyphs rather than language.

A PDF font without a usable ToUnicode map makes an extractor emit wrong code points. Two kinds of evidence:

* **Undecodable characters** - what no written language contains: the replacement character, private-use code
  points inside words, unassigned code points, surrogates, C0/C1 controls other than whitespace, pdfminer's
  ``(cid:N)`` markers, and combining marks with no base letter (a word that starts with an accent). Raw glyph
  codes show up this way: ``pdfjs_vertical-japanese.pdf`` reads as five orphan combining marks, an unassigned
  code point and two letters; ``pm_issue-791-non-unicode-cmap.pdf`` reads as ASCII shifted by 29, its spaces
  (TrueType glyph 3) coming out as the control ``U+0003``.
* **Script hopping** - letters that switch between unrelated scripts inside one word ("ΘͨݱঅΔ": Greek, Arabic,
  Bengali ...), which real text almost never does. Statistical, so only judged on enough letters.

NUL is not evidence: extractors emit it as padding of two-byte codes in otherwise correct text, and
``normalize.clean_text`` removes it. A private-use character standing alone between spaces is not evidence
either: icon fonts (Symbol, Wingdings, icon webfonts) map bullets and pictograms there.

The thresholds are Engram's own, set on ``../shared/data/docs`` (every page of every PDF, both extractors, plus
the text of every other format): real text in any of its languages scores 0.0 on every page; the mis-decoded
pages (all three read by pypdf) score 0.12 (Czech, shifted codes), 0.53 (``pm_jo.pdf``) and 0.75 (vertical
Japanese). Synthetic samples in ``tests/test_parse_decoding.py`` cover more languages.
"""

from __future__ import annotations

import re
import unicodedata

GARBAGE_THRESHOLD = 0.1
"""Score above which text is judged mis-decoded. A font that decodes spaces as control characters scores about
1 / (mean word length + 1), i.e. 0.11 to 0.17 for word lengths of 5 to 8 letters; real text scores 0."""
MIN_LETTERS = 20
"""Below this many letters plus undecodable characters, script hopping is not judged (too few letter pairs)."""
MIN_UNDECODABLE = 3
"""Below this many undecodable characters, a text too short for ``MIN_LETTERS`` scores 0: one or two stray code
points (a logo glyph, a control) do not condemn a short page; three are a pattern."""

_CID = re.compile(r"\(cid:\d+\)")
_SAMPLE_CHARS = 200_000
# Whitespace that separates words; every other control character is evidence.
_SPACES = re.compile(r"[ \t\n\r\f\v\x85\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_UNDECODABLE_CATEGORIES = frozenset({"Co", "Cn", "Cs", "Cc"})
# Unicode character-name prefixes that belong together for this purpose: Japanese mixes kana and kanji, and
# CJK punctuation and full-width forms appear in all CJK text.
_SCRIPT_ALIASES = {
    "HIRAGANA": "CJK", "KATAKANA": "CJK", "CJK": "CJK", "IDEOGRAPHIC": "CJK", "FULLWIDTH": "CJK",
    "HALFWIDTH": "CJK", "BOPOMOFO": "CJK",
}


def garbage_score(text: str) -> float:
    """A number in [0, 1]: (undecodable characters + letter pairs that switch script inside a word) divided by
    (letters + undecodable characters).

    Looks at the first 200,000 characters. Returns 0.0 for text with fewer than ``MIN_LETTERS`` letters and
    undecodable characters together, unless it holds at least ``MIN_UNDECODABLE`` undecodable characters (then
    only those count: a short text is judged on hard evidence alone).
    """
    sample = _CID.sub("\ufffd", text[:_SAMPLE_CHARS].replace("\x00", ""))
    undecodable = letters = switches = 0
    for word in _SPACES.split(sample):
        if len(word) == 1 and unicodedata.category(word) == "Co":
            continue  # a pictogram of an icon font standing alone
        previous: str | None = None  # script of the preceding letter in the current run
        has_base = False  # whether a combining mark here has a base to attach to
        for ch in word:
            category = unicodedata.category(ch)
            if ch == "\ufffd" or category in _UNDECODABLE_CATEGORIES:
                undecodable += 1
                previous, has_base = None, False
            elif category[0] == "M":
                undecodable += not has_base
            elif category[0] == "L":
                letters += 1
                script = _script(ch)
                switches += previous is not None and script != previous
                previous, has_base = script, True
            else:  # digits, punctuation, symbols break a run of letters; marks may still attach to them
                previous, has_base = None, True
    judged = letters + undecodable
    if judged == 0:
        return 0.0
    if judged < MIN_LETTERS:
        return undecodable / judged if undecodable >= MIN_UNDECODABLE else 0.0
    return min(1.0, (undecodable + switches) / judged)


def is_garbage(text: str) -> bool:
    """True if ``garbage_score(text)`` exceeds ``GARBAGE_THRESHOLD``."""
    return garbage_score(text) > GARBAGE_THRESHOLD


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    head = name.split(" ", 1)[0]
    return _SCRIPT_ALIASES.get(head, head)
