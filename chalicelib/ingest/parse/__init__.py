"""Document parsers: file bytes → ``ParsedDocument`` (text, page spans), dispatched by file extension.

One module per format: ``text`` (.txt .md), ``csv_`` (.csv), ``json_`` (.json), ``html`` (.html .htm),
``pdf`` (.pdf, with ``pdf_pypdf``/``pdf_pdfminer``/``pdf_quality``/``rtl``), ``docx`` (.docx, with ``zipguard``/
``docx_strict``).
Every failure a file can cause surfaces as ``DocumentError`` (``invalid_file``) or ``UnsupportedFileError``
(``unsupported_file``); library exceptions never escape.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from chalicelib.entrypoints import resolve
from chalicelib.errors import DocumentError, UnsupportedFileError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.limits import PASS_THROUGH, ParseContentionError, ParseLimits, display_name, setting_of

__all__ = ["SUPPORTED_EXTENSIONS", "TEXT_EXTENSIONS", "ParseContentionError", "ParseLimits", "parse_document",
           "refusal_by_size"]

Parser = Callable[[bytes, str, ParseLimits], ParsedDocument]

# Each format's parser by dotted path, imported on first use: importing this package (the ingestion engine does)
# loads no parsing library, so code that never parses runs without the parsers' dependencies (the deployed API
# function has none: infra/build.py PARSER_REQUIREMENTS).
_PARSERS: dict[str, str] = {
    ".txt": "chalicelib.ingest.parse.text:parse_text",
    ".md": "chalicelib.ingest.parse.text:parse_text",
    ".csv": "chalicelib.ingest.parse.csv_:parse_csv",
    ".json": "chalicelib.ingest.parse.json_:parse_json",
    ".html": "chalicelib.ingest.parse.html:parse_html",
    ".htm": "chalicelib.ingest.parse.html:parse_html",
    ".pdf": "chalicelib.ingest.parse.pdf:parse_pdf",
    ".docx": "chalicelib.ingest.parse.docx:parse_docx",
}

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset(_PARSERS)
"""File extensions (lower case, with the dot) that ``parse_document`` reads."""
TEXT_EXTENSIONS: frozenset[str] = frozenset({".txt", ".md", ".csv", ".json", ".html", ".htm"})
"""The formats whose extracted text is at most their characters (:meth:`ParseLimits.refusal_by_size`)."""


def refusal_by_size(filename: str, size: int, limits: ParseLimits) -> str | None:
    """Why ``filename`` (``size`` bytes) can be refused before it is read (:meth:`ParseLimits.refusal_by_size`,
    the message starting with the file's name), or None."""
    extension = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    why = limits.refusal_by_size(size, text=extension in TEXT_EXTENSIONS)
    return None if why is None else f"{display_name(filename)} {why}"


def parse_document(data: bytes, filename: str, *, limits: ParseLimits = ParseLimits()) -> ParsedDocument:
    """Extract the text of one file; the parser is chosen by ``filename``'s extension (case-insensitive).

    Args:
        data: the whole file, at most ``limits.max_bytes`` bytes.
        filename: the uploaded name; only its extension matters (and it appears in error messages).
        limits: bounds on size, pages, characters, nesting and CPU/wall-clock seconds (see ``ParseLimits``).

    Returns:
        ``ParsedDocument`` whose ``text`` has paragraphs separated by blank lines, free of NUL and control
        characters, NFC-normalised; ``pages`` is filled for PDFs only. The text may be empty (e.g. a blank PDF).

    Raises:
        UnsupportedFileError: (``unsupported_file``) the extension is not in ``SUPPORTED_EXTENSIONS``.
        DocumentError: (``invalid_file``) the file is too big, damaged, password-protected, has no text layer,
            is a zip bomb, nests too deeply, yields more than ``limits.max_chars`` characters, or needs more than
            ``limits.timeout_s`` CPU-seconds. Any exception from a parsing library is translated to this.
        ParseContentionError: the parse passed ``limits.wall_timeout_s`` wall-clock seconds within its CPU budget
            (a busy machine: retryable, see :mod:`chalicelib.ingest.parse.limits`).
    """
    name = display_name(filename)
    extension = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    path = _PARSERS.get(extension)
    if path is None:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        what = f"the file type {extension}" if extension else "a file without an extension"
        raise UnsupportedFileError(f"{name}: {what} is not supported; supported: {supported}")
    too_large = limits.refusal_by_size(len(data), text=extension in TEXT_EXTENSIONS)
    if too_large is not None:
        raise DocumentError(f"{name} {too_large}")
    parser: Parser = resolve(path)
    try:
        document = parser(data, filename, limits)
    except PASS_THROUGH:
        raise
    except RecursionError as exc:
        raise DocumentError(f"{name} is nested too deeply to read") from exc
    except MemoryError as exc:
        raise DocumentError(f"{name} needs too much memory to read") from exc
    except Exception as exc:  # a library failure the format module did not anticipate
        raise DocumentError(f"{name} could not be read as {extension}: {type(exc).__name__}: {exc}"[:500]) from exc
    if len(document.text) > limits.max_chars:
        raise DocumentError(f"{name} yields more than the limit of {limits.max_chars:,} characters of text "
                            f"({setting_of('max_chars')})")
    return document
