"""Document parsers: the 22 real files of ``../shared/data/docs`` (see its MANIFEST.md) and hostile inputs.

Real-file tests skip when the shared data folder is absent; the synthetic hostile inputs are generated here and
always run. Every hostile input must end in ``DocumentError``/``UnsupportedFileError`` or a safe parse, quickly.
"""

from __future__ import annotations

import functools
import io
import json
import struct
import time
import zipfile
from pathlib import Path

import pytest

from chalicelib.errors import DocumentError, UnsupportedFileError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse import SUPPORTED_EXTENSIONS, ParseLimits, parse_document
from chalicelib.ingest.parse.limits import CharBudget, Deadline
from chalicelib.ingest.parse.pdf_common import PdfUnreadable
from chalicelib.ingest.parse.pdf_pdfminer import extract_with_pdfminer
from chalicelib.ingest.parse.pdf_pypdf import extract_with_pypdf
from chalicelib.ingest.parse.pdf_quality import is_garbage
from chalicelib.ingest.parse.rtl import has_presentation_forms

DOCS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "docs"
requires_docs = pytest.mark.skipif(not DOCS.is_dir(), reason=f"{DOCS} is not present")

QUICK_S = 5.0
"""Seconds any single hostile input may take (they take well under one; the margin absorbs slow CI machines)."""

# Known text per file, from MANIFEST.md; compared with all whitespace collapsed to single spaces.
KNOWN_TEXT: dict[str, list[str]] = {
    "docling_csv-comma.csv": ["Sheryl", "Baxter", "Rasmussen Group", "Lozano, Dr"],
    "docling_csv-comma-in-cell.csv": ["a", "c", "d"],
    "docling_example_03.html": [
        "This is the first paragraph of the introduction.", "Nested ordered item 2", "Row 3, Col 2",
    ],
    "docling_nested.md": ["A list featuring nesting:", "abcd12345：", "Subitem 2"],
    "docling_word_sample.docx": ["Summer activities", "Swimming in the lake", "Let’s swim!", "Paddle about"],
    "docling_word_tables.docx": ["Header 0.0", "Merged Cell 1.1 1.2", "Merged Cell 3.1 4.1", "Cell 8.4"],
    "docling_Strict.docx": ["Some text"],
    "pdfjs_pdkids.pdf": ["PD KIDS", "Public domain texts for young people."],
    "pdfjs_tracemonkey.pdf": ["Trace-based Just-in-Time Type Specialization for Dynamic Languages"],
    "pm_simple1.pdf": ["Hello", "World"],
    "pypdf_crazyones.pdf": ["The Crazy Ones October 14, 1998 Heres to the crazy ones."],
    "pypdf_issue-297-broken-xref.pdf": ["test example"],
    "pypdf_multilang.pdf": ["English: Hello World", "Russian: Привет, мир", "你好世"],
    "pypdf_r2-owner-password.pdf": ["pdf encryption test password: asdfzxcv"],
    "sf_pdflatex-4-pages.pdf": ["Hello, here is some text without a meaning."],
    "pm_jo.pdf": [],  # checked with all spaces removed, see test_cjk_vertical_text
    "pdfjs_empty.pdf": [],  # checked for empty text, see test_blank_pdf_is_empty_not_an_error
    "pdfjs_vertical-japanese.pdf": ["日本語", "あいうえお"],  # two vertical columns
    "pm_issue-791-non-unicode-cmap.pdf": ["Peněžní prostředky na účtech"],
    "pdfjs_ArabicCIDTrueType.pdf": ["انواع الخطوط العربية"],
}
# Files that must be refused, and a phrase the message must contain.
KNOWN_ERRORS: dict[str, str] = {
    "docling_ocr_test_scanned.pdf": "no text layer",
    "pm_rc4-40.pdf": "password-protected",
}
PAGE_COUNTS = {
    "pdfjs_pdkids.pdf": 55, "pdfjs_tracemonkey.pdf": 14, "sf_pdflatex-4-pages.pdf": 4, "pdfjs_empty.pdf": 1,
    "pm_jo.pdf": 1, "pm_simple1.pdf": 1, "pypdf_crazyones.pdf": 1, "pypdf_issue-297-broken-xref.pdf": 1,
    "pypdf_multilang.pdf": 1, "pypdf_r2-owner-password.pdf": 1, "pdfjs_vertical-japanese.pdf": 3,
    "pm_issue-791-non-unicode-cmap.pdf": 1, "pdfjs_ArabicCIDTrueType.pdf": 1,
}
# pypdf mis-decodes these (fonts without a usable ToUnicode map); pdfminer decodes them.
MISDECODED_BY_PYPDF = {"pm_jo.pdf", "pdfjs_vertical-japanese.pdf", "pm_issue-791-non-unicode-cmap.pdf"}


