"""The value a parser produces: a document's text and where its pages lie in that text."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PageSpan:
    """One page of a paged document: 1-based ``number`` and its ``[start, end)`` character offsets in the text."""

    number: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """Text extracted from one file.

    Attributes:
        text: the document's text, paragraphs separated by blank lines (``"\\n\\n"``); may be empty (a valid
            document with no text, e.g. a blank PDF page, yields zero chunks, not an error).
        pages: page spans for paged formats (PDF), in order, covering ``text``; empty for unpaged formats.
        parser: name of what produced the text (e.g. ``"pypdf"``, ``"pdfminer"``, ``"python-docx"``), for logs.
    """

    text: str
    pages: tuple[PageSpan, ...] = field(default_factory=tuple)
    parser: str = ""

    def page_range(self, start: int, end: int) -> tuple[int | None, int | None]:
        """First and last page number overlapping characters ``[start, end)``; ``(None, None)`` if unpaged."""
        first = last = None
        for page in self.pages:
            if page.end > start and page.start < max(end, start + 1):
                first = page.number if first is None else first
                last = page.number
        return first, last
