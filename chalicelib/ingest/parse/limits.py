"""Bounds on the work one parse may do: sizes, counts, nesting and wall-clock time."""

from __future__ import annotations

import time
from dataclasses import dataclass

from chalicelib.errors import DocumentError

MIB = 1024 * 1024
"""Bytes in one mebibyte."""


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Upper bounds applied while parsing one document; exceeding any raises ``DocumentError`` (``invalid_file``).

    The defaults are Engram's own choices, sized so that a legitimate large document (a few thousand pages, a
    book-length DOCX) passes while hostile input is refused well before it exhausts a worker's memory or time.

    Attributes:
        max_bytes: largest input accepted, in bytes (default 512 MiB).
        max_pages: most pages a PDF may have (default 5000).
        max_chars: most characters of extracted text (default 50,000,000).
        max_docx_uncompressed_bytes: the sum of the declared uncompressed sizes of a DOCX's zip members, in bytes
            (default 200 MiB).
        max_compression_ratio: largest uncompressed/compressed size ratio of any zip member of at least
            ``ratio_min_member_bytes`` uncompressed (default 100, i.e. 100:1; ordinary XML compresses ~5-20:1).
        ratio_min_member_bytes: members smaller than this many bytes are exempt from the ratio check
            (default 1 MiB; tiny members can legitimately compress very well).
        max_zip_members: most members a DOCX zip may hold (default 10,000).
        max_nesting: deepest nesting followed in JSON values and DOCX tables-in-tables/text boxes (default 100
            levels). HTML is walked iteratively and needs no such bound.
        timeout_s: wall-clock budget for one document, in seconds (default 120); checked between pages, rows
            and elements, so one pathological unit of work may overrun it.
    """

    max_bytes: int = 512 * MIB
    max_pages: int = 5000
    max_chars: int = 50_000_000
    max_docx_uncompressed_bytes: int = 200 * MIB
    max_compression_ratio: float = 100.0
    ratio_min_member_bytes: int = 1 * MIB
    max_zip_members: int = 10_000
    max_nesting: int = 100
    timeout_s: float = 120.0


def display_name(filename: str, max_len: int = 120) -> str:
    """``filename`` quoted for an error message, shortened to at most ``max_len`` characters."""
    name = filename if len(filename) <= max_len else filename[: max_len - 1] + "…"
    return repr(name)


class Deadline:
    """A wall-clock budget for one document (``time.monotonic`` seconds), checked cooperatively."""

    __slots__ = ("_expires", "_timeout_s", "_name")

    def __init__(self, timeout_s: float, filename: str) -> None:
        self._timeout_s = timeout_s
        self._expires = time.monotonic() + timeout_s
        self._name = display_name(filename)

    def remaining(self) -> float:
        """Seconds left before the budget runs out (negative once exceeded)."""
        return self._expires - time.monotonic()

    def check(self) -> None:
        """Raise ``DocumentError`` (``invalid_file``) if the budget is spent."""
        if time.monotonic() > self._expires:
            raise DocumentError(
                f"{self._name} took longer than {self._timeout_s:g} s to parse; it is too large or too complex"
            )


class CharBudget:
    """Counts characters of extracted text against ``ParseLimits.max_chars``."""

    __slots__ = ("_limit", "_used", "_name")

    def __init__(self, limit: int, filename: str) -> None:
        self._limit = limit
        self._used = 0
        self._name = display_name(filename)

    def add(self, n: int) -> None:
        """Account for ``n`` more characters; raise ``DocumentError`` (``invalid_file``) past the limit."""
        self._used += n
        if self._used > self._limit:
            raise DocumentError(f"{self._name} yields more than the limit of {self._limit:,} characters of text")
