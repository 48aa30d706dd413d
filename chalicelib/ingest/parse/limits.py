"""Bounds on the work one parse may do: sizes, counts, nesting and time.

Time is the parser's own work: CPU seconds of the parsing thread (:func:`time.thread_time`), which a busy machine
does not inflate — a 117-page PDF takes the same ~15 CPU-seconds alone or beside ten other jobs, while its
wall-clock time grows with the load. Past :attr:`ParseLimits.timeout_s` CPU-seconds the file is refused for good
(too large or too complex). A much longer wall-clock cap (:attr:`ParseLimits.wall_timeout_s`) stops a parse that
the machine starves of CPU; that one is not the file's fault: :class:`ParseContentionError` is retryable (the
queue delivers the file again later) and never fails the file on its own.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from chalicelib import config
from chalicelib.errors import DocumentError, UpstreamTimeoutError

MIB = 1024 * 1024
"""Bytes in one mebibyte."""


def _default(name: str) -> Any:
    """The default of the :class:`~chalicelib.config.Settings` field ``name`` (each limit's default is written
    once, there)."""
    return config.Settings.__dataclass_fields__[name].default


def setting_of(limit: str) -> str:
    """The environment variable that sets the :class:`ParseLimits` field ``limit`` (``max_chars`` →
    ``ENGRAM_PARSE_MAX_CHARS``; ``max_bytes`` → ``ENGRAM_MAX_FILE_BYTES``), for error messages."""
    field = "max_file_bytes" if limit == "max_bytes" else f"parse_{limit}"
    return str(config.Settings.__dataclass_fields__[field].metadata["env"])


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """Upper bounds applied while parsing one document; exceeding any raises ``DocumentError`` (``invalid_file``).

    The defaults are Engram's own choices, sized so that a legitimate large document (a few thousand pages, a
    book-length DOCX) passes while hostile input is refused well before it exhausts a worker's memory or time.
    Each is a setting (:func:`from_settings`; the variable is :func:`setting_of`, named in every refusal and listed
    in docs/operations.md).

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
        timeout_s: CPU budget for one document, in seconds of the parsing thread's CPU time (default 120); checked
            between pages, rows and elements, so one pathological unit of work may overrun it.
        wall_timeout_s: wall-clock cap for one document, in seconds (default 600: five times the CPU budget, so a
            parse that is merely slowed down by other work still fits, and below the ingest function's 900 s);
            hitting it raises the retryable :class:`ParseContentionError`, not a refusal.
    """

    max_bytes: int = _default("max_file_bytes")
    max_pages: int = _default("parse_max_pages")
    max_chars: int = _default("parse_max_chars")
    max_docx_uncompressed_bytes: int = _default("parse_max_docx_uncompressed_bytes")
    max_compression_ratio: float = _default("parse_max_compression_ratio")
    ratio_min_member_bytes: int = 1 * MIB
    max_zip_members: int = _default("parse_max_zip_members")
    max_nesting: int = _default("parse_max_nesting")
    timeout_s: float = _default("parse_timeout_s")
    wall_timeout_s: float = _default("parse_wall_timeout_s")

    @classmethod
    def from_settings(cls, settings: config.Settings) -> ParseLimits:
        """The limits ``settings`` configure (``ENGRAM_MAX_FILE_BYTES`` and the ``ENGRAM_PARSE_*`` variables)."""
        return cls(max_bytes=settings.max_file_bytes, **{
            f.name: getattr(settings, f"parse_{f.name}") for f in dataclasses.fields(cls)
            if f.name not in ("max_bytes", "ratio_min_member_bytes")})

    def refusal_by_size(self, size: int, *, text: bool) -> str | None:
        """Why a file of ``size`` bytes must be refused before it is read, or None when its size alone does not
        tell: over ``max_bytes``; or, for a text format (``text``: .txt .md .csv .json .html), over 4 ×
        ``max_chars`` bytes — no encoding a text file may use spends more than 4 bytes on a character (UTF-8,
        UTF-16 and UTF-32 at most 4, single-byte encodings 1), so such a file holds more characters than the
        limit."""
        if size > self.max_bytes:
            return f"is {size:,} bytes; the limit is {self.max_bytes:,} bytes ({setting_of('max_bytes')})"
        if text and size > 4 * self.max_chars:
            return (f"is {size:,} bytes of text, so more than the limit of {self.max_chars:,} characters "
                    f"({setting_of('max_chars')})")
        return None


def display_name(filename: str, max_len: int = 120) -> str:
    """``filename`` quoted for an error message, shortened to at most ``max_len`` characters."""
    name = filename if len(filename) <= max_len else filename[: max_len - 1] + "…"
    return repr(name)


class ParseContentionError(UpstreamTimeoutError):
    """A parse ran past its wall-clock cap without spending its CPU budget: the machine was busy, the file is not
    at fault. Retryable (the message is delivered again); the file is not failed for it."""


# What a format module re-raises through its own broad ``except Exception`` (a damaged page must not hide these).
PASS_THROUGH: tuple[type[Exception], ...] = (DocumentError, ParseContentionError)


class Deadline:
    """The time budget of one document, checked cooperatively (module docstring): ``timeout_s`` CPU-seconds of the
    thread that created it, and a ``wall_timeout_s`` wall-clock cap (default five times the CPU budget)."""

    __slots__ = ("_cpu_start", "_timeout_s", "_wall_expires", "_wall_timeout_s", "_name")

    def __init__(self, timeout_s: float, filename: str, wall_timeout_s: float | None = None) -> None:
        self._timeout_s = timeout_s
        self._wall_timeout_s = wall_timeout_s if wall_timeout_s is not None else 5 * timeout_s
        self._cpu_start = time.thread_time()
        self._wall_expires = time.monotonic() + self._wall_timeout_s
        self._name = display_name(filename)

    def cpu_s(self) -> float:
        """CPU-seconds the parsing thread has spent since the deadline was set."""
        return time.thread_time() - self._cpu_start

    def remaining(self) -> float:
        """CPU-seconds left before the budget runs out (negative once exceeded)."""
        return self._timeout_s - self.cpu_s()

    def check(self) -> None:
        """Raise when the budget is spent.

        Raises:
            DocumentError: (``invalid_file``) the parser's own work passed ``timeout_s`` CPU-seconds: the file is
                too large or too complex (final).
            ParseContentionError: the wall-clock cap passed first: the machine is busy (retryable).
        """
        used = self.cpu_s()
        if used > self._timeout_s:
            raise DocumentError(
                f"{self._name} needed more than {self._timeout_s:g} s of CPU time to parse; it is too large or too "
                f"complex ({setting_of('timeout_s')})")
        if time.monotonic() > self._wall_expires:
            raise ParseContentionError(
                f"{self._name} was still parsing after {self._wall_timeout_s:g} s on a busy machine ({used:.1f} s of "
                "CPU so far, within its budget); it will be retried.")


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
            raise DocumentError(f"{self._name} yields more than the limit of {self._limit:,} characters of text "
                                f"({setting_of('max_chars')})")
