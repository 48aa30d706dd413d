"""Page texts of a PDF with pdfminer.six, the fallback extractor.

pdfminer reads files pypdf cannot (no xref table, broken page trees - it scans for objects) and decodes some
CJK fonts pypdf mis-maps. It is slower (layout analysis) and does not bound stream decompression, so it only runs
when pypdf failed or produced empty or garbage text; the deadline is checked on every object lookup. Residual
risk: a compressed stream that inflates enormously is decompressed in full (pdfminer has no output bound).
"""

from __future__ import annotations

import io

from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import LAParams, LTContainer, LTImage, LTText, LTTextBox
from pdfminer.pdfdocument import PDFDocument, PDFPasswordIncorrect
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser

from chalicelib.ingest.parse.limits import PASS_THROUGH, CharBudget, Deadline, ParseLimits
from chalicelib.ingest.parse.pdf_common import PdfPages, PdfUnreadable, password_error, too_many_pages_error


def layout_params() -> LAParams:
    """pdfminer's default layout analysis plus ``detect_vertical`` (vertical CJK text, e.g. ``pm_jo.pdf``)."""
    return LAParams(detect_vertical=True)


def extract_with_pdfminer(
    data: bytes, name: str, limits: ParseLimits, deadline: Deadline, budget: CharBudget
) -> PdfPages:
    """Extract each page's text with pdfminer's layout analysis (as ``pdfminer.high_level.extract_text`` does).

    ``name`` is the display name for messages; ``budget`` counts the characters extracted. Tries the empty
    password on encrypted files. ``has_images`` reports whether any page drew an image.

    Raises ``PdfUnreadable`` if pdfminer cannot parse the file or its page tree, and ``DocumentError``
    (``invalid_file``) if a password is needed, there are more than ``limits.max_pages`` pages, or the
    time/character limits are exceeded.
    """
    try:
        document = _DeadlineDocument(PDFParser(io.BytesIO(data)), password="", deadline=deadline)
    except PDFPasswordIncorrect as exc:
        raise password_error(name) from exc
    except Exception as exc:  # PDFSyntaxError, PDFEncryptionError, RecursionError, ... from a damaged file
        raise PdfUnreadable(f"pdfminer: {type(exc).__name__}: {exc}") from exc
    resources = PDFResourceManager(caching=True)
    device = PDFPageAggregator(resources, laparams=layout_params())
    interpreter = PDFPageInterpreter(resources, device)
    texts: list[str] = []
    failed = 0
    has_images = False
    try:
        for index, page in enumerate(PDFPage.create_pages(document)):
            deadline.check()
            if index >= limits.max_pages:
                raise too_many_pages_error(name, None, limits.max_pages)
            try:
                interpreter.process_page(page)
                text, images = _render(device.get_result())
            except PASS_THROUGH:
                raise
            except Exception:  # one bad page must not sink the document
                failed += 1
                text, images = "", False
            budget.add(len(text))
            texts.append(text)
            has_images = has_images or images
    except PASS_THROUGH:
        raise
    except Exception as exc:  # walking a damaged page tree
        raise PdfUnreadable(f"pdfminer: {type(exc).__name__}: {exc}") from exc
    return PdfPages(texts=texts, failed_pages=failed, has_images=has_images, parser="pdfminer")


class _DeadlineDocument(PDFDocument):
    """A ``PDFDocument`` that checks the deadline on every object lookup, so that loops inside pdfminer (a page
    tree listing one object a million times, a huge resource dictionary) stop on time, not only between pages."""

    def __init__(self, parser: PDFParser, *, password: str, deadline: Deadline) -> None:
        self._deadline = deadline
        super().__init__(parser, password=password)

    def getobj(self, objid: int) -> object:
        """``PDFDocument.getobj`` after ``Deadline.check`` (raises ``DocumentError`` once time is up)."""
        self._deadline.check()
        return super().getobj(objid)


def _render(layout: LTContainer) -> tuple[str, bool]:
    """Text of a laid-out page in reading order, as ``pdfminer.converter.TextConverter`` writes it (each text box
    followed by a newline), and whether the page holds an image. Iterative: figure nesting cannot overflow."""
    parts: list[str] = []
    has_images = False
    pending: list[object] = [layout]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, LTImage):
            has_images = True
        elif isinstance(item, LTContainer):
            if isinstance(item, LTTextBox):
                pending.append("\n")
            pending.extend(reversed(list(item)))
        elif isinstance(item, LTText):
            parts.append(item.get_text())
    return "".join(parts), has_images
