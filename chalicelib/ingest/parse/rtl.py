"""Right-to-left text from PDF page layouts: visual-order lines to logical order, Arabic presentation forms to
letters.

A PDF draws glyphs, and for Arabic or Hebrew a shaping engine has already put them in visual order (left to
right on the page) and, for Arabic, chosen each letter's contextual glyph, which ToUnicode maps to a
presentation-form code point (U+FB50-U+FDFF, U+FE70-U+FEFC). An extractor that keeps drawing order therefore
returns "ﺔﻴﺑﺮﻌﻟا" for "العربية": reversed and in glyph forms, so a search for the word cannot match.

Whether a line runs visually is read from the text itself, not guessed from the script:

* an Arabic presentation form says on which sides its letter joins (initial: the following letter only,
  final: the preceding one only, medial: both, isolated: neither - the ``<initial>``... tag of its Unicode
  decomposition). Of two neighbouring forms, in logical order the first joins forward exactly when the second
  joins backward; in visual order the other way round. Each pair that fits only one order is a vote.
* letters that exist only at the end of a word (Arabic teh marbuta and alef maksura, Hebrew final kaf, mem,
  nun, pe, tsadi) vote logical when they end a word and visual when they start one.

A line with more visual than logical votes is reordered with the Unicode Bidirectional Algorithm (UAX #9, the
Rust ``unicode-bidi`` crate through ``python-bidi``): applied to a visual line it reverses right-to-left runs
and the order of runs and keeps left-to-right runs (digits, Latin) as they are, which restores the logical order
of a line laid out by that same algorithm. The paragraph direction given to it is that of the majority of the
line's strongly directional letters. A line without votes follows the majority of the page's votes, and
stays as it is when there are none (pypdf, for one, already reverses right-to-left runs itself). Then every
presentation form is replaced by its letters (NFKC of those code points only), so "ﻟ" becomes "ل".

Limits: mirrored brackets keep the glyph's code point (the Rust implementation does not mirror), and a line
mixing both directions is only as right as the bidi algorithm's inverse, which is exact for lines of one
direction with embedded numbers or words of the other.
"""

from __future__ import annotations

import re
import unicodedata

from bidi import get_display

_PRESENTATION_FORM = re.compile("[\ufb50-\ufdff\ufe70-\ufefc]")
# A maximal run of right-to-left letters and the combining marks on them (one word, or a ligature chain).
_RTL_RUN = re.compile("[\u0590-\u05ff\u0600-\u06ff\u0700-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]+")
_FINAL_ONLY = frozenset("\u0629\u0649\u05da\u05dd\u05df\u05e3\u05e5")  # ة ى ך ם ן ף ץ
# (joins the preceding letter, joins the following letter) in logical order, per decomposition tag.
_JOINING = {"<isolated>": (False, False), "<initial>": (False, True), "<medial>": (True, True),
            "<final>": (True, False)}
_RTL_CLASSES = frozenset({"R", "AL"})


def has_presentation_forms(text: str) -> bool:
    """Whether ``text`` holds an Arabic presentation form, i.e. came from shaped glyphs in drawing order."""
    return _PRESENTATION_FORM.search(text) is not None


def to_logical(text: str) -> str:
    """``text`` (one page, lines separated by ``"\\n"``) with visual-order right-to-left lines put in logical
    order and Arabic presentation forms replaced by their letters; other text is returned unchanged.

    Returns a new ``str`` of the same number of lines. Never raises.
    """
    if _RTL_RUN.search(text) is None:
        return text
    lines = text.split("\n")
    votes = [_order_votes(line) for line in lines]
    page_visual = sum(v for v, _ in votes) > sum(lg for _, lg in votes)
    out = []
    for line, (visual, logical) in zip(lines, votes):
        if visual > logical or (visual == logical == 0 and page_visual and _RTL_RUN.search(line)):
            line = get_display(line, base_dir=_paragraph_direction(line))
        out.append(line)
    return _PRESENTATION_FORM.sub(_letters, "\n".join(out))


def _order_votes(line: str) -> tuple[int, int]:
    """(visual votes, logical votes) of one line's right-to-left runs."""
    visual = logical = 0
    for run in _RTL_RUN.findall(line):
        letters = [ch for ch in run if not unicodedata.category(ch).startswith("M")]
        if not letters:
            continue
        if len(letters) > 1:
            visual += _letters_of(letters[0])[0] in _FINAL_ONLY
            logical += _letters_of(letters[-1])[-1] in _FINAL_ONLY
        joins = [_joining(ch) for ch in letters]
        for a, b in zip(joins, joins[1:]):
            if a is None or b is None:
                continue
            fits_logical = a[1] == b[0]
            fits_visual = b[1] == a[0]
            visual += fits_visual and not fits_logical
            logical += fits_logical and not fits_visual
    return visual, logical


def _joining(ch: str) -> tuple[bool, bool] | None:
    tag = unicodedata.decomposition(ch).split(" ", 1)[0]
    return _JOINING.get(tag)


def _letters_of(ch: str) -> str:
    """The letter(s) of a presentation form (a ligature has several), else ``ch``."""
    return unicodedata.normalize("NFKC", ch) if _PRESENTATION_FORM.match(ch) else ch


def _paragraph_direction(line: str) -> str:
    rtl = ltr = 0
    for ch in line:
        direction = unicodedata.bidirectional(ch)
        rtl += direction in _RTL_CLASSES
        ltr += direction == "L"
    return "R" if rtl >= ltr else "L"


def _letters(match: re.Match[str]) -> str:
    return unicodedata.normalize("NFKC", match.group(0))
