"""CSV (``.csv``): one line per row, cells kept apart; with a header row, each cell is labelled by its column."""

from __future__ import annotations

import csv
import io

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits, display_name
from chalicelib.ingest.parse.normalize import clean_text
from chalicelib.ingest.parse.text import decode_text

CELL_SEPARATOR = " | "
"""Placed between the cells of one row; a comma would be ambiguous with commas inside cells."""
_SNIFF_CHARS = 16_384
_DELIMITERS = ",;\t|"
_CHECK_EVERY_ROWS = 1000
_MAX_HEADER_CELL_CHARS = 60


def parse_csv(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse a CSV file into text: one line per row, one block for the table.

    The delimiter (``, ; TAB |``) is sniffed from the first 16 KiB, defaulting to comma. If the first row looks
    like a header (see ``_sniff``), it is kept as the first line and each later row renders as
    ``"Col A: v1 | Col B: v2"`` (empty cells omitted) so that every row carries its labels; otherwise rows render
    as ``"v1 | v2"``. Cell text keeps commas and quotes; whitespace inside a cell collapses. Raises ``DocumentError``
    (``invalid_file``) on malformed CSV (including a cell over ``csv.field_size_limit()``, 131,072 characters by
    default; that limit is process-wide, so it is not changed here) or when ``limits`` (time, characters) are
    exceeded.
    """
    text = decode_text(data, filename)
    deadline = Deadline(limits.timeout_s, filename, limits.wall_timeout_s)
    budget = CharBudget(limits.max_chars, filename)
    dialect, has_header = _sniff(text[:_SNIFF_CHARS])
    lines: list[str] = []
    try:
        header: list[str] | None = None
        for index, row in enumerate(csv.reader(io.StringIO(text, newline=""), dialect)):
            if index % _CHECK_EVERY_ROWS == 0:
                deadline.check()
            cells = [" ".join(cell.split()) for cell in row]
            if index == 0 and has_header:
                header = cells
                line = CELL_SEPARATOR.join(cells)
            else:
                line = _render_row(cells, header)
            if line.strip(" |"):
                budget.add(len(line) + 1)
                lines.append(line)
    except csv.Error as exc:
        raise DocumentError(f"{display_name(filename)} is not valid CSV: {exc}") from exc
    return ParsedDocument(text=clean_text("\n".join(lines)), parser="csv")


def _sniff(sample: str) -> tuple[type[csv.Dialect] | csv.Dialect, bool]:
    """The dialect, and whether the first row is a header: ``csv.Sniffer`` says so, or its cells look like
    column names (2+ cells, all non-empty, distinct, non-numeric, at most ``_MAX_HEADER_CELL_CHARS`` long)."""
    sniffer = csv.Sniffer()
    try:
        dialect: type[csv.Dialect] | csv.Dialect = sniffer.sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        dialect = csv.excel
    try:
        has_header = sniffer.has_header(sample)
    except csv.Error:
        has_header = False
    if not has_header:
        try:
            first = next(csv.reader(io.StringIO(sample, newline=""), dialect), [])
        except csv.Error:
            first = []
        cells = [cell.strip() for cell in first]
        has_header = (
            len(cells) >= 2
            and all(cells)
            and len(set(cells)) == len(cells)
            and all(len(cell) <= _MAX_HEADER_CELL_CHARS and not _is_number(cell) for cell in cells)
        )
    return dialect, has_header


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", ""))
    except ValueError:
        return False
    return True


def _render_row(cells: list[str], header: list[str] | None) -> str:
    if header is None:
        while cells and not cells[-1]:
            cells.pop()
        return CELL_SEPARATOR.join(cells)
    parts = []
    for i, cell in enumerate(cells):
        if not cell:
            continue
        label = header[i] if i < len(header) and header[i] else ""
        parts.append(f"{label}: {cell}" if label else cell)
    return CELL_SEPARATOR.join(parts)