@functools.cache
def parse_real(name: str) -> ParsedDocument | DocumentError:
    """Parse one shared file once per session (the large PDFs take seconds); the error if it is refused."""
    try:
        return parse_document((DOCS / name).read_bytes(), name)
    except DocumentError as exc:
        return exc


def squash(text: str) -> str:
    """``text`` with every run of whitespace replaced by one space."""
    return " ".join(text.split())


def parse_quickly(data: bytes, filename: str, limits: ParseLimits = ParseLimits()) -> ParsedDocument:
    """``parse_document`` that also asserts it took under ``QUICK_S`` seconds, whatever the outcome."""
    started = time.monotonic()
    try:
        return parse_document(data, filename, limits=limits)
    finally:
        assert time.monotonic() - started < QUICK_S, f"{filename} took too long"


def assert_clean(text: str) -> None:
    """Text ready for storage: no NUL/control characters, no runs of blank lines, no surrounding blank space."""
    assert "\x00" not in text
    assert not any(ord(ch) < 32 and ch not in "\t\n" for ch in text)
    assert "\n\n\n" not in text
    assert text == text.strip()


# --- the real files ---------------------------------------------------------------------------------------------


@requires_docs
def test_every_shared_file_has_an_expectation() -> None:
    present = {path.name for path in DOCS.iterdir() if path.name != "MANIFEST.md"}
    assert present == set(KNOWN_TEXT) | set(KNOWN_ERRORS)
    assert len(present) == 22


@requires_docs
@pytest.mark.parametrize("name", sorted(KNOWN_TEXT))
def test_real_file_yields_known_text(name: str) -> None:
    result = parse_real(name)
    assert not isinstance(result, DocumentError), result
    flat = squash(result.text)
    for expected in KNOWN_TEXT[name]:
        assert squash(expected) in flat, f"{expected!r} missing from {name}"
    assert_clean(result.text)
    if name.endswith(".pdf"):
        assert len(result.pages) == PAGE_COUNTS[name]
    else:
        assert result.pages == ()


@requires_docs
@pytest.mark.parametrize("name", sorted(KNOWN_ERRORS))
def test_real_file_is_refused_with_reason(name: str) -> None:
    result = parse_real(name)
    assert isinstance(result, DocumentError), f"{name} should be refused"
    assert type(result) is DocumentError
    assert result.code == "invalid_file"
    assert KNOWN_ERRORS[name] in result.message
    assert name in result.message


@requires_docs
def test_encrypted_with_user_password_mentions_password() -> None:
    result = parse_real("pm_rc4-40.pdf")
    assert isinstance(result, DocumentError) and "password" in result.message


@requires_docs
def test_blank_pdf_is_empty_not_an_error() -> None:
    result = parse_real("pdfjs_empty.pdf")
    assert isinstance(result, ParsedDocument)
    assert result.text == ""
    assert [(p.number, p.start, p.end) for p in result.pages] == [(1, 0, 0)]


@requires_docs
def test_cjk_vertical_text() -> None:
    result = parse_real("pm_jo.pdf")
    assert isinstance(result, ParsedDocument)
    assert result.parser == "pdfminer", "pypdf's text for this file is garbage; pdfminer must win"
    assert "みんなのおのおののなかのすべてですから" in "".join(result.text.split())
    assert "わたくしといふ現象は" in result.text  # CJK inter-glyph spaces collapsed


@requires_docs
def test_no_xref_table_falls_back_to_pdfminer() -> None:
    result = parse_real("pm_simple1.pdf")
    assert isinstance(result, ParsedDocument) and result.parser == "pdfminer"


