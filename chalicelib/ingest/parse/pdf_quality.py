"""How much extracted PDF text looks like mis-decoded glyphs rather than language.

A PDF font without a usable ToUnicode map makes an extractor emit wrong code points. These show up as
(a) replacement characters, private-use code points, unassigned code points, controls or ``(cid:N)`` markers, or
(b) letters that hop between unrelated scripts inside one word ("ΘͨݱঅΔ" - Greek, Arabic, Bengali ...), which real
text almost never does. The score combines both; the thresholds are Engram's own, set from the test corpus
(``pm_jo.pdf``: pypdf's garbage scores about 0.5, real text in any language below 0.05).
"""

from __future__ import annotations

import re
import unicodedata

GARBAGE_THRESHOLD = 0.15
"""Score above which text is judged mis-decoded and another extractor is tried."""
MIN_LETTERS = 20
"""Below this many letters a text is too short to judge; it scores 0."""

_CID = re.compile(r"\(cid:\d+\)")
_SAMPLE_CHARS = 200_000
# Unicode character-name prefixes that belong together for this purpose: Japanese mixes kana and kanji, and
# CJK punctuation and full-width forms appear in all CJK text.
_SCRIPT_ALIASES = {
    "HIRAGANA": "CJK", "KATAKANA": "CJK", "CJK": "CJK", "IDEOGRAPHIC": "CJK", "FULLWIDTH": "CJK",
    "HALFWIDTH": "CJK", "BOPOMOFO": "CJK",
}


def garbage_score(text: str) -> float:
    """A number in [0, 1]: share of suspicious characters plus share of letter pairs that switch script.

    Looks at the first 200,000 characters. Returns 0.0 for text with fewer than ``MIN_LETTERS`` letters.
    """
    sample = text[:_SAMPLE_CHARS]
    cid_markers = len(_CID.findall(sample))
    sample = _CID.sub("\ufffd", sample)
    suspicious = 0
    letters = 0
    pairs = 0
    switches = 0
    for word in sample.split():
        previous: str | None = None
        for ch in word:
            category = unicodedata.category(ch)
            if ch == "\ufffd" or category in ("Co", "Cn", "Cc", "Cs"):
                suspicious += 1
                previous = None
                continue
            if category[0] != "L":
                if category[0] != "M":  # marks attach to the preceding letter; punctuation/digits break a run
                    previous = None
                continue
            letters += 1
            script = _script(ch)
            if previous is not None:
                pairs += 1
                switches += script != previous
            previous = script
    if letters + suspicious + cid_markers < MIN_LETTERS:
        return 0.0
    suspicious_share = suspicious / (letters + suspicious)
    switch_share = switches / pairs if pairs else 0.0
    return min(1.0, suspicious_share + switch_share)


def is_garbage(text: str) -> bool:
    """True if ``garbage_score(text)`` exceeds ``GARBAGE_THRESHOLD``."""
    return garbage_score(text) > GARBAGE_THRESHOLD


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    head = name.split(" ", 1)[0]
    return _SCRIPT_ALIASES.get(head, head)
