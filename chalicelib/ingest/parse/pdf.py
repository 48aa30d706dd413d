"""PDF (``.pdf``): pypdf first, pdfminer.six as fallback; one page span per page; no OCR."""

from __future__ import annotations

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import PageSpan, ParsedDocument
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits, display_name
from chalicelib.ingest.parse.normalize import clean_layout_text
from chalicelib.ingest.parse.pdf_common import PdfPages, PdfUnreadable
from chalicelib.ingest.parse.pdf_pdfminer import extract_with_pdfminer
from chalicelib.ingest.parse.pdf_pypdf import extract_with_pypdf
from chalicelib.ingest.parse.pdf_quality import garbage_score, is_garbage

PAGE_SEPARATOR = "\n\n"
"""Placed between the texts of consecutive non-empty pages."""


def parse_pdf(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Extract a PDF's text page by page; ``pages`` holds one ``PageSpan`` per page (1-based, offsets into text).

    pypdf reads first. pdfminer is tried as well when pypdf cannot open the file (no or broken xref, bad page
    tree), when some pages failed, when pypdf found no text, or when pypdf's text looks mis-decoded (see
    ``pdf_quality``); the better result is kept. Empty pages get zero-length spans and add no separator.
    An encrypted PDF is opened with the empty user password (owner-password-only files read normally).

    Returns empty text (and no error) for a PDF whose pages hold neither text nor images.
    Raises ``DocumentError`` (``invalid_file``) when the PDF is password-protected, damaged beyond both readers,
    has no pages, has pages with images but no text ("no text layer": scanned, OCR is not supported), or exceeds
    ``limits`` (pages, characters, time).
    """
    name = display_name(filename)
    deadline = Deadline(limits.timeout_s, filename)
    candidates: list[PdfPages] = []
    pypdf_error: PdfUnreadable | None = None
    try:
        candidates.append(extract_with_pypdf(data, name, limits, deadline, CharBudget(limits.max_chars, filename)))
    except PdfUnreadable as exc:
        pypdf_error = exc
    if not candidates or _wants_second_opinion(candidates[0]):
        try:
            budget = CharBudget(limits.max_chars, filename)
            candidates.append(extract_with_pdfminer(data, name, limits, deadline, budget))
        except PdfUnreadable as exc:
            if not candidates:
                raise DocumentError(_damaged(name, pypdf_error)) from exc
    best = _choose(candidates)
    if not best.texts:
        raise DocumentError(_damaged(name, pypdf_error) if pypdf_error else f"{name} has no pages")
    text, spans = _assemble([clean_layout_text(page) for page in best.texts])
    if not text and any(candidate.has_images for candidate in candidates):
        raise DocumentError(f"{name} has no text layer (scanned or image-only); OCR is not supported")
    if not text and best.failed_pages:
        raise DocumentError(f"{name} is damaged: text could not be extracted from {best.failed_pages:,} page(s)")
    return ParsedDocument(text=text, pages=spans, parser=best.parser)


def _damaged(name: str, cause: Exception | None) -> str:
    detail = str(cause)[:200] if cause else "no readable page tree"
    return f"{name} is damaged or not a PDF and cannot be read ({detail})"


def _wants_second_opinion(pages: PdfPages) -> bool:
    joined = "\n".join(pages.texts)
    return pages.failed_pages > 0 or not joined.strip() or is_garbage(joined)


def _choose(candidates: list[PdfPages]) -> PdfPages:
    """Fewest failed pages, then some text over none, then the least garbage; ties go to the earlier (pypdf)."""

    def rank(pages: PdfPages) -> tuple[bool, int, bool, float]:
        joined = "\n".join(pages.texts)
        return (not pages.texts, pages.failed_pages, not joined.strip(), round(garbage_score(joined), 2))

    return min(candidates, key=rank)


def _assemble(page_texts: list[str]) -> tuple[str, tuple[PageSpan, ...]]:
    """Join cleaned page texts with ``PAGE_SEPARATOR`` and record each page's ``[start, end)`` offsets."""
    parts: list[str] = []
    spans: list[PageSpan] = []
    position = 0
    for number, page_text in enumerate(page_texts, start=1):
        if page_text and parts:
            parts.append(PAGE_SEPARATOR)
            position += len(PAGE_SEPARATOR)
        start = position
        if page_text:
            parts.append(page_text)
            position += len(page_text)
        spans.append(PageSpan(number=number, start=start, end=position))
    return "".join(parts), tuple(spans)