@requires_docs
@pytest.mark.parametrize("name", sorted(MISDECODED_BY_PYPDF))
def test_misdecoded_text_falls_back_to_pdfminer(name: str) -> None:
    result = parse_real(name)
    assert isinstance(result, ParsedDocument)
    assert result.parser == "pdfminer", "pypdf's text for this file is garbage; pdfminer must win"
    assert not is_garbage(result.text)


@requires_docs
@pytest.mark.integration  # every page of every shared PDF through both extractors: ~15 s
def test_garbage_check_flags_only_misdecoded_text() -> None:
    """Every page of every shared PDF as each extractor reads it, and the text of every other shared file: the
    check flags pypdf's reading of the mis-decoded files and nothing else (no real text in any language)."""
    flagged: set[tuple[str, str]] = set()
    for path in sorted(DOCS.iterdir()):
        if path.suffix == ".pdf":
            for extract in (extract_with_pypdf, extract_with_pdfminer):
                try:
                    pages = extract(path.read_bytes(), path.name, ParseLimits(), Deadline(60, path.name),
                                    CharBudget(10**8, path.name))
                except (DocumentError, PdfUnreadable):
                    continue  # password-protected, or no xref for pypdf
                flagged |= {(path.name, pages.parser) for text in pages.texts if is_garbage(text)}
        elif path.name != "MANIFEST.md":
            result = parse_real(path.name)
            assert isinstance(result, ParsedDocument), result
            if is_garbage(result.text):
                flagged.add((path.name, result.parser))
    assert flagged == {(name, "pypdf") for name in MISDECODED_BY_PYPDF}


@requires_docs
def test_arabic_in_visual_order_and_presentation_forms_reads_in_logical_order() -> None:
    result = parse_real("pdfjs_ArabicCIDTrueType.pdf")
    assert isinstance(result, ParsedDocument)
    assert result.parser == "pdfminer", "pypdf's word order is visual for this file; pdfminer's can be reversed"
    assert not has_presentation_forms(result.text)
    lines = [line for line in result.text.splitlines() if line]
    assert lines and all(line == "انواع الخطوط العربية" for line in lines)


@requires_docs
def test_strict_open_xml_docx_is_read() -> None:
    result = parse_real("docling_Strict.docx")
    assert isinstance(result, ParsedDocument)
    assert result.text == "Some text" and result.parser == "python-docx"


@requires_docs
def test_csv_keeps_a_quoted_comma_as_its_own_cell() -> None:
    result = parse_real("docling_csv-comma-in-cell.csv")
    assert isinstance(result, ParsedDocument)
    rows = [line.split(" | ") for line in result.text.splitlines()]
    assert ["a", ",", "c", "d"] in rows


@requires_docs
def test_docx_merged_cells_appear_once_per_merge() -> None:
    result = parse_real("docling_word_tables.docx")
    assert isinstance(result, ParsedDocument)
    assert "Cell 1.0 | Merged Cell 1.1 1.2\n" in result.text  # horizontal span: one cell, not two
    assert result.text.count("Merged Cell 1.1 2.1") == 2  # vertical span: once in each of the two tables


@requires_docs
def test_html_drops_style_and_keeps_lists_and_tables() -> None:
    result = parse_real("docling_example_03.html")
    assert isinstance(result, ParsedDocument)
    assert "border-collapse" not in result.text
    assert "- First item in unordered list\n  - Nested item 1" in result.text
    assert "Header 1 | Header 2 | Header 3" in result.text


@requires_docs
@pytest.mark.parametrize("name", ["sf_pdflatex-4-pages.pdf", "pdfjs_tracemonkey.pdf", "pdfjs_pdkids.pdf"])
def test_page_spans_are_consistent(name: str) -> None:
    result = parse_real(name)
    assert isinstance(result, ParsedDocument)
    spans = result.pages
    assert [span.number for span in spans] == list(range(1, PAGE_COUNTS[name] + 1))
    assert spans[0].start == 0 and spans[-1].end == len(result.text)
    for span in spans:
        assert 0 <= span.start <= span.end <= len(result.text)
    for before, after in zip(spans, spans[1:]):
        gap = result.text[before.end:after.start]
        assert gap in ("", "\n\n"), f"pages {before.number}/{after.number} separated by {gap!r}"
        assert after.start >= before.end
    assert all(span.end > span.start for span in spans), "every page of these files has text"
    first, last = result.page_range(spans[1].start, spans[2].end)
    assert (first, last) == (2, 3)


