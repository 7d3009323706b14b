"""Which budget period a moment falls in, and when it ends: UTC calendar days, ISO weeks (from Monday) and months.

Spend is counted per period id, so a new period starts from nothing without anything being reset.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gateway.core.governance import BudgetPeriod


@dataclass(frozen=True, slots=True)
class Span:
    """One period: its id (stable for every moment in it) and its end in epoch seconds (None: it never ends)."""

    id: str
    ends_at: float | None


def budget_span(period: BudgetPeriod, now: float) -> Span:
    """The period of kind `period` that `now` (epoch seconds) falls in."""
    moment = datetime.fromtimestamp(now, UTC)
    day = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    match period:
        case BudgetPeriod.DAY:
            return Span(id=f"day:{day.date().isoformat()}", ends_at=(day + timedelta(days=1)).timestamp())
        case BudgetPeriod.WEEK:
            monday = day - timedelta(days=day.weekday())
            return Span(id=f"week:{monday.date().isoformat()}", ends_at=(monday + timedelta(days=7)).timestamp())
        case BudgetPeriod.MONTH:
            first = day.replace(day=1)
            following = datetime(first.year + first.month // 12, first.month % 12 + 1, 1, tzinfo=UTC)
            return Span(id=f"month:{first.strftime('%Y-%m')}", ends_at=following.timestamp())
        case BudgetPeriod.TOTAL:
            return Span(id="total", ends_at=None)


class Spans:
    """The span of each period kind at a moment, worked out again only once the last one found has ended.

    Every limited request with a budget asks, at admission and at settlement; the calendar
    arithmetic runs about once a period instead.
    """

    def __init__(self) -> None:
        self._found: dict[BudgetPeriod, tuple[float, Span]] = {}  # the moment a span was found at, and the span

    def at(self, period: BudgetPeriod, now: float) -> Span:
        """The span of kind `period` that `now` (epoch seconds) falls in."""
        found = self._found.get(period)
        if found is not None:
            since, span = found
            if since <= now and (span.ends_at is None or now < span.ends_at):
                return span
        span = budget_span(period, now)
        self._found[period] = (now, span)
        return span
