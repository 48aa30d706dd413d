"""HTML (``.html``, ``.htm``): visible text, block elements as paragraphs, list items and table rows as lines."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import CData, Comment, Declaration, Doctype, ProcessingInstruction

from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits
from chalicelib.ingest.parse.normalize import clean_text, join_blocks

try:  # lxml is faster and more forgiving; html.parser is the standard library's
    import lxml  # noqa: F401

    _PARSER = "lxml"
except ImportError:  # pragma: no cover - depends on the environment
    _PARSER = "html.parser"

# Elements whose content is not visible text.
_SKIP = frozenset({"script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "math", "canvas",
                   "select", "datalist"})
# Elements that start and end a paragraph (HTML "flow content" blocks, per the WHATWG HTML standard).
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "details", "dialog", "div", "dl", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr",
    "html", "legend", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "title", "ul",
})
# Elements that start and end a line inside a paragraph.
_LINES = frozenset({"li", "dt", "dd", "tr", "br"})
_LISTS = frozenset({"ul", "ol", "dl"})
_CELLS = frozenset({"td", "th"})
_IGNORED_STRINGS = (Comment, Doctype, Declaration, ProcessingInstruction, CData)
_WHITESPACE = re.compile(r"\s+")
_CHECK_EVERY_NODES = 5_000
CELL_SEPARATOR = " | "
"""Placed between the cells of a table row."""


class _Writer:
    """Accumulates text into lines and lines into paragraphs."""

    def __init__(self, budget: CharBudget) -> None:
        self.paragraphs: list[str] = []
        self._lines: list[str] = []
        self._line: list[str] = []
        self._prefix = ""
        self._budget = budget

    def text(self, value: str) -> None:
        """Append inline text to the current line (whitespace is collapsed when the line ends)."""
        self._budget.add(len(value))
        self._line.append(value)

    def start_line(self, prefix: str) -> None:
        """End the current line and begin one that starts with ``prefix`` (kept verbatim, e.g. list indent)."""
        self.end_line()
        self._prefix = prefix

    def end_line(self) -> None:
        """Finish the current line; an empty line (or a bare list marker) is dropped."""
        line = _WHITESPACE.sub(" ", "".join(self._line)).strip()
        if line:
            self._lines.append(self._prefix + line)
        self._line = []
        self._prefix = ""

    def end_paragraph(self) -> None:
        """Finish the current paragraph; empty paragraphs are dropped."""
        self.end_line()
        if self._lines:
            self.paragraphs.append("\n".join(self._lines))
            self._lines = []


def parse_html(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse an HTML document's visible text with BeautifulSoup (lxml if installed, else html.parser).

    ``script``/``style`` and similar invisible elements and comments are dropped; block elements (``p``, ``div``,
    headings, lists, tables ...) become paragraphs separated by blank lines; list items become lines prefixed
    ``"- "``, indented two spaces per nesting level (a nested list stays in its list's paragraph); table rows
    become lines with cells separated by ``" | "``; ``pre`` keeps its line breaks; ``img`` contributes its ``alt``.
    The encoding comes from a BOM, ``<meta charset>`` or detection (BeautifulSoup's ``UnicodeDammit``).
    The walk is iterative, so nesting depth cannot exhaust the stack (``limits.max_nesting`` is not needed).
    Raises ``DocumentError`` (``invalid_file``) when the time or character limits are exceeded.
    """
    deadline = Deadline(limits.timeout_s, filename, limits.wall_timeout_s)
    soup = BeautifulSoup(data, _PARSER)
    deadline.check()
    writer = _Writer(CharBudget(limits.max_chars, filename))
    _walk(soup, writer, deadline)
    writer.end_paragraph()
    return ParsedDocument(text=join_blocks([clean_text(p) for p in writer.paragraphs]), parser=f"bs4-{_PARSER}")


def _walk(root: Tag, writer: _Writer, deadline: Deadline) -> None:
    # Stack entries: a node to enter, or (tag, None) marking the exit of a tag already entered.
    stack: list[object] = [root]
    pre_depth = 0
    list_depth = 0
    cells_in_row: list[int] = []  # per open <tr>, cells seen so far (decides where a separator goes)
    visited = 0
    while stack:
        item = stack.pop()
        visited += 1
        if visited % _CHECK_EVERY_NODES == 0:
            deadline.check()
        if isinstance(item, tuple):
            name = item[0]
            pre_depth -= name == "pre"
            list_depth -= name in _LISTS
            if name == "tr" and cells_in_row:
                cells_in_row.pop()
            if name in _LISTS and list_depth:
                writer.end_line()
            elif name in _BLOCKS:
                writer.end_paragraph()
            elif name in _LINES:
                writer.end_line()
            continue
        if isinstance(item, NavigableString):
            if not isinstance(item, _IGNORED_STRINGS):
                _write_string(str(item), writer, preformatted=pre_depth > 0)
            continue
        if not isinstance(item, Tag):
            continue
        name = (item.name or "").lower()
        if name in _SKIP:
            continue
        if name in _LISTS and list_depth:
            writer.end_line()
        elif name in _BLOCKS:
            writer.end_paragraph()
        elif name == "li":
            writer.start_line("  " * max(list_depth - 1, 0) + "- ")
        elif name in _LINES:
            writer.end_line()
        elif name in _CELLS and cells_in_row:
            if cells_in_row[-1]:
                writer.text(CELL_SEPARATOR)
            cells_in_row[-1] += 1
        elif name == "img" and isinstance(alt := item.get("alt"), str) and alt.strip():
            writer.text(f" {alt} ")
        if name == "tr":
            cells_in_row.append(0)
        pre_depth += name == "pre"
        list_depth += name in _LISTS
        stack.append((name, None))
        stack.extend(reversed(item.contents))


def _write_string(value: str, writer: _Writer, *, preformatted: bool) -> None:
    if not preformatted:
        writer.text(value)
        return
    for i, line in enumerate(value.split("\n")):
        if i:
            writer.end_line()
        writer.text(line)