@requires_docs
def test_limits_apply_to_real_pdfs() -> None:
    data = (DOCS / "pdfjs_pdkids.pdf").read_bytes()
    with pytest.raises(DocumentError, match="more than 10 pages"):
        parse_quickly(data, "pdkids.pdf", ParseLimits(max_pages=10))
    with pytest.raises(DocumentError, match="of CPU time"):
        parse_quickly(data, "pdkids.pdf", ParseLimits(timeout_s=0.01))
    with pytest.raises(DocumentError, match="characters"):
        parse_quickly(data, "pdkids.pdf", ParseLimits(max_chars=1000))
    with pytest.raises(DocumentError, match="bytes"):
        parse_quickly(data, "pdkids.pdf", ParseLimits(max_bytes=1000))


@requires_docs
def test_truncated_real_pdf_is_refused() -> None:
    data = (DOCS / "pdfjs_tracemonkey.pdf").read_bytes()[:20_000]
    with pytest.raises(DocumentError) as caught:
        parse_quickly(data, "truncated.pdf")
    assert caught.value.code == "invalid_file"


@requires_docs
def test_docx_total_size_limit() -> None:
    data = (DOCS / "docling_word_sample.docx").read_bytes()
    with pytest.raises(DocumentError, match="expand"):
        parse_quickly(data, "sample.docx", ParseLimits(max_docx_uncompressed_bytes=10_000))


# --- dispatch -----------------------------------------------------------------------------------------------------


def test_supported_extensions() -> None:
    assert {".txt", ".md", ".csv", ".json", ".html", ".htm", ".pdf", ".docx"} == SUPPORTED_EXTENSIONS


@pytest.mark.parametrize("filename", ["archive.xyz", "README", "photo.png", "notes.txt.gz", "doc.doc"])
def test_unsupported_extension(filename: str) -> None:
    with pytest.raises(UnsupportedFileError) as caught:
        parse_quickly(b"anything", filename)
    assert caught.value.code == "unsupported_file"
    assert "not supported; supported: " in caught.value.message
    assert ".pdf" in caught.value.message


def test_extension_is_case_insensitive() -> None:
    assert parse_quickly(b"Hello", "NOTES.TXT").text == "Hello"


@pytest.mark.parametrize("extension", sorted(SUPPORTED_EXTENSIONS))
def test_empty_file_never_crashes(extension: str) -> None:
    try:
        document = parse_quickly(b"", f"empty{extension}")
    except DocumentError as exc:
        assert exc.code == "invalid_file"
    else:
        assert document.text == ""


# --- text, csv, json, html ---------------------------------------------------------------------------------------


def test_invalid_utf8_falls_back_to_a_legacy_encoding() -> None:
    document = parse_quickly("café crème brûlée, naïve façade".encode("cp1252"), "legacy.txt")
    assert "café crème" in document.text


def test_bom_and_newlines() -> None:
    assert parse_quickly(b"\xef\xbb\xbfone\r\ntwo\rthree", "a.md").text == "one\ntwo\nthree"
    assert parse_quickly("grüße".encode("utf-16"), "a.txt").text == "grüße"


def test_nul_bytes_are_removed() -> None:
    document = parse_quickly(b"hello\x00 world\x00\n\n\n\nnext", "nul.txt")
    assert document.text == "hello world\n\nnext"


def test_binary_named_txt_is_refused() -> None:
    with pytest.raises(DocumentError, match="binary"):
        parse_quickly(bytes(range(256)) * 64, "random.txt")


def test_csv_header_labels_and_semicolons() -> None:
    data = b"name;city;note\nAda;London;\"first; programmer\"\nAlan;Wilmslow;\n"
    text = parse_quickly(data, "people.csv").text
    assert "name: Ada | city: London | note: first; programmer" in text
    assert "name: Alan | city: Wilmslow" in text


def test_csv_oversized_cell_is_refused() -> None:
    with pytest.raises(DocumentError, match="CSV"):
        parse_quickly(b'a,"' + b"x" * 200_000 + b'"\n', "big.csv")


