"""Budget periods: UTC days, ISO weeks from Monday, calendar months, and for ever."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.core.governance import BudgetPeriod
from gateway.core.periods import Span, Spans, budget_span


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_a_day_ends_at_the_next_utc_midnight() -> None:
    assert budget_span(BudgetPeriod.DAY, at(2026, 11, 29, 23, 59, 59)) == Span("day:2026-11-29", at(2026, 11, 30))
    assert budget_span(BudgetPeriod.DAY, at(2026, 11, 30)) == Span("day:2026-11-30", at(2026, 12, 1))


@pytest.mark.parametrize("day", [23, 25, 29])  # Monday 23 November 2026 to Sunday 29
def test_a_week_runs_from_monday_to_the_next(day: int) -> None:
    assert budget_span(BudgetPeriod.WEEK, at(2026, 11, day, 12)) == Span("week:2026-11-23", at(2026, 11, 30))


def test_a_week_across_a_year_end() -> None:
    assert budget_span(BudgetPeriod.WEEK, at(2027, 1, 1)) == Span("week:2026-12-28", at(2027, 1, 4))


def test_a_month_ends_on_the_first_of_the_next_december_included() -> None:
    assert budget_span(BudgetPeriod.MONTH, at(2026, 11, 29, 6)) == Span("month:2026-11", at(2026, 12, 1))
    assert budget_span(BudgetPeriod.MONTH, at(2026, 12, 31, 23, 59)) == Span("month:2026-12", at(2027, 1, 1))
    assert budget_span(BudgetPeriod.MONTH, at(2028, 2, 29)) == Span("month:2028-02", at(2028, 3, 1))


def test_total_never_ends() -> None:
    assert budget_span(BudgetPeriod.TOTAL, at(2026, 1, 1)) == Span("total", None)
    assert budget_span(BudgetPeriod.TOTAL, at(2030, 1, 1)) == Span("total", None)


def test_spans_are_worked_out_again_once_ended_or_when_the_clock_went_back() -> None:
    spans = Spans()
    first = spans.at(BudgetPeriod.DAY, at(2026, 11, 29, 12))
    assert spans.at(BudgetPeriod.DAY, at(2026, 11, 29, 23, 59, 59)) is first  # not worked out again
    assert spans.at(BudgetPeriod.DAY, at(2026, 11, 30)) == Span("day:2026-11-30", at(2026, 12, 1))
    assert spans.at(BudgetPeriod.DAY, at(2026, 11, 28, 12)) == Span("day:2026-11-28", at(2026, 11, 29))
    assert spans.at(BudgetPeriod.MONTH, at(2026, 11, 28)).id == "month:2026-11"
    assert spans.at(BudgetPeriod.TOTAL, at(2026, 1, 1)) is spans.at(BudgetPeriod.TOTAL, at(2030, 1, 1))
