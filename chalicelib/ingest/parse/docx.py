"""Word documents (``.docx``): paragraphs, headings, lists and tables (incl. merged cells) in document order."""

from __future__ import annotations

import io
import zipfile

from docx import Document
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph
from docx.types import ProvidesStoryPart

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.docx_strict import is_strict, to_transitional
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits, display_name, setting_of
from chalicelib.ingest.parse.normalize import clean_text, join_blocks
from chalicelib.ingest.parse.zipguard import check_zip

CELL_SEPARATOR = " | "
"""Placed between the cells of a table row."""

_P, _TBL, _TR, _TC = qn("w:p"), qn("w:tbl"), qn("w:tr"), qn("w:tc")
_SDT, _SDT_CONTENT, _CUSTOM_XML = qn("w:sdt"), qn("w:sdtContent"), qn("w:customXml")
_TC_PR, _V_MERGE, _VAL = qn("w:tcPr"), qn("w:vMerge"), qn("w:val")
_P_PR, _NUM_PR, _P_STYLE = qn("w:pPr"), qn("w:numPr"), qn("w:pStyle")
_TXBX_CONTENT = qn("w:txbxContent")
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
# Wrappers whose children belong to the enclosing container (content controls, custom XML).
_WRAPPERS = frozenset({_SDT, _SDT_CONTENT, _CUSTOM_XML})


def parse_docx(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse a DOCX file's main document body with python-docx.

    The zip container is checked for zip bombs first (see ``zipguard.check_zip``). A Strict Open XML document
    is rewritten with Transitional namespaces (see ``docx_strict``) and then read like any other. Paragraphs
    (headings included) become blocks separated by blank lines; list paragraphs are prefixed ``"- "`` and
    consecutive ones share a block, one per line; text boxes follow their anchoring paragraph; each table is
    one block with one line per row and cells separated by ``" | "``. A horizontally merged cell appears once;
    a vertically merged cell's text appears in its first row only. Headers, footers, footnotes and comments
    are not read.

    Raises ``DocumentError`` (``invalid_file``) for a zip bomb, a damaged or non-Word file (the message names
    "Strict Open XML" when the file is one), tables nested deeper than ``limits.max_nesting``, or exceeded
    time/character limits.
    """
    name = display_name(filename)
    check_zip(data, filename, limits)
    variant = "Word (.docx)"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if is_strict(archive):
                variant = "Strict Open XML Word (.docx)"
                data = to_transitional(archive)
        document = Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises KeyError, ValueError, lxml errors, PackageNotFoundError ...
        raise DocumentError(f"{name} is not a readable {variant} document: {exc}") from exc
    walker = _Walker(name, limits, Deadline(limits.timeout_s, filename, limits.wall_timeout_s),
                     CharBudget(limits.max_chars, filename), story=document)
    blocks = walker.blocks(document.element.body, depth=0)
    return ParsedDocument(text=join_blocks([clean_text(block) for block in blocks]), parser="python-docx")


class _Walker:
    """Turns WordprocessingML elements into text blocks, checking limits as it goes."""

    def __init__(self, name: str, limits: ParseLimits, deadline: Deadline, budget: CharBudget, *,
                 story: ProvidesStoryPart) -> None:
        self._name = name
        self._story = story  # the parent python-docx's paragraph proxies are given
        self._max_depth = limits.max_nesting
        self._deadline = deadline
        self._budget = budget

    def blocks(self, container, depth: int) -> list[str]:
        """Text blocks of the paragraphs and tables directly in ``container`` (body, cell, text box), in order."""
        if depth > self._max_depth:
            raise DocumentError(f"{self._name} nests tables deeper than {self._max_depth} levels "
                                    f"({setting_of('max_nesting')})")
        out: list[list[str]] = []  # blocks, each a list of lines
        in_list = False  # consecutive list items share one block, one item per line
        pending = list(container.iterchildren())
        pending.reverse()
        while pending:  # iterative over wrappers, recursive only into tables and text boxes (bounded by depth)
            element = pending.pop()
            if element.tag == _P:
                text, is_item = self._paragraph(element)
                if is_item and in_list:
                    out[-1].append(text)
                else:
                    out.append([text])
                in_list = is_item
                boxes = self._text_boxes(element, depth)
                if boxes:
                    out.extend([box] for box in boxes)
                    in_list = False
            elif element.tag == _TBL:
                out.append([self._table(element, depth)])
                in_list = False
            elif element.tag in _WRAPPERS:
                pending.extend(reversed(list(element.iterchildren())))
        return ["\n".join(lines) for lines in out]

    def _paragraph(self, p) -> tuple[str, bool]:
        """The paragraph's text (list items prefixed ``"- "``) and whether it is a list item."""
        self._deadline.check()
        text = Paragraph(p, self._story).text
        self._budget.add(len(text))
        p_pr = p.find(_P_PR)
        if p_pr is not None and text.strip():
            style = p_pr.find(_P_STYLE)
            style_id = (style.get(_VAL) or "") if style is not None else ""
            if p_pr.find(_NUM_PR) is not None or style_id.startswith("List"):
                return f"- {text}", True
        return text, False

    def _text_boxes(self, p, depth: int) -> list[str]:
        out: list[str] = []
        for box in p.iter(_TXBX_CONTENT):
            between = _ancestors_below(box, p)
            if any(ancestor.tag in (_MC_FALLBACK, _TXBX_CONTENT) for ancestor in between):
                continue  # a copy of the mc:Choice box, or a box inside a box (read with its parent box)
            out.extend(self.blocks(box, depth + 1))
        return out

    def _table(self, tbl, depth: int) -> str:
        lines = []
        for tr in _children(tbl, _TR):
            cells = [self._cell(tc, depth) for tc in _children(tr, _TC)]
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                lines.append(CELL_SEPARATOR.join(cells))
        return "\n".join(lines)

    def _cell(self, tc, depth: int) -> str:
        tc_pr = tc.find(_TC_PR)
        v_merge = tc_pr.find(_V_MERGE) if tc_pr is not None else None
        if v_merge is not None and v_merge.get(_VAL) in (None, "continue"):
            return ""  # continuation of a vertical merge: the text is in the first cell of the merge
        return " ".join(" ".join(block.split()) for block in self.blocks(tc, depth + 1) if block.strip())


def _ancestors_below(element, top) -> list:
    """Ancestors of ``element`` up to, excluding, ``top``."""
    out = []
    for ancestor in element.iterancestors():
        if ancestor is top:
            break
        out.append(ancestor)
    return out


def _children(parent, tag: str):
    """Children of ``parent`` with ``tag``, looking through content-control and custom-XML wrappers."""
    pending = list(parent.iterchildren())
    pending.reverse()
    while pending:
        element = pending.pop()
        if element.tag == tag:
            yield element
        elif element.tag in _WRAPPERS:
            pending.extend(reversed(list(element.iterchildren())))
