"""Text that arrives encoded wrong: Strict Open XML.

Synthetic inputs only (they always run); the real files behind each case are tested in ``test_parse.py``.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from chalicelib.errors import DocumentError
from chalicelib.ingest.parse import parse_document
from chalicelib.ingest.parse.docx_strict import is_strict

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
