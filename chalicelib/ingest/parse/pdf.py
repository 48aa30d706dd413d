"""PDF (``.pdf``): pypdf first, pdfminer.six as fallback; one page span per page; no OCR."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import PageSpan, ParsedDocument
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits, display_name
from chalicelib.ingest.parse.normalize import clean_layout_text
from chalicelib.ingest.parse.pdf_common import PdfPages, PdfUnreadable
from chalicelib.ingest.parse.pdf_pdfminer import extract_with_pdfminer
from chalicelib.ingest.parse.pdf_pypdf import extract_with_pypdf
from chalicelib.ingest.parse.pdf_quality import garbage_score, is_garbage
from chalicelib.ingest.parse.rtl import has_presentation_forms

PAGE_SEPARATOR = "\n\n"
"""Placed between the texts of consecutive non-empty pages."""

_log = logging.getLogger("engram.ingest.parse")


def parse_pdf(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Extract a PDF's text page by page; ``pages`` holds one ``PageSpan`` per page (1-based, offsets into text).

    pypdf reads first. pdfminer is tried as well when pypdf cannot open the file (no or broken xref, bad page
    tree), when some pages failed, when pypdf found no text, when the text of some page looks mis-decoded (see
    ``pdf_quality``), or when it holds Arabic presentation forms (see ``_choose``); the better result is kept.
    A page whose text is still mis-decoded in the kept result is skipped (it gets an empty span and a warning is
    logged): garbage is never indexed. Empty pages get zero-length spans and add no separator. Right-to-left
    lines in visual order are put in logical order (see ``normalize.clean_layout_text``). An encrypted PDF is
    opened with the empty user password (owner-password-only files read normally).

    Returns empty text (and no error) for a PDF whose pages hold neither text nor images.
    Raises ``DocumentError`` (``invalid_file``) when the PDF is password-protected, damaged beyond both readers,
    has no pages, has text that neither reader can decode on any of its pages with text ("cannot be decoded":
    fonts without a usable Unicode mapping), has pages with images but no text ("no text layer": scanned, OCR is not
    supported), or exceeds ``limits`` (pages, characters, time).
    """
    name = display_name(filename)
    deadline = Deadline(limits.timeout_s, filename, limits.wall_timeout_s)
    candidates: list[_Reading] = []
    pypdf_error: PdfUnreadable | None = None
    try:
        budget = CharBudget(limits.max_chars, filename)
        candidates.append(_Reading.of(extract_with_pypdf(data, name, limits, deadline, budget)))
    except PdfUnreadable as exc:
        pypdf_error = exc
    if not candidates or candidates[0].wants_second_opinion():
        try:
            budget = CharBudget(limits.max_chars, filename)
            candidates.append(_Reading.of(extract_with_pdfminer(data, name, limits, deadline, budget)))
        except PdfUnreadable as exc:
            if not candidates:
                raise DocumentError(_damaged(name, pypdf_error)) from exc
    best = _choose(candidates)
    if not best.pages.texts:
        raise DocumentError(_damaged(name, pypdf_error) if pypdf_error else f"{name} has no pages")
    kept = ["" if garbled else page for page, garbled in zip(best.pages.texts, best.garbled)]
    text, spans = _assemble([clean_layout_text(page) for page in kept])
    skipped = sum(best.garbled)
    if not text and skipped:
        raise DocumentError(
            f"{name} has text that cannot be decoded on all of its {skipped:,} page(s) with text (its fonts lack "
            "a usable Unicode mapping); it cannot be indexed"
        )
    if not text and any(candidate.pages.has_images for candidate in candidates):
        raise DocumentError(f"{name} has no text layer (scanned or image-only); OCR is not supported")
    if not text and best.pages.failed_pages:
        raise DocumentError(
            f"{name} is damaged: text could not be extracted from {best.pages.failed_pages:,} page(s)"
        )
    if skipped:
        pages = [number for number, garbled in enumerate(best.garbled, start=1) if garbled]
        _log.warning("%s: skipped %d page(s) whose text cannot be decoded: %s", name, skipped, pages[:20])
    return ParsedDocument(text=text, pages=spans, parser=best.pages.parser)


@dataclass(frozen=True, slots=True)
class _Reading:
    """One extractor's pages and how they were judged (computed once)."""

    pages: PdfPages
    garbled: tuple[bool, ...]
    """Per page: ``pdf_quality.is_garbage`` of its raw text."""
    score: float
    """``pdf_quality.garbage_score`` of all pages joined, rounded to 2 decimals (a tie-breaker)."""

    @classmethod
    def of(cls, pages: PdfPages) -> _Reading:
        """Judge ``pages``: one garbage check per page, one over the whole text."""
        garbled = tuple(is_garbage(text) for text in pages.texts)
        return cls(pages, garbled, round(garbage_score("\n".join(pages.texts)), 2))

    @property
    def has_text(self) -> bool:
        """Whether any page has non-blank text."""
        return any(text.strip() for text in self.pages.texts)

    @property
    def unusable_pages(self) -> int:
        """Pages that failed or whose text is mis-decoded."""
        return self.pages.failed_pages + sum(self.garbled)

    @property
    def rtl_order_unreliable(self) -> bool:
        """pypdf text with Arabic presentation forms: see ``_choose``."""
        return self.pages.parser == "pypdf" and any(has_presentation_forms(text) for text in self.pages.texts)

    def wants_second_opinion(self) -> bool:
        """Whether pdfminer should read the file too."""
        return self.unusable_pages > 0 or not self.has_text or self.rtl_order_unreliable


def _damaged(name: str, cause: Exception | None) -> str:
    detail = str(cause)[:200] if cause else "no readable page tree"
    return f"{name} is damaged or not a PDF and cannot be read ({detail})"


def _choose(candidates: list[_Reading]) -> _Reading:
    """Fewest failed or mis-decoded pages, then some text over none, then pdfminer over pypdf for text in Arabic
    presentation forms, then the least garbage; ties go to the earlier (pypdf).

    Presentation forms mean shaped glyphs drawn in visual order. pypdf reverses right-to-left characters within
    each text-showing operator only, so its word order depends on how the producer split the operators
    (``pdfjs_ArabicCIDTrueType.pdf``: letters in logical order, words in visual order, undetectable). pdfminer
    keeps drawing order throughout, which ``rtl.to_logical`` recognises from the glyph forms and reverses.
    """

    def rank(reading: _Reading) -> tuple[bool, int, bool, bool, float]:
        return (not reading.pages.texts, reading.unusable_pages, not reading.has_text,
                reading.rtl_order_unreliable, reading.score)

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
