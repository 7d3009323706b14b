"""What the server asks of governance for one request, and what it gets back.

`Governor.admit` runs once per model request, after its route is resolved and before memory or an
upstream is touched: it refuses a route the key may not use (403 route_not_allowed) or a limit
that is reached (429, RateLimitedError), and otherwise takes what the request needs of every limit
that applies to it (the key's and the route's): on Redis most admissions are taken from what the
process leased and need no round trip, the others one, shared by admissions arriving together
(a request refused while a neighbour's lease grew may try once more). `Governor.settle`
runs once when the request ended, whatever its outcome: it gives back a concurrency slot,
reconciles the reserved tokens with the upstream's usage and adds the spend to the key's budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gateway.core.governance import KeyPolicy, LimitKind, Quota
from gateway.core.tree import Route

__all__ = ["Admission", "GovernanceListener", "Governor", "Quota", "Unlimited"]


@dataclass(slots=True, eq=False)
class Admission:
    """A request let through: what it took, settled once when it ends.

    `requests` and `tokens` are the key's own limits after this request (None: not limited), what
    the answer's x-ratelimit-* headers show. `handle` is the governor's own record of what it took.
    """

    tenant: str
    route: str
    reserved_tokens: int
    requests: Quota | None = None
    tokens: Quota | None = None
    handle: Any = None
    settled: bool = False


class GovernanceListener(Protocol):
    """What governance tells metrics: refusals, and a key's spend against its budget."""

    def rate_limited(self, tenant: str, route: str, limit: LimitKind) -> None: ...

    def budget_spent(self, tenant: str, *, spent_usd: float, budget_usd: float) -> None: ...


class Governor(Protocol):
    """Admits requests against routes, limits and budgets; one per configuration (a reload builds another)."""

    def policy(self, tenant: str) -> KeyPolicy:
        """What `tenant` may do: its configured or stored key's policy, else the defaults."""
        ...

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        """Take one request of `tenant` on `route` needing `tokens` (prompt estimate + max tokens).

        None when nothing limits it (no store call is made then). Raises PermissionDeniedError
        (route_not_allowed) or RateLimitedError, with retry-after and the x-ratelimit-* headers.
        """
        ...

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        """`admission`'s request ended: `tokens` it really used (None: unknown, the reservation stands), `cost_usd` spent.

        Never awaits and never fails: a store call it needs is made in the background.
        """
        ...

    async def usage(self, tenant: str) -> dict[str, Any]:
        """`tenant`'s limits and what is left of each, for GET /v1/gateway/usage."""
        ...

    async def close(self) -> None:
        """Let go of the store (its pending settlements are sent first, within a short deadline)."""
        ...


class Unlimited:
    """The governor when nothing is limited and no key is restricted: admits everything, stores nothing."""

    def policy(self, tenant: str) -> KeyPolicy:
        return KeyPolicy(name=tenant)

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        return None

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        return None

    async def usage(self, tenant: str) -> dict[str, Any]:
        return {"object": "gateway.usage", "key": tenant, "limits": {}}

    async def close(self) -> None:
        return None
