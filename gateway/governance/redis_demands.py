"""What one request asks of the Redis script (its items, in admission order) and what it gives back when it ends.

The order is the admission order of every governor: the key's budget, the key's concurrency,
requests and tokens, then the route's. An admission is read back from the script's outcome: the
refusing item's limit, or the quotas after the take and what was held (`Held`), which its
settlement undoes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.governance import Budget, LimitKind, Quota, RateLimits
from gateway.core.periods import Span, Spans
from gateway.governance.admission import GovernanceListener
from gateway.governance.redis_script import Call, Item, Op, Outcome, bucket_key, slots_key, spent_key

KEY, ROUTE = "key", "route"
SPEND_KEPT_SECONDS = 86_400  # a period's spend is kept a day past its end


@dataclass(slots=True)
class Check:
    """One item of an admission, with the limit it stands for and whose it is (KEY or ROUTE, and the name)."""

    item: Item
    kind: LimitKind
    subject: str
    name: str


@dataclass(slots=True)
class Held:
    """What an admission through Redis holds: tokens of buckets (key, capacity, taken), slots, and the budget to charge."""

    tenant: str
    process: str  # whose slots they are: the process id of the governor that admitted it
    buckets: tuple[tuple[str, int, int], ...]
    slots: tuple[str, ...]
    budget: Budget | None


def subject_checks(subject: str, name: str, limits: RateLimits, *, tokens: int) -> list[Check]:
    """The concurrency, requests and tokens checks of `subject` `name` under `limits`."""
    checks = []
    if limits.concurrent_requests is not None:
        item = Item.slots(slots_key(subject, name), limits.concurrent_requests, 1)
        checks.append(Check(item=item, kind=LimitKind.CONCURRENCY, subject=subject, name=name))
    if limits.requests_per_minute is not None:
        item = Item.bucket(bucket_key(subject, name, "requests"), limits.requests_per_minute, 1)
        checks.append(Check(item=item, kind=LimitKind.REQUESTS, subject=subject, name=name))
    if limits.tokens_per_minute is not None:
        wanted = min(tokens, limits.tokens_per_minute)
        item = Item.bucket(bucket_key(subject, name, "tokens"), limits.tokens_per_minute, wanted)
        checks.append(Check(item=item, kind=LimitKind.TOKENS, subject=subject, name=name))
    return checks


def admission_checks(
    tenant: str, limits: RateLimits, *, route: tuple[str, RateLimits], tokens: int, span: Span | None
) -> tuple[Check, ...]:
    """Every check of one request of `tenant` on `route` (its name and limits), in admission order."""
    checks = []
    if limits.budget is not None and span is not None:
        item = Item.spend(spent_key(tenant, span.id), limits.budget.usd)
        checks.append(Check(item=item, kind=LimitKind.BUDGET, subject=KEY, name=tenant))
    checks += subject_checks(KEY, tenant, limits, tokens=tokens)
    checks += subject_checks(ROUTE, route[0], route[1], tokens=tokens)
    return tuple(checks)


@dataclass(slots=True)
class Demand:
    """Every check of a tenant's requests on a route, made once for their limits and budget period (`made_for`).

    From request to request only the tokens taken change: `args` holds the admission's item
    arguments, the tokens' amounts filled in per request at `tokens_at` (position, capacity).
    """

    checks: tuple[Check, ...]
    args: list[str | int | float]
    tokens_at: tuple[tuple[int, int], ...]
    slots: tuple[str, ...]
    made_for: tuple[RateLimits, RateLimits, str | None]  # the key's limits, the route's, the budget period

    @classmethod
    def of(cls, checks: tuple[Check, ...], *, made_for: tuple[RateLimits, RateLimits, str | None]) -> Demand:
        args: list[str | int | float] = []
        tokens_at = []
        for check in checks:
            item = check.item
            if check.kind is LimitKind.TOKENS:
                tokens_at.append((len(args) + 3, int(item.limit)))
            args += (item.kind, item.key, item.limit, item.amount)
        slots = tuple(check.item.key for check in checks if check.kind is LimitKind.CONCURRENCY)
        return cls(checks=checks, args=args, tokens_at=tuple(tokens_at), slots=slots, made_for=made_for)

    def fits(self, limits: RateLimits, route: RateLimits, period: str | None) -> bool:
        """Whether it was made for these limits (the same objects: a reload or a PATCH makes new ones) and period."""
        key_limits, route_limits, made_period = self.made_for
        return key_limits is limits and route_limits is route and made_period == period

    def args_for(self, tokens: int) -> list[str | int | float]:
        """The admission's item arguments for a request needing `tokens` (each bucket takes at most its capacity)."""
        args = self.args.copy()
        for at, capacity in self.tokens_at:
            args[at] = tokens if tokens < capacity else capacity
        return args

    def held(self, tenant: str, *, tokens: int, budget: Budget | None, process: str) -> Held:
        """What a request needing `tokens` admitted by the process `process` holds until it is settled."""
        buckets = tuple(
            (str(self.args[at - 2]), capacity, tokens if tokens < capacity else capacity)
            for at, capacity in self.tokens_at
            if tokens > 0
        )
        return Held(tenant=tenant, process=process, buckets=buckets, slots=self.slots, budget=budget)


