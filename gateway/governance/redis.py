"""Limits shared by every process and replica through Redis: one script call checks and takes, for many requests at once.

Most admissions make no round trip: they are taken from what this process leased of each limit
(redis_leases), the budget checked against the spend Redis last reported plus what this process
settled since. The others (and a budget that looks spent, or was reported too long ago: redis_spending)
go to Redis and take a new lease, those of one pass of the event loop in one call (redis_script's
SCRIPT, through stores.redis.open_lean's client, or redis-py on a Cluster); how those calls go, with
the settlements, the liveness record and the corrections, is redis_calls' (the governor's base class).

When Redis cannot be reached no request fails: this process counts alone (a LocalGovernor with the
same limits), one warning is logged, and Redis is tried again after `retry_seconds`; settlements of
requests admitted through Redis wait, sent when it is back (by a reload's successor, if need be).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.core.governance import UNLIMITED, KeyPolicy, LimitKind, RateLimits
from gateway.core.stores import RedisConnection
from gateway.core.tree import Route
from gateway.governance.admission import Admission, GovernanceListener
from gateway.governance.local import Ledger, LocalGovernor, Taken
from gateway.governance.policies import Policies, check_route
from gateway.governance.redis_calls import ScriptCalls
from gateway.governance.redis_demands import (
    Demand,
    Held,
    Waiting,
    admission_checks,
    peeked,
    refusal_quotas,
)
from gateway.governance.redis_leases import IDLE_SECONDS, Holding
from gateway.governance.redis_script import SCRIPT, Op, Outcome, Unsent
from gateway.governance.redis_spending import Spending
from gateway.governance.refusals import budget_spent
from gateway.governance.usage import usage_report
from gateway.stores.lean_redis import LeanRedis
from gateway.stores.redis import Patience, RedisClient, close_client, masked, open_client, open_lean

log = logging.getLogger("gateway.governance")


class RedisGovernor(ScriptCalls):
    """Admits requests against limits counted in the Redis of `connection`, shared by every process that uses it."""

    def __init__(
        self,
        policies: Policies,
        connection: RedisConnection,
        *,
        listener: GovernanceListener | None = None,
        process_id: str | None = None,
        ledger: Ledger | None = None,
        holding: Holding | None = None,
        timeout: float = 2.0,
        retry_seconds: float = 3.0,
        live_seconds: float = 3.0,
        settle_seconds: float = 0.05,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            live_seconds=live_seconds, idle_seconds=idle_seconds, settle_seconds=settle_seconds, retry_seconds=retry_seconds
        )
        self.policies = policies
        self.process_id = process_id or os.urandom(8).hex()  # this process's slots and liveness record
        self.fallback = LocalGovernor(policies, listener=listener, ledger=ledger, clock=clock, wall=wall)
        self._connection = connection
        self._listener = self.spending = Spending(listener, fallback=self.fallback, owner=self.process_id)
        self._clock, self._wall = clock, wall
        self._demands: dict[tuple[str, str], Demand] = {}  # by tenant and route
        self.holding = holding if holding is not None else Holding()  # leases, shared with a successor taking the id
        self.holding.holders.add(self._instance)
        self._client: RedisClient | None = None
        self._lean: LeanRedis | None = None
        patience = Patience(socket_seconds=timeout, connect_seconds=timeout, retry=Retry(NoBackoff(), 0))
        try:
            self._client = open_client(connection, patience)
            self._lean = open_lean(connection, self._client, patience)
            self._script = (self._lean or self._client).register_script(SCRIPT)
        except Exception as exc:  # settings the client refuses: limits per process, for good
            self._down, self._down_until = True, math.inf
            log.error("limits: the redis URL is refused (%s); each process counts alone", masked(str(exc), connection))
        if holding is not None:  # a predecessor's leases: given back when idle from now on (or from its first call)
            self._tend(slots=False)

    def policy(self, tenant: str) -> KeyPolicy:
        return self.policies.policy(tenant)

    async def admit(self, tenant: str, route: Route, *, tokens: int) -> Admission | None:
        policy = self.policies.policy(tenant)
        demand = self._demands.get((tenant, route.name))
        if demand is None or not demand.fits(policy, route.limits, self._wall()):  # else its route check and limits stand
            check_route(policy, route)
            limits = self.policies.limits(policy)
            if not limits.any and not route.limits.any:
                return None
            demand = self._demand(tenant, route, policy=policy, limits=limits)
        now = self._clock()
        if now < self._down_until:
            return self.fallback.take(tenant, route, tokens=tokens)
        budget, spend = demand.budget, demand.spend  # a budget that looks spent is Redis' to refuse
        budget_left = budget is None or (spend is not None and self.spending.left(spend[0], budget.usd, now=now))
        if budget_left and demand.take(tokens, now):
            requests, taken = demand.quotas(now)
            return Admission(tenant, route.name, tokens, requests=requests, tokens=taken, handle=demand.held(tokens))
        return await self._ask(tenant, route, demand=demand, tokens=tokens, again=True)

    async def _ask(self, tenant: str, route: Route, *, demand: Demand, tokens: int, again: bool) -> Admission | None:
        """Admit through Redis what the leases do not cover; refused where a lease grew meanwhile, try `again` once."""
        held = demand.held(tokens)
        asked = demand.ask(tokens, self._clock())
        if asked.debts:  # charged first, in the same call
            self._unsent.append(Unsent(items=asked.debts, owner=self.process_id))
        waiting = Waiting(asked=asked, held=held, outcome=asyncio.get_running_loop().create_future())
        self._waiting.append(waiting)
        self._send_soon(0.0)
        try:
            return await self._answered(waiting, route, tenant=tenant, again=again)
        except BaseException:  # cancelled (its client left) or failed once Redis took what it needs: given back
            self._give_back(waiting.left(), held=held)
            raise

    async def _answered(self, waiting: Waiting, route: Route, *, tenant: str, again: bool) -> Admission | None:
        """The admission Redis' answer to `waiting` makes: counted locally without one, else admitted or refused."""
        outcome = await waiting.outcome
        held = waiting.held
        demand, tokens, budget = held.demand, held.tokens, held.demand.budget
        if outcome is None:
            return self.fallback.take(tenant, route, tokens=tokens)
        now, checks = self._clock(), demand.checks
        if budget is not None and demand.spend is not None:
            self.spending.seen(tenant, demand.spend[0], float(outcome.values[0][0]), now=now)
        if outcome.refused is None:
            self._tend(slots=bool(demand.slots))
            return held.admission(route.name, now)
        lease = demand.leases[outcome.refused]
        if again and lease is not None and lease.has_room():
            if demand.take(tokens, now):  # another admission of this call leased what this one needs
                return held.admission(route.name, now)
            return await self._ask(tenant, route, demand=demand, tokens=tokens, again=False)
        check = checks[outcome.refused]
        self._listener.rate_limited(tenant, route.name, check.kind)
        quotas = refusal_quotas(checks, demand.leases, refused=outcome.refused, now=now)
        if budget is not None and check.kind is LimitKind.BUDGET:
            wall = self._wall()
            raise budget_spent(tenant, budget, span=self.fallback.spans.at(budget.period, wall), now=wall, quotas=quotas)
        raise check.refusal(outcome.wait_seconds, quotas=quotas)

    def settle(self, admission: Admission, *, tokens: int | None, cost_usd: float) -> None:
        held = admission.handle
        if admission.settled:
            return
        if isinstance(held, Taken):  # admitted while Redis was away: counted here, and its spend sent when it is back
            self.fallback.settle(admission, tokens=tokens, cost_usd=cost_usd)
            if (budget := held.terms.budget) is not None and cost_usd > 0:
                span = self.fallback.spans.at(budget.period, self._wall())
                self._queue(self.spending.add_alone(admission.tenant, budget, cost_usd, span=span))
            return
        if not isinstance(held, Held):
            return
        admission.settled = True
        back = held.settle(tokens)
        demand = held.demand
        if demand.spend is not None and cost_usd > 0:
            self._queue(self.spending.add(demand, cost_usd))
        self._give_back(back, held=held)  # more than a lease keeps, or its leases were given back for good (closed)

    async def usage(self, tenant: str) -> dict[str, Any]:
        limits = self.policies.limits(self.policies.policy(tenant))
        if self._clock() < self._down_until:
            return await self.fallback.usage(tenant)
        budget = limits.budget
        span = self.fallback.spans.at(budget.period, self._wall()) if budget is not None else None
        checks = admission_checks(tenant, limits, route=("", UNLIMITED), tokens=0, span=span)
        call = self._call()
        call.add(Op.PEEK, [check.item for check in checks])
        try:
            reply = await self._script(keys=call.keys, args=call.args)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._lost(exc)
            return await self.fallback.usage(tenant)
        self._reached()
        quotas, in_use, spent = peeked(checks, Outcome.read(reply[0]), holding=self.holding, now=self._clock())
        self._send_back(self.holding.take_resized())
        return usage_report(tenant, limits, quotas=quotas, in_use=in_use, spent_usd=spent, span=span)

    async def close(self) -> None:
        """Stop; the last governor sharing its leases (a reload's successor and the one it replaces: Holding) gives
        them back and retires the process id; one not last hands it the settlements it could not send."""
        self.holding.holders.discard(self._instance)
        last = not self.holding.holders
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        while self._tasks:  # calls under way end first (and those they let go): their settlements unsent or sent
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for waiting in self._waiting:
            waiting.unanswered()
        self._waiting.clear()
        if self._sending is not None:
            self._sending.cancel()
        if last:  # what it leased goes back; its requests still in flight settle to Redis
            self._unsent.append(Unsent(items=self.holding.give_all_back(), owner=self.process_id))
        if self._client is not None and self._clock() >= self._down_until:
            with contextlib.suppress(Exception):  # a last call, if it is quick: the rest expires on its own
                async with asyncio.timeout(1.0):
                    await self._send_unsent(retire=last and (self.holds_slots or bool(self.holding.slots)))
        if self._unsent and not last:  # not sent (Redis away): the governor sharing its leases sends them
            self.holding.handed += self._unsent
        if self._lean is not None:
            await self._lean.close()
        if self._client is not None:
            await close_client(self._client)

    def _demand(self, tenant: str, route: Route, *, policy: KeyPolicy, limits: RateLimits) -> Demand:
        """The checks of `tenant`'s requests on `route` under `policy`'s `limits`, made anew when the policy, the
        route's limits or the budget period changed."""
        budget = limits.budget
        span = self.fallback.spans.at(budget.period, self._wall()) if budget is not None else None
        checks = admission_checks(tenant, limits, route=(route.name, route.limits), tokens=0, span=span)
        made_for, whose = (policy, route.limits), (tenant, self.process_id)
        demand = Demand.of(checks, holding=self.holding, made_for=made_for, whose=whose, span=span, budget=budget)
        self._demands[(tenant, route.name)] = demand
        self._send_back(self.holding.take_resized())
        if self._down:  # Redis is away: the fallback counts this key's leases' requests too, as the others'
            self.holding.lend(self.fallback.ledger)
        return demand














