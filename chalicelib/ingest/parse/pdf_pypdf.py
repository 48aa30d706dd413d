"""Page texts of a PDF with pypdf, the primary extractor (fast, pure Python, bounded stream decoding)."""

from __future__ import annotations

import io
import re

import pypdf.errors
from pypdf import PageObject, PasswordType, PdfReader

from chalicelib.errors import DocumentError
from chalicelib.ingest.parse.limits import PASS_THROUGH, CharBudget, Deadline, ParseLimits
from chalicelib.ingest.parse.pdf_common import PdfPages, PdfUnreadable, password_error, too_many_pages_error


class _NeverRaised(Exception):
    """Stand-in for ``LimitReachedError`` on pypdf releases that lack it: nothing raises it."""


# pypdf's resource-limit error (oversized arrays, streams, trees); pypdf releases before its limits lack it.
LimitReachedError: type[Exception] = getattr(pypdf.errors, "LimitReachedError", _NeverRaised)

_INLINE_IMAGE = re.compile(rb"(?:^|\s)BI\s")  # "BI" begins an inline image (PDF 32000-1:2008, 8.9.7)
_MAX_FORM_DEPTH = 10  # how deep image search follows Form XObjects nested in Form XObjects
_MAX_XOBJECTS_VISITED = 10_000


def extract_with_pypdf(
    data: bytes, name: str, limits: ParseLimits, deadline: Deadline, budget: CharBudget
) -> PdfPages:
    """Extract each page's text with ``PdfReader(strict=False)``; decrypts with the empty password when encrypted.

    ``name`` is the display name for messages; ``budget`` counts the characters extracted. Pages that raise are
    counted in ``failed_pages`` with text ``""``.
    ``has_images`` is determined (cheaply, without decoding images) only when no page has text.

    Raises ``PdfUnreadable`` if pypdf cannot open the file or its page tree (the caller may try pdfminer), and
    ``DocumentError`` (``invalid_file``) if a password is needed, there are more than ``limits.max_pages`` pages,
    the time/character limits are exceeded, or the file trips one of pypdf's own resource limits
    (``LimitReachedError``: oversized arrays, streams, trees) - such a file is hostile or broken and is not handed
    to pdfminer, which has no such limits.
    """
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise password_error(name)
        _check_page_tree_size(reader, name, limits, deadline)
        pages = reader.pages
        count = len(pages)
    except PASS_THROUGH:
        raise
    except LimitReachedError as exc:
        raise _limit_error(name, exc) from exc
    except Exception as exc:  # PdfReadError, RecursionError, DependencyError, KeyError, ... from a damaged file
        raise PdfUnreadable(f"pypdf: {type(exc).__name__}: {exc}") from exc
    if count > limits.max_pages:
        raise too_many_pages_error(name, count, limits.max_pages)
    texts: list[str] = []
    failed = 0
    for index in range(count):
        deadline.check()
        try:
            text = pages[index].extract_text() or ""
        except LimitReachedError as exc:
            raise _limit_error(name, exc) from exc
        except Exception:  # one bad page (broken font, content stream, recursion) must not sink the document
            failed += 1
            text = ""
        budget.add(len(text))
        texts.append(text)
    has_images = None
    if not any(text.strip() for text in texts):
        has_images = _any_page_has_images(pages, count, deadline)
    return PdfPages(texts=texts, failed_pages=failed, has_images=has_images, parser="pypdf")


def _limit_error(name: str, exc: Exception) -> DocumentError:
    return DocumentError(f"{name} exceeds a safety limit of the PDF reader ({str(exc)[:200]}); it cannot be read")


def _check_page_tree_size(reader: PdfReader, name: str, limits: ParseLimits, deadline: Deadline) -> None:
    """Walk the page tree (iteratively, stopping early) before pypdf flattens it, which is unbounded work: a small
    file can list one page object millions of times. Raises ``DocumentError`` past ``limits.max_pages`` leaves or
    ``2 * max_pages + 100`` inner nodes; cycles are left for pypdf to report."""
    max_nodes = 2 * limits.max_pages + 100
    root = reader.trailer["/Root"].get_object()
    if not isinstance(root, dict):
        raise pypdf.errors.PdfReadError("the document catalogue (/Root) is not a dictionary")
    pending = [root["/Pages"]]
    seen: set[int] = set()
    leaves = nodes = 0
    while pending:
        reference = pending.pop()
        node = reference.get_object()
        if not isinstance(node, dict):
            continue
        if "/Kids" not in node and node.get("/Type") != "/Pages":
            leaves += 1
            if leaves > limits.max_pages:
                raise too_many_pages_error(name, None, limits.max_pages)
            continue
        number = getattr(reference, "idnum", None)
        if number is not None:
            if number in seen:
                continue
            seen.add(number)
        nodes += 1
        if nodes > max_nodes:
            raise DocumentError(f"{name} has a page tree of more than {max_nodes:,} nodes; it is not readable")
        if nodes % 1000 == 0:
            deadline.check()
        kids = node.get("/Kids")
        kids = kids.get_object() if kids is not None else None
        if isinstance(kids, list):
            pending.extend(reversed(kids))


def _any_page_has_images(pages, count: int, deadline: Deadline) -> bool:
    for index in range(count):
        deadline.check()
        try:
            if _page_has_images(pages[index]):
                return True
        except Exception:  # a damaged resource dictionary: treat as no image on that page
            continue
    return False


def _page_has_images(page: PageObject) -> bool:
    """Whether the page's resources hold an Image XObject (also inside Form XObjects) or its content an inline
    image. Images are not decoded."""
    pending = [(page.get("/Resources"), 0)]
    visited = 0
    while pending and visited < _MAX_XOBJECTS_VISITED:
        resources, depth = pending.pop()
        resources = resources.get_object() if resources is not None else None
        xobjects = resources.get("/XObject") if isinstance(resources, dict) else None
        xobjects = xobjects.get_object() if xobjects is not None else None
        if not isinstance(xobjects, dict):
            continue
        for ref in xobjects.values():
            visited += 1
            xobject = ref.get_object()
            if not isinstance(xobject, dict):
                continue
            subtype = xobject.get("/Subtype")
            if subtype == "/Image":
                return True
            if subtype == "/Form" and depth < _MAX_FORM_DEPTH:
                pending.append((xobject.get("/Resources"), depth + 1))
    contents = page.get_contents()
    return contents is not None and _INLINE_IMAGE.search(contents.get_data()) is not None
