"""Text that arrives encoded wrong: the mis-decoding check, right-to-left lines in visual order, Strict Open XML.

Synthetic inputs only (they always run); the real files behind each case are tested in ``test_parse.py``.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from chalicelib.errors import DocumentError
from chalicelib.ingest.parse import parse_document
from chalicelib.ingest.parse.docx_strict import is_strict
from chalicelib.ingest.parse.pdf_quality import GARBAGE_THRESHOLD, garbage_score, is_garbage
from chalicelib.ingest.parse.rtl import has_presentation_forms, to_logical

# --- mis-decoded text ---------------------------------------------------------------------------------------------

REAL_TEXT = {
    "english": "Trace-based Just-in-Time Type Specialization for Dynamic Languages",
    "czech": "Peněžní prostředky na účtech jsou k dispozici každý pracovní den.",
    "czech-decomposed": "Pene\u030cz\u030cni\u0301 prostr\u030cedky na u\u0301c\u030ctech jsou k dispozici.",
    "german": "Größenverhältnisse der Straßenbahnhaltestellen überprüfen",
    "russian": "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "greek": "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία των ανθρώπων.",
    "arabic": "انواع الخطوط العربية مرحبا بالعالم في كل مكان",
    "hebrew": "שלום עולם, זהו משפט בעברית עם אותיות סופיות",
    "hindi": "हिन्दी भारत की राजभाषा है और यह देवनागरी लिपि में लिखी जाती है",
    "thai": "สวัสดีชาวโลก ภาษาไทยเขียนโดยไม่เว้นวรรคระหว่างคำ",
    "japanese": "わたくしといふ現象は假定された有機交流電燈のひとつの青い照明です。PDFファイルを開く。",
    "chinese": "你好世界，這是一個繁體中文的句子，用來測試。",
    "korean": "안녕하세요 세계, 한국어는 단어 사이에 띄어쓰기를 합니다.",
    "vietnamese": "Tiếng Việt có rất nhiều dấu thanh điệu khác nhau.",
    "code": "document.getElementById('x').addEventListener('click', handleClick); JavaScript TraceMonkey",
    "icon-bullets": "\uf0b7 Yes\n\uf0b7 No\n\uf0b7 Maybe\n\uf0b7 Later",
    "nul-padded": "\x00H\x00e\x00l\x00l\x00o\x00 \x00w\x00o\x00r\x00l\x00d\x00 \x00a\x00g\x00a\x00i\x00n\x00!",
    # Apple fonts map the fi/fl ligatures to private-use U+F001/U+F002 inside words, about once a sentence.
    "mac-ligature": "The compiler records the control \uf002ow of each loop as a trace and then speci\uf001es the "
                    "types of the variables it sees, so that the generated code runs without type checks.",
}


@pytest.mark.parametrize("text", REAL_TEXT.values(), ids=REAL_TEXT.keys())
def test_real_text_in_any_language_is_not_garbage(text: str) -> None:
    assert not is_garbage(text), garbage_score(text)


def _shifted(text: str, by: int = 29) -> str:
    """``text`` as a font whose codes are Unicode minus ``by`` decodes: TrueType glyph 3 is the space, so ASCII
    text comes out shifted by 29 (``pm_issue-791-non-unicode-cmap.pdf``: "Peněžní" -> "3HQČåQt")."""
    return "".join(chr(ord(ch) - by) for ch in text)


GARBAGE = {
    "shifted-english": _shifted("Trace based just in time type specialization for dynamic languages"),
    "shifted-short": _shifted("Money in the accounts"),
    "orphan-marks": "\u034b\u034d\u034f\u0351\u0353\ue001\u0e8a\u07a0",  # as pypdf reads vertical Japanese
    "cid-markers": "(cid:12)(cid:34)(cid:56) (cid:3)(cid:9)",
    "replacement-chars": "\ufffd\ufffd\ufffd \ufffd\ufffd",
    "private-use-in-words": "\ue012\ue034\ue056 \ue078\ue09a\ue0bc \ue0de\ue0f0",
    "script-hopping": "ΘͨݱঅΔ ЖᏃⴰঅΘ ݱΔЖᏃⴰ অΘͨݱ ΔЖᏃⴰঅ",
}


@pytest.mark.parametrize("text", GARBAGE.values(), ids=GARBAGE.keys())
def test_misdecoded_text_is_garbage(text: str) -> None:
    assert garbage_score(text) > GARBAGE_THRESHOLD


@pytest.mark.parametrize("text", ["Hel\x01lo", "\ue000", "Logo \ue000 Company", "", "   \n"])
def test_short_text_with_a_stray_code_point_is_not_judged(text: str) -> None:
    assert garbage_score(text) == 0.0


def test_garbage_share_is_diluted_by_real_text() -> None:
    """One undecodable word in a page of real text is not a garbage page."""
    page = REAL_TEXT["english"] * 5 + " \ufffd\ufffd\ufffd"
    assert 0 < garbage_score(page) < GARBAGE_THRESHOLD


# --- right-to-left text in visual order ---------------------------------------------------------------------------

LOGICAL = "انواع الخطوط العربية"
VISUAL_FORMS = "ﺔﻴﺑﺮﻌﻟا طﻮﻄﳋا عاﻮﻧا"  # as pdfminer reads pdfjs_ArabicCIDTrueType.pdf: drawing order, glyph forms


def test_visual_presentation_forms_become_logical_letters() -> None:
    assert has_presentation_forms(VISUAL_FORMS)
    assert to_logical(VISUAL_FORMS) == LOGICAL
    assert to_logical(f"{VISUAL_FORMS}\n\n{VISUAL_FORMS}") == f"{LOGICAL}\n\n{LOGICAL}"


def test_logical_presentation_forms_keep_their_order() -> None:
    """pypdf reverses right-to-left runs itself: forms in logical order are only replaced by letters."""
    assert to_logical("اﻟﻌﺮﺑﻴﺔ اﳋﻄﻮط اﻧﻮاع") == "العربية الخطوط انواع"


def test_visual_line_with_a_number_keeps_the_number() -> None:
    assert to_logical("2024 ﺔﻨﺳ") == "سنة 2024"  # "year 2024", drawn with the number on the left


def test_hebrew_final_letters_tell_the_order() -> None:
    assert to_logical("םלוע םולש") == "שלום עולם"  # final mem first: visual
    assert to_logical("שלום עולם") == "שלום עולם"  # final mem last: logical


def test_lines_without_evidence_follow_the_page() -> None:
    page = f"Title\n{VISUAL_FORMS}\nملاعلاب ابحرم"  # the last line has no glyph forms nor final-only letters
    assert to_logical(page) == f"Title\n{LOGICAL}\nمرحبا بالعالم"


@pytest.mark.parametrize("text", ["مرحبا بالعالم", "Hello world", "office ﬁles", "", "12 + 3 = 15"])
def test_text_without_evidence_of_visual_order_is_unchanged(text: str) -> None:
    assert to_logical(text) == text


# --- Strict Open XML ----------------------------------------------------------------------------------------------

# Transitional -> Strict URIs (ECMA-376 Part 4 / Part 1), enough to turn python-docx's output into a Strict file.
_TO_STRICT = [
    (b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties",
     b"http://purl.oclc.org/ooxml/officeDocument/relationships/extendedProperties"),
    (b"http://schemas.openxmlformats.org/officeDocument/2006/relationships",
     b"http://purl.oclc.org/ooxml/officeDocument/relationships"),
    (b"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
     b"http://purl.oclc.org/ooxml/wordprocessingml/main"),
    (b"http://schemas.openxmlformats.org/drawingml/2006/main", b"http://purl.oclc.org/ooxml/drawingml/main"),
]


def _transitional_docx() -> bytes:
    import docx  # python-docx

    document = docx.Document()
    document.add_heading("Strict heading", level=1)
    document.add_paragraph("A paragraph of body text.")
    document.add_paragraph("first item", style="List Bullet")
    document.add_paragraph("second item", style="List Bullet")
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "merged"
    table.cell(0, 2).text = "right"
    table.cell(1, 0).text = "a"
    table.cell(1, 2).text = "c"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _as_strict(data: bytes, drop: str | None = None) -> bytes:
    """``data`` (a Transitional package) with Strict URIs; ``drop`` names a member to leave out."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            if member.filename == drop:
                continue
            body = source.read(member)
            if member.filename.endswith((".xml", ".rels")):
                for transitional, strict in _TO_STRICT:
                    body = body.replace(transitional, strict)
            target.writestr(member.filename, body)
    return out.getvalue()


def test_strict_docx_reads_like_its_transitional_twin() -> None:
    transitional = _transitional_docx()
    strict = _as_strict(transitional)
    body = zipfile.ZipFile(io.BytesIO(strict)).read("word/document.xml")
    assert b"purl.oclc.org" in body and b"wordprocessingml/2006/main" not in body
    expected = parse_document(transitional, "twin.docx").text
    assert "Strict heading" in expected and "- first item\n- second item" in expected and "merged | right" in expected
    assert parse_document(strict, "strict.docx").text == expected


def test_strict_detection() -> None:
    transitional = _transitional_docx()
    assert not is_strict(zipfile.ZipFile(io.BytesIO(transitional)))
    assert is_strict(zipfile.ZipFile(io.BytesIO(_as_strict(transitional))))


def test_damaged_strict_docx_is_refused_naming_the_variant() -> None:
    broken = _as_strict(_transitional_docx(), drop="word/document.xml")
    with pytest.raises(DocumentError, match="Strict Open XML") as caught:
        parse_document(broken, "broken.docx")
    assert caught.value.code == "invalid_file" and "broken.docx" in caught.value.message