def test_json_flattens_to_path_value_lines() -> None:
    data = json.dumps({"users": [{"name": "Ada", "langs": ["en", "fr"]}], "ok": True, "n": None}).encode()
    text = parse_quickly(data, "d.json").text
    assert text.split("\n\n") == ["users[0].name: Ada\nusers[0].langs[0]: en\nusers[0].langs[1]: fr", "ok: true",
                                  "n: null"]


def test_json_lines() -> None:
    assert parse_quickly(b'{"a": 1}\n{"a": 2}\n', "d.json").text == "a: 1\n\na: 2"


@pytest.mark.parametrize("depth", [150, 200_000])
def test_deeply_nested_json_is_refused(depth: int) -> None:
    with pytest.raises(DocumentError, match="nest") as caught:
        parse_quickly(b"[" * depth + b"1" + b"]" * depth, "deep.json")
    assert caught.value.code == "invalid_file"


def test_json_with_nul_and_lone_surrogate_is_cleaned() -> None:
    text = parse_quickly(b'{"a": "x\\u0000y\\ud800z"}', "d.json").text
    assert text == "a: xyz"
    text.encode("utf-8")  # storable


def test_invalid_json_is_refused() -> None:
    with pytest.raises(DocumentError, match="not valid JSON"):
        parse_quickly(b"{bad", "d.json")


def test_html_scripts_dropped_blocks_separated() -> None:
    html = (b"<html><head><title>T</title><script>var x=1;</script></head><body><p>One <b>bold</b> word</p>"
            b"<div>Two<br>lines</div><!-- hidden --><pre>a\n  b</pre></body></html>")
    assert parse_quickly(html, "p.html").text == "T\n\nOne bold word\n\nTwo\nlines\n\na\nb"


def test_deeply_nested_html_is_safe() -> None:
    depth = 20_000
    document = parse_quickly(b"<div>" * depth + b"deep" + b"</div>" * depth, "deep.htm")
    assert document.text == "deep"


# --- docx ---------------------------------------------------------------------------------------------------------


def _zip_with_zeros(member: str, size: int, chunk: int = 1 << 20) -> bytes:
    """A zip whose ``member`` holds ``size`` zero bytes, deflated while streaming (memory ~ one chunk)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("_rels/.rels", "<Relationships/>")
        with archive.open(member, "w") as out:
            zeros = bytes(chunk)
            for _ in range(size // chunk):
                out.write(zeros)
    return buffer.getvalue()


def test_docx_zip_bomb_is_refused_before_decompression() -> None:
    bomb = _zip_with_zeros("word/document.xml", 64 << 20)  # 64 MiB of zeros -> ~65 KB, ratio ~1000:1
    assert len(bomb) < 200_000
    with pytest.raises(DocumentError, match="zip bomb") as caught:
        parse_quickly(bomb, "bomb.docx")
    assert caught.value.code == "invalid_file"


def test_docx_with_lying_zip_sizes_is_refused() -> None:
    """The central directory claims 1 KB for a 2 MiB member: zipfile stops at 1 KB and the CRC check fails."""
    data = bytearray(_zip_with_zeros("[Content_Types].xml", 2 << 20))
    last_entry = data.rfind(b"PK\x01\x02")  # central directory header of the last member, [Content_Types].xml
    assert last_entry > 0
    struct.pack_into("<I", data, last_entry + 24, 1024)  # its "uncompressed size" field (APPNOTE 4.3.12)
    with pytest.raises(DocumentError) as caught:
        parse_quickly(bytes(data), "liar.docx")
    assert caught.value.code == "invalid_file"


@pytest.mark.parametrize("data", [b"PK\x03\x04garbage", b"not a zip at all", b"%PDF-1.4\n"])
def test_not_a_docx_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError, match="not a"):
        parse_quickly(data, "broken.docx")


def test_zip_that_is_not_word_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(DocumentError, match="Word"):
        parse_quickly(buffer.getvalue(), "other.docx")


def _docx_with_nested_tables(depth: int) -> bytes:
    import docx  # python-docx

    document = docx.Document()
    document.add_heading("Nested", level=1)
    cell = document.add_table(rows=1, cols=2).cell(0, 0)
    cell.text = "level 1"
    for level in range(2, depth + 1):
        cell = cell.add_table(rows=1, cols=1).cell(0, 0)
        cell.text = f"level {level}"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_nested_tables_within_limit_are_read() -> None:
    text = parse_quickly(_docx_with_nested_tables(4), "nested.docx").text
    assert text.startswith("Nested\n\n")
    assert all(f"level {n}" in text for n in range(1, 5))


def test_docx_tables_nested_too_deep_are_refused() -> None:
    with pytest.raises(DocumentError, match="nests tables deeper than 5"):
        parse_quickly(_docx_with_nested_tables(10), "nested.docx", ParseLimits(max_nesting=5))


# --- pdf ----------------------------------------------------------------------------------------------------------


def _pdf(*objects: bytes) -> bytes:
    """A PDF with ``objects`` numbered from 1 (object 1 the catalog) and a correct xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def _content(text: bytes) -> bytes:
    stream = b"BT /F1 24 Tf 72 720 Td (" + text + b") Tj ET"
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)


CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"


def test_synthetic_pdf_reads() -> None:
    data = _pdf(CATALOG, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>", PAGE, _content(b"Hello synthetic"), FONT)
    document = parse_quickly(data, "ok.pdf")
    assert document.text == "Hello synthetic" and document.parser == "pypdf"


@pytest.mark.parametrize(
    "pages_objects",
    [
        [b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>"],  # the page tree root is its own kid
        [b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>", b"<< /Type /Pages /Kids [2 0 R] /Parent 2 0 R /Count 1 >>"],
    ],
    ids=["self-loop", "two-node-loop"],
)
def test_cyclic_page_tree_is_refused(pages_objects: list[bytes]) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_quickly(_pdf(CATALOG, *pages_objects), "cycle.pdf")
    assert caught.value.code == "invalid_file"


def test_cyclic_page_tree_with_a_real_page_terminates() -> None:
    data = _pdf(CATALOG, b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>", PAGE, _content(b"Hello cycle"), FONT)
    try:
        document = parse_quickly(data, "cycle.pdf")
    except DocumentError as exc:
        assert exc.code == "invalid_file"
    else:
        assert "Hello cycle" in document.text


def test_deep_page_tree_is_refused() -> None:
    depth = 3000  # beyond pypdf's page-tree depth limit and Python's recursion limit in pdfminer
    kids = [b"<< /Type /Pages /Kids [%d 0 R] /Count 1 >>" % (n + 3) for n in range(depth)]
    data = _pdf(CATALOG, *kids, b"<< /Type /Page /MediaBox [0 0 10 10] >>")
    with pytest.raises(DocumentError):
        parse_quickly(data, "deep.pdf")


@pytest.mark.parametrize("repeats", [6000, 1_000_000])
def test_page_tree_repeating_one_page_is_refused(repeats: int) -> None:
    """A few bytes per page reference: a small file can claim millions of pages."""
    kids = b"<< /Type /Pages /Kids [" + b"3 0 R " * repeats + b"] /Count %d >>" % repeats
    with pytest.raises(DocumentError) as caught:
        parse_quickly(_pdf(CATALOG, kids, PAGE, _content(b"Hi"), FONT), "many.pdf")
    assert caught.value.code == "invalid_file"


def test_recursion_bomb_object_is_safe() -> None:
    depth = 20_000
    catalog = b"<< /Type /Catalog /Pages 2 0 R /Bomb " + b"[" * depth + b"]" * depth + b" >>"
    try:
        document = parse_quickly(_pdf(catalog, b"<< /Type /Pages /Kids [] /Count 0 >>"), "bomb.pdf")
    except DocumentError as exc:
        assert exc.code == "invalid_file"
    else:
        assert document.text == ""


@pytest.mark.parametrize(
    "data",
    [b"", b"%PDF-1.7\n", b"<html>not a pdf</html>", bytes(range(256)) * 40, b"%PDF-1.4\n1 0 obj\n<< /Type /Cat"],
    ids=["empty", "header-only", "html", "garbage", "truncated-object"],
)
def test_broken_pdf_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_quickly(data, "broken.pdf")
    assert caught.value.code == "invalid_file"


def test_pdf_without_pages_is_refused() -> None:
    with pytest.raises(DocumentError, match="no pages"):
        parse_quickly(_pdf(CATALOG, b"<< /Type /Pages /Kids [] /Count 0 >>"), "nopages.pdf")


def _pdf_pages(*texts: bytes) -> bytes:
    """A PDF with one Helvetica page per entry of ``texts`` (raw PDF string bytes, escapes allowed)."""
    count = len(texts)
    kids = b" ".join(b"%d 0 R" % (4 + 2 * index) for index in range(count))
    objects = [CATALOG, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count), FONT]
    for index, text in enumerate(texts):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * index))
        objects.append(_content(text))
    return _pdf(*objects)


# Glyph codes 1-17 in a font with a standard encoding: pypdf returns control characters, pdfminer "(cid:N)".
UNDECODABLE = b"\\001\\002\\003\\004 \\005\\006\\007\\010 \\016\\017\\020\\021"


def test_pdf_whose_text_no_reader_decodes_is_refused() -> None:
    with pytest.raises(DocumentError, match="cannot be decoded") as caught:
        parse_quickly(_pdf_pages(UNDECODABLE), "undecodable.pdf")
    assert caught.value.code == "invalid_file" and "undecodable.pdf" in caught.value.message


def test_pdf_page_no_reader_decodes_is_skipped() -> None:
    document = parse_quickly(_pdf_pages(b"Hello synthetic", UNDECODABLE, b"Goodbye synthetic"), "mixed.pdf")
    assert document.text == "Hello synthetic\n\nGoodbye synthetic"
    assert [(p.number, p.start, p.end) for p in document.pages] == [(1, 0, 15), (2, 15, 15), (3, 17, 34)]


def test_pdf_nul_bytes_in_text_are_removed() -> None:
    data = _pdf(CATALOG, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>", PAGE, _content(b"Hel\\000lo"), FONT)
    document = parse_quickly(data, "nul.pdf")
    assert "\x00" not in document.text and "Hello" in document.text


# --- fuzz ---------------------------------------------------------------------------------------------------------

try:
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hypothesis_settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in requirements-dev.txt
    given = None


if given is not None:

    @hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.binary(max_size=2048), extension=st.sampled_from(sorted(SUPPORTED_EXTENSIONS)))
    def test_arbitrary_bytes_never_escape_as_library_errors(data: bytes, extension: str) -> None:
        try:
            document = parse_document(data, f"fuzz{extension}")
        except DocumentError as exc:
            assert exc.code == "invalid_file"
        else:
            assert_clean(document.text)


def test_the_parse_budget_counts_the_parsers_own_cpu_time_not_the_machines_load() -> None:
    """CPU-seconds of the parsing thread are the budget: waiting (a busy machine: another thread or process has
    the CPU) spends none of it, and only the much longer wall-clock cap stops such a parse — with the retryable
    ParseContentionError, never a refusal of the file."""
    import threading
    import time

    from chalicelib.errors import UpstreamTimeoutError
    from chalicelib.ingest.parse.limits import Deadline, ParseContentionError

    waiting = Deadline(0.05, "busy.pdf", wall_timeout_s=0.3)
    time.sleep(0.2)  # not this thread's CPU
    waiting.check()
    assert waiting.cpu_s() < 0.05
    time.sleep(0.15)
    with pytest.raises(ParseContentionError, match="busy machine") as raised:
        waiting.check()
    assert isinstance(raised.value, UpstreamTimeoutError) and not isinstance(raised.value, DocumentError)

    working = Deadline(0.05, "hard.pdf", wall_timeout_s=60)
    spin = time.monotonic() + 5
    with pytest.raises(DocumentError, match="CPU time"):
        while time.monotonic() < spin:
            working.check()
    assert working.cpu_s() > 0.05

    # another thread's work is not this parse's: the budget holds while a neighbour burns CPU
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            sum(range(1000))

    neighbour = threading.Thread(target=burn, daemon=True)
    neighbour.start()
    try:
        shared = Deadline(0.2, "calm.pdf", wall_timeout_s=60)
        time.sleep(0.3)
        shared.check()
    finally:
        stop.set()
        neighbour.join(5)


@requires_docs
def test_contention_is_not_a_damaged_file() -> None:
    """A format module's own broad ``except`` never turns the contention error into a refusal of the file."""
    from chalicelib.ingest.parse.limits import ParseContentionError

    data = (DOCS / "pdfjs_pdkids.pdf").read_bytes()
    with pytest.raises(ParseContentionError):
        parse_quickly(data, "pdkids.pdf", ParseLimits(timeout_s=60, wall_timeout_s=0.0))
