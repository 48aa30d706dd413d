"""The time a search asks about: absolute calendar expressions in a query ("on 9 November, 2022", "in June 2022",
"in 2023", "in May") turned into time windows that recall matches against a memory's ``valid_from`` (when the
conversation that taught it happened).

This is the *time-aware query expansion* of LongMemEval (Wu et al., "LongMemEval: Benchmarking Chat Assistants on
Long-Term Interactive Memory", ICLR 2025, §5.4): a question that names a time is answered from what was said
around that time. Engram uses it as a soft preference (:mod:`chalicelib.memory.recall` boosts memories inside a
window), not as a filter, so a date the parser misreads never hides the answer.

Recognised (English, case-insensitive; month names in full or as three-letter abbreviations, except "may"):

- a day: ``9 November 2022``, ``9th Nov, 2022``, ``November 9, 2022``, ``2022-11-09`` → that day, widened by one
  day on each side (time zones; a conversation often reports an event of the day before);
- a month of a year: ``November 2022`` → that month;
- a year after a preposition: ``in 2022``, ``during 2022``, ``of 2022``, ``since 2022``, ``by 2022`` → that year
  (a bare four-digit number may be a count, so it is not read as a year);
- a month after a preposition: ``in May``, ``during early June`` → that month in any year.

Relative expressions ("yesterday", "last week", "recently") are not resolved: they need the time the question
refers to, which a stored question rarely states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["TimeWindow", "time_windows"]

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = r"(" + "|".join([*_MONTHS, *(m[:3] for m in _MONTHS if m != "may"), "sept"]) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
# A day is widened by this much on each side.
DAY_SLACK = timedelta(days=1)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")),
    ("day_month_year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("month_day_year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.I)),
    ("month_year", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("year", re.compile(rf"\b(?:in|during|of|since|by)\s+(?:early\s+|late\s+|mid-?\s*)?{_YEAR}\b", re.I)),
    ("month", re.compile(rf"\b(?:in|during|of)\s+(?:early\s+|late\s+|mid-?\s*)?{_MONTH}(?!\w)", re.I)),
)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A span of time a query names: ``[start, end)`` (timezone-aware UTC), or, for a month named without a year,
    ``month`` (1-12) of any year with ``start``/``end`` None."""

    start: datetime | None = None
    end: datetime | None = None
    month: int | None = None

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` (timezone-aware) falls inside the window."""
        if self.month is not None:
            return moment.astimezone(UTC).month == self.month
        assert self.start is not None and self.end is not None
        return self.start <= moment < self.end


def time_windows(query: str) -> list[TimeWindow]:
    """The windows of every absolute time expression in ``query``, in order of the patterns above (a span of text
    is read once, by the most specific pattern); ``[]`` when it names none. Impossible dates (31 February) are
    ignored."""
    windows: list[TimeWindow] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            window = _window(kind, match.groups())
            if window is not None:
                taken.append(match.span())
                windows.append(window)
    return windows


def _window(kind: str, groups: tuple[str, ...]) -> TimeWindow | None:
    try:
        if kind == "iso":
            return _day(int(groups[0]), int(groups[1]), int(groups[2]))
        if kind == "day_month_year":
            return _day(int(groups[2]), _month(groups[1]), int(groups[0]))
        if kind == "month_day_year":
            return _day(int(groups[2]), _month(groups[0]), int(groups[1]))
        if kind == "month_year":
            year, month = int(groups[1]), _month(groups[0])
            start = datetime(year, month, 1, tzinfo=UTC)
            return TimeWindow(start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC))
        if kind == "year":
            year = int(groups[0])
            return TimeWindow(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
        return TimeWindow(month=_month(groups[0]))
    except ValueError:  # 31 February, month 13
        return None


def _day(year: int, month: int, day: int) -> TimeWindow:
    start = datetime(year, month, day, tzinfo=UTC)
    return TimeWindow(start - DAY_SLACK, start + timedelta(days=1) + DAY_SLACK)


def _month(name: str) -> int:
    key = name.lower().rstrip(".")[:3]
    for number, month in enumerate(_MONTHS, start=1):
        if month.startswith(key):
            return number
    raise ValueError(f"not a month: {name!r}")
