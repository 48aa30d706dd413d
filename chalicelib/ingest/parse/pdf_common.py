"""What the PDF extractors return and raise, shared by ``pdf_pypdf``, ``pdf_pdfminer`` and ``pdf``."""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.errors import DocumentError
from chalicelib.ingest.parse.limits import setting_of


@dataclass(slots=True)
class PdfPages:
    """Raw text of each page, in page order, as one extractor produced it.

    Attributes:
        texts: one (uncleaned) string per page; ``""`` for a page without text or one that failed.
        failed_pages: how many pages raised during extraction (their text is ``""``).
        has_images: whether any page draws an image (``None`` if not determined yet).
        parser: the extractor's name, e.g. ``"pypdf"``.
    """

    texts: list[str]
    failed_pages: int
    has_images: bool | None
    parser: str


class PdfUnreadable(Exception):
    """An extractor could not read the file's structure; another extractor may. Internal, never escapes ``pdf``."""


def password_error(name: str) -> DocumentError:
    """The error for a PDF that needs a user password (``name`` already quoted for display)."""
    return DocumentError(f"{name} is password-protected; remove the password and upload it again")


def too_many_pages_error(name: str, count: int | None, limit: int) -> DocumentError:
    """The error for a PDF over ``ParseLimits.max_pages``; ``count`` is ``None`` if only a lower bound is known."""
    has = f"has {count:,} pages" if count is not None else f"has more than {limit:,} pages"
    return DocumentError(f"{name} {has}; the limit is {limit:,} ({setting_of('max_pages')})")
