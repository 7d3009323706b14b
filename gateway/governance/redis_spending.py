"""Each key's spend as one process knows it, so that an admission checks a budget without a round trip.

What Redis last reported of a key's spend in its period (every reply that reads or adds to it
says: admissions, settlements), plus what this process settled since and Redis has not answered
for yet. A budget that this says is spent is confirmed by Redis before a request is refused (the
admission goes to Redis): a refusal is always Redis' word. A report older than `FRESH_SECONDS`
is not trusted either: the admission goes to Redis, whose reply is the next report. So a budget
that looks unspent while other replicas spent it is overshot by what they spend before their
settlements reach Redis (within `settle_seconds`) and this process sees a reply (within
`FRESH_SECONDS`, however long it was idle: a busy process's own settlements bring a report every
`settle_seconds`).

Settlements add to one unsent item per key and period, however many requests settle before the
next call: one INCRBYFLOAT a call per key, not one a request.
"""

from __future__ import annotations

from typing import Final

from gateway.core.governance import Budget, LimitKind
from gateway.core.periods import Span
from gateway.governance.admission import GovernanceListener
from gateway.governance.local import LocalGovernor
from gateway.governance.redis_demands import Demand, spend_of
from gateway.governance.redis_script import Item, Outcome, Unsent

FRESH_SECONDS: Final = 0.25  # a spend reported longer ago than this is asked of Redis again


class Spending:
    """Spends reported and settled, by spend key (a key's and its period's); the Redis governor's listener too,
    telling `listener` (if any), and `fallback`: while Redis is unreachable, a key counts on from its last spend
    reported, not from $0 (a spent budget stays spent)."""

    def __init__(self, listener: GovernanceListener | None, *, fallback: LocalGovernor, owner: str) -> None:
        self._listener = listener
        self._fallback = fallback
        self._owner = owner  # the process id its items go under
        self.reported: dict[str, float] = {}  # spend key: USD, as Redis last said
        self.reported_at: dict[str, float] = {}  # spend key: when Redis said it (the governor's clock)
        self.pending: dict[str, float] = {}  # spend key: USD settled here, not yet in a reply
        self._unsent: dict[str, Unsent] = {}  # spend key: its item waiting for the next call

    def rate_limited(self, tenant: str, route: str, limit: LimitKind) -> None:
        if self._listener is not None:
            self._listener.rate_limited(tenant, route, limit)

    def budget_spent(self, tenant: str, *, spent_usd: float, budget_usd: float) -> None:
        self._fallback.seen_spent(tenant, spent_usd)
        if self._listener is not None:
            self._listener.budget_spent(tenant, spent_usd=spent_usd, budget_usd=budget_usd)

    def left(self, key: str, usd: float, *, now: float) -> bool:
        """Whether the spend `key` (reported, and settled here since) leaves some of `usd` at `now` (unknown, or
        reported over FRESH_SECONDS ago: it does not)."""
        reported = self.reported.get(key)
        return (
            reported is not None
            and now - self.reported_at[key] < FRESH_SECONDS
            and reported + self.pending.get(key, 0.0) < usd
        )

    def seen(self, tenant: str, key: str, spent_usd: float, *, now: float) -> None:
        """An admission's reply at `now`: `tenant` spent `spent_usd` so far (the spend `key`)."""
        self.reported[key], self.reported_at[key] = spent_usd, now
        self._fallback.seen_spent(tenant, spent_usd)

    def add(self, demand: Demand, cost_usd: float) -> list[Unsent]:
        """Charge `cost_usd` to the budget of `demand`'s key: a new item to queue, or none (added to the one waiting)."""
        assert demand.spend is not None
        if self._added(demand.spend[0], cost_usd):
            return []
        budget = demand.budget
        assert budget is not None
        return self._charge(demand.spend, cost_usd, budget=(demand.whose[0], budget.usd))

    def add_alone(self, tenant: str, budget: Budget, cost_usd: float, *, span: Span) -> list[Unsent]:
        """Charge `cost_usd` of a request admitted while Redis was away to `tenant`'s `budget` in its period `span`."""
        spend = spend_of(tenant, span)
        if self._added(spend[0], cost_usd):
            return []
        return self._charge(spend, cost_usd, budget=(tenant, budget.usd))

    def _added(self, key: str, cost_usd: float) -> bool:
        """Whether `cost_usd` was added to the charge of the spend `key` waiting for the next call (else there is none)."""
        unsent = self._unsent.get(key)
        if unsent is None:
            return False
        self.pending[key] = self.pending.get(key, 0.0) + cost_usd
        unsent.items[-1].amount += cost_usd
        return True

    def _charge(self, spend: tuple[str, float], cost_usd: float, *, budget: tuple[str, float]) -> list[Unsent]:
        """A new item charging `cost_usd` to `spend` (its key and expiry), the spend of `budget` (its tenant and USD)."""
        key, expiry = spend
        self.pending[key] = self.pending.get(key, 0.0) + cost_usd
        item = Item.spend(key, expiry, cost_usd)
        self._unsent[key] = unsent = Unsent(items=[item], owner=self._owner, charge=budget)
        return [unsent]

    def sending(self) -> None:
        """The items waiting are being sent (or dropped): a later settlement makes a new one."""
        self._unsent.clear()

    def told(self, settled: list[list[Unsent]], outcomes: list[Outcome], *, now: float) -> None:
        """The settlements' replies (`outcomes`, one per operation) at `now`: each key's spend reported, and told."""
        for settlements, outcome in zip(settled, outcomes, strict=True):
            at = 0
            for each in settlements:
                at += len(each.items)
                if each.charge is not None:
                    tenant, usd = each.charge
                    item, total = each.items[-1], float(outcome.values[at - 1][0])
                    self.pending[item.key] = max(0.0, self.pending.get(item.key, 0.0) - item.amount)
                    self.reported[item.key], self.reported_at[item.key] = total, now
                    self.budget_spent(tenant, spent_usd=total, budget_usd=usd)
