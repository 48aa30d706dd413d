"""Plain text and Markdown (``.txt``, ``.md``): decode the bytes, keep the text as written."""

from __future__ import annotations

import codecs
import re

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.limits import ParseLimits, display_name
from chalicelib.ingest.parse.normalize import clean_text

try:  # optional: better guesses for legacy 8-bit encodings than the latin-1 fallback
    import charset_normalizer
except ImportError:  # pragma: no cover - depends on the environment
    _HAVE_CHARSET_NORMALIZER = False
else:
    _HAVE_CHARSET_NORMALIZER = True

# Byte-order marks, longest first (the UTF-32-LE BOM starts with the UTF-16-LE one).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Share of control characters (other than tab/newline/CR/FF) above which decoded "text" is judged binary.
_MAX_CONTROL_SHARE = 0.20  # random bytes decode to ~25% C0/C1 controls; text with stray NULs stays well below
_SAMPLE_CHARS = 65_536
# C0 and C1 control characters other than tab, newline, form feed and carriage return.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


def decode_text(data: bytes, filename: str) -> str:
    """Decode ``data`` (a text file's bytes) to ``str``.

    Order: a byte-order mark (UTF-8/16/32) decides; else strict UTF-8; else the best guess of ``charset_normalizer``
    if installed; else latin-1 (which cannot fail). Raises ``DocumentError`` (``invalid_file``) if the result is
    mostly control characters, i.e. the file is binary, not text.
    """
    text = _decode(data)
    sample = text[:_SAMPLE_CHARS]
    if sample:
        controls = len(_CONTROLS.findall(sample))
        if controls / len(sample) > _MAX_CONTROL_SHARE:
            raise DocumentError(f"{display_name(filename)} does not look like text (it contains binary data)")
    return text


def _decode(data: bytes) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if _HAVE_CHARSET_NORMALIZER:
        guessed = _guess(data)
        if guessed is not None:
            return guessed
    return data.decode("latin-1")


def _guess(data: bytes) -> str | None:
    """charset_normalizer's best guess; among equally good guesses windows-1252 wins (the commonest legacy
    encoding; short Western texts otherwise tie with cp1250 and come out as "crčme")."""
    matches = list(charset_normalizer.from_bytes(data))
    if not matches:
        return None
    best = matches[0]
    for match in matches:
        if match.encoding == "cp1252" and (match.chaos, match.coherence) == (best.chaos, best.coherence):
            return str(match)
    return str(best)


def parse_text(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse a ``.txt`` or ``.md`` file: decoded (see ``decode_text``) and cleaned; Markdown syntax is kept.

    Raises ``DocumentError`` (``invalid_file``) for binary content.
    """
    del limits  # the size bound is applied by the dispatcher; decoding is linear
    return ParsedDocument(text=clean_text(decode_text(data, filename)), parser="text")
