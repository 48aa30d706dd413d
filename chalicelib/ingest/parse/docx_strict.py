"""Strict Open XML Word documents (ISO/IEC 29500 Strict) rewritten as Transitional ones, which python-docx reads.

Word's "Strict Open XML Document" format has the same parts, elements and attributes as the ordinary
(Transitional) ``.docx`` but other namespace URIs: ``http://purl.oclc.org/ooxml/...`` instead of
``http://schemas.openxmlformats.org/.../2006/...``, in the XML parts and in the relationship types of the
``.rels`` parts. python-docx knows only the Transitional URIs (python-openxml/python-docx#693, #1520: it reports
"no relationship of type ...officeDocument"), so a Strict package is rewritten URI for URI before it is opened.
Value syntax that Strict changed (measures such as ``"72pt"``, percentages) sits in properties Engram does not
read (page size, margins, widths); text, paragraphs, lists and tables read the same.

Sources: the Strict namespaces are listed in ECMA-376 Part 1 (5th ed.), the Transitional ones in Part 4; the
two relationship types whose names differ (``extendedProperties``/``customProperties`` vs ``extended-properties``/
``custom-properties``) are from the same parts.
"""

from __future__ import annotations

import io
import re
import zipfile

STRICT_OFFICE_DOCUMENT = b"http://purl.oclc.org/ooxml/officeDocument/relationships/officeDocument"
"""Relationship type of the main document part in a Strict package's ``_rels/.rels``."""

_TRANSITIONAL = "http://schemas.openxmlformats.org/"
# Strict namespace (after http://purl.oclc.org/ooxml/) -> Transitional namespace (after _TRANSITIONAL).
_NAMESPACES: dict[str, str] = {
    "wordprocessingml/main": "wordprocessingml/2006/main",
    "spreadsheetml/main": "spreadsheetml/2006/main",
    "presentationml/main": "presentationml/2006/main",
    "schemaLibrary/main": "schemaLibrary/2006/main",
    "officeDocument/relationships": "officeDocument/2006/relationships",
    "officeDocument/math": "officeDocument/2006/math",
    "officeDocument/sharedTypes": "officeDocument/2006/sharedTypes",
    "officeDocument/extendedProperties": "officeDocument/2006/extended-properties",
    "officeDocument/customProperties": "officeDocument/2006/custom-properties",
    "officeDocument/docPropsVTypes": "officeDocument/2006/docPropsVTypes",
    "officeDocument/bibliography": "officeDocument/2006/bibliography",
    "officeDocument/customXml": "officeDocument/2006/customXml",
    "officeDocument/characteristics": "officeDocument/2006/characteristics",
    "drawingml/main": "drawingml/2006/main",
    "drawingml/wordprocessingDrawing": "drawingml/2006/wordprocessingDrawing",
    "drawingml/picture": "drawingml/2006/picture",
    "drawingml/chart": "drawingml/2006/chart",
    "drawingml/chartDrawing": "drawingml/2006/chartDrawing",
    "drawingml/diagram": "drawingml/2006/diagram",
    "drawingml/lockedCanvas": "drawingml/2006/lockedCanvas",
    "drawingml/spreadsheetDrawing": "drawingml/2006/spreadsheetDrawing",
}
# Relationship types (after .../officeDocument/relationships/) whose Transitional name differs.
_RELATIONSHIP_TYPES = {"extendedProperties": "extended-properties", "customProperties": "custom-properties"}
_STRICT_URI = re.compile(rb"http://purl\.oclc\.org/ooxml/([A-Za-z]+/[A-Za-z]+)(/[A-Za-z]+)?")
_XML_SUFFIXES = (".xml", ".rels")


def is_strict(archive: zipfile.ZipFile) -> bool:
    """Whether the package's ``_rels/.rels`` names its main part with the Strict relationship type.

    ``archive`` must have passed ``zipguard.check_zip`` (the part is read whole). Never raises: a package
    without a readable ``_rels/.rels`` is not Strict (python-docx reports what is wrong with it).
    """
    try:
        return STRICT_OFFICE_DOCUMENT in archive.read("_rels/.rels")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError):
        return False


def to_transitional(archive: zipfile.ZipFile) -> bytes:
    """A copy of the package with every Strict namespace URI and relationship type in its ``.xml``/``.rels``
    parts replaced by the Transitional one; other parts (images ...) are copied unchanged. Returns the new zip
    (members stored uncompressed: it only lives in memory, about the declared uncompressed size in bytes).

    ``archive`` must have passed ``zipguard.check_zip`` (every member is read whole). URIs outside the table
    are left as they are. Raises ``zipfile.BadZipFile``, ``OSError``, ``ValueError`` ... for a damaged member.
    """
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as target:
        for member in archive.infolist():
            data = archive.read(member)
            if member.filename.lower().endswith(_XML_SUFFIXES):
                data = _STRICT_URI.sub(_transitional_uri, data)
            target.writestr(member.filename, data)
    return out.getvalue()


def _transitional_uri(match: re.Match[bytes]) -> bytes:
    namespace = _NAMESPACES.get(match.group(1).decode("ascii"))
    if namespace is None:
        return match.group(0)
    tail = (match.group(2) or b"").decode("ascii")
    if tail and namespace == "officeDocument/2006/relationships":
        tail = "/" + _RELATIONSHIP_TYPES.get(tail[1:], tail[1:])
    return (_TRANSITIONAL + namespace + tail).encode("ascii")
