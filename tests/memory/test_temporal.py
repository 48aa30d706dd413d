"""Time expressions in queries → the windows recall prefers (chalicelib/memory/temporal.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.memory.temporal import TimeWindow, time_windows


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize("query", [
    "What did Nate make on 9 November, 2022?",
    "What did Nate make on 9th Nov 2022?",
    "What did Nate make on November 9, 2022?",
    "What did Nate make on Nov. 9 2022?",
    "What did Nate make on 2022-11-09?",
])
def test_a_day_in_any_common_form_is_that_day_widened_by_one_each_side(query):
    [window] = time_windows(query)
    assert window.contains(_utc(2022, 11, 9, 14, 30))
    assert window.contains(_utc(2022, 11, 8, 0, 0)) and window.contains(_utc(2022, 11, 10, 23, 59))
    assert not window.contains(_utc(2022, 11, 7, 23, 59)) and not window.contains(_utc(2022, 11, 11))


def test_a_month_of_a_year_and_a_year():
    [month] = time_windows("Where did Joanna travel to in July 2022?")
    assert month == TimeWindow(_utc(2022, 7, 1), _utc(2022, 8, 1))
    [december] = time_windows("What deal did he get in December 2023?")
    assert december == TimeWindow(_utc(2023, 12, 1), _utc(2024, 1, 1))
    [year] = time_windows("Which career-high performances did John achieve in 2023?")
    assert year == TimeWindow(_utc(2023, 1, 1), _utc(2024, 1, 1))


def test_a_month_alone_matches_it_in_any_year():
    [window] = time_windows("Which outdoor spot did Joanna visit in May?")
    assert window.month == 5 and window.start is None
    assert window.contains(_utc(2019, 5, 31, 23)) and not window.contains(_utc(2019, 6, 1))


def test_several_expressions_each_read_once_by_the_most_specific_pattern():
    windows = time_windows("Where was John between August 11, 2023 and August 15, 2023?")
    assert [w.start for w in windows] == [_utc(2023, 8, 10), _utc(2023, 8, 14)]


@pytest.mark.parametrize("query", [
    "How many video games has Nate won?",
    "He scored 2022 points",            # a bare four-digit number is not a year
    "You may want to ask in March",     # 'march' after 'in' is a month; checked below
    "May I ask what she likes?",        # the verb 'may'
    "What did she do recently?",        # relative: not resolved
])
def test_no_window_where_no_absolute_time_is_named(query):
    windows = time_windows(query)
    if "in March" in query:
        assert [w.month for w in windows] == [3]
    else:
        assert windows == []


def test_an_impossible_day_falls_back_to_its_month():
    [window] = time_windows("What happened on 31 February 2022?")
    assert window == TimeWindow(_utc(2022, 2, 1), _utc(2022, 3, 1))