def quotas_of(
    checks: tuple[Check, ...], outcome: Outcome, *, key_only: bool = False
) -> tuple[Quota | None, Quota | None]:
    """The requests and tokens quotas the outcome shows: the key's, else the route's (`key_only`: the key's alone)."""
    requests = tokens = None
    for check, (remaining, reset_ms) in zip(checks, outcome.values, strict=True):
        kind = check.kind  # the key's checks come before the route's: the first of a kind wins
        if kind is LimitKind.REQUESTS and requests is None and not (key_only and check.subject != KEY):
            requests = Quota(limit=int(check.item.limit), remaining=remaining, reset_seconds=reset_ms / 1000)
        elif kind is LimitKind.TOKENS and tokens is None and not (key_only and check.subject != KEY):
            tokens = Quota(limit=int(check.item.limit), remaining=remaining, reset_seconds=reset_ms / 1000)
    return requests, tokens


def key_quotas(checks: tuple[Check, ...], outcome: Outcome) -> tuple[Quota | None, Quota | None]:
    """The key's own requests and tokens quotas (for a refusal's headers)."""
    return quotas_of(checks, outcome, key_only=True)


def refusal_quotas(checks: tuple[Check, ...], outcome: Outcome) -> tuple[Quota | None, Quota | None]:
    """A refusal's quotas: the key's own when the key (or its budget) refused it, else as refusals.route_refusal_quotas.

    Refused by the route: its quota for the limit that refused, and for the other the key's, else the route's.
    """
    assert outcome.refused is not None
    refusing = checks[outcome.refused]
    if refusing.subject == KEY:
        return key_quotas(checks, outcome)
    requests, tokens = quotas_of(checks, outcome)
    remaining, reset_ms = outcome.values[outcome.refused]
    quota = Quota(limit=int(refusing.item.limit), remaining=remaining, reset_seconds=reset_ms / 1000)
    if refusing.kind is LimitKind.REQUESTS:
        requests = quota
    elif refusing.kind is LimitKind.TOKENS:
        tokens = quota
    return requests, tokens


def settlement(held: Held, *, used: int | None, cost_usd: float, spans: tuple[Spans, float]) -> list[Item]:
    """The items that undo what `held` holds, give back unused tokens and charge `cost_usd` (a spend: the last item).

    `spans`: where the budget's period is found, and the moment (epoch seconds) it is charged at.
    """
    items = [Item.slots(key, 0, -1) for key in held.slots]
    if used is not None:
        items += [Item.bucket(key, capacity, taken - used) for key, capacity, taken in held.buckets]
    if held.budget is not None and cost_usd > 0:
        span = spans[0].at(held.budget.period, spans[1])
        expiry = 0 if span.ends_at is None else int(span.ends_at) + SPEND_KEPT_SECONDS
        items.append(Item.spend(spent_key(held.tenant, span.id), expiry, cost_usd))
    return items


def released(held: Held) -> list[Item]:
    """The items that undo an admission whose request never ran (its caller left): every slot and token back."""
    return [Item.slots(key, 0, -1) for key in held.slots] + [
        Item.bucket(key, capacity, taken) for key, capacity, taken in held.buckets
    ]


class Holding:
    """The slots this process holds in Redis, per slots key: its requests in flight admitted through Redis."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def took(self, held: Held) -> None:
        for key in held.slots:
            self.counts[key] = self.counts.get(key, 0) + 1

    def freed(self, held: Held) -> None:
        for key in held.slots:
            self.counts[key] = self.counts.get(key, 0) - 1

    def corrections(self) -> list[Item]:
        """An item setting each slots field of this process to what it holds (none: the field goes)."""
        return [Item.slots(key, 0, max(0, count)) for key, count in self.counts.items()]

    def forget_free(self) -> None:
        """Forget the keys it holds no slot of any more (once Redis has been told)."""
        self.counts = {key: count for key, count in self.counts.items() if count > 0}


@dataclass(slots=True)
class Unsent:
    """A settlement not yet sent: its items, the process whose slots they free, and for a spend (its last item)
    the key and budget it charges, to tell the listener."""

    items: list[Item]
    owner: str
    charge: tuple[str, float] | None = None


def settle_in(call: Call, unsent: list[Unsent]) -> list[list[Unsent]]:
    """Add `unsent` to `call`: one settlement per process whose slots they free; each operation's settlements."""
    by_owner: dict[str, list[Unsent]] = {}
    for each in unsent:
        by_owner.setdefault(each.owner, []).append(each)
    for owner, settlements in by_owner.items():
        call.add(Op.SETTLE, [item for each in settlements for item in each.items], owner=owner)
    return list(by_owner.values())


def tell_spends(listener: GovernanceListener | None, settled: list[list[Unsent]], outcomes: list[Outcome]) -> None:
    """Tell `listener` each key's spend, as the settlements' replies (`outcomes`, one per operation) have it."""
    if listener is None:
        return
    for settlements, outcome in zip(settled, outcomes, strict=True):
        at = 0
        for each in settlements:
            at += len(each.items)
            if each.charge is not None:
                tenant, usd = each.charge
                listener.budget_spent(tenant, spent_usd=float(outcome.values[at - 1][0]), budget_usd=usd)
