"""How the Redis governor's calls go: its one script, each call carrying what waits for many requests at once.

Settlements (spend, leases given back) wait for the next call, or go on their own within
`settle_seconds` (freed slots at once); the admissions of one pass of the event loop that the
leases do not cover go in one call. While this process holds slots its liveness record is renewed
every second by a call sent then, with what waits (until a correction finds it holds none: an idle
process makes no call); when no other call of the process is in flight,
that call also sets its slots in Redis to what it holds (a correction), after its settlements and
before its admissions: a count gone wrong (a reply lost after its script ran, a failover that lost
the last writes) comes right within a second, or under steady load with the first call that has
none in flight beside it. A call that fails makes Redis unreachable for `retry_seconds`: the
governor (gateway.governance.redis) counts alone meanwhile.

While a reload's governor and the one it replaces share the process's leases (Holding), neither
corrects: the other's settlements, waiting or in flight, would be counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
from collections.abc import Awaitable, Callable
from typing import Any, Final

from gateway.core.stores import RedisConnection
from gateway.governance.local import LocalGovernor
from gateway.governance.redis_demands import Held, Waiting, settle_in
from gateway.governance.redis_leases import Holding
from gateway.governance.redis_script import Call, Item, ItemKind, Op, Outcome, Unsent
from gateway.governance.redis_spending import Spending
from gateway.stores.redis import masked

log = logging.getLogger("gateway.governance")

MOST_UNSENT: Final = 50_000  # settlements kept while Redis is away; the oldest go first past it


class ScriptCalls:
    """The calls of a Redis governor (its base class): what waits to be sent, what is in flight, whether Redis is down.

    The governor sets what the calls carry and go through: its process id, its leases (`holding`), its
    budgets' spend (`spending`), the governor counting alone while Redis is down (`fallback`), and the
    script (`_script`, on `_connection`).
    """

    process_id: str
    holding: Holding
    spending: Spending
    fallback: LocalGovernor
    _connection: RedisConnection
    _script: Callable[..., Awaitable[Any]]
    _clock: Callable[[], float]

    def __init__(self, *, live_seconds: float, idle_seconds: float, settle_seconds: float, retry_seconds: float) -> None:
        self._retry_seconds, self._live_ms = retry_seconds, max(1, round(live_seconds * 1000))
        self._renew_seconds = min(live_seconds / 3, idle_seconds)
        self._settle_seconds, self._idle_seconds = settle_seconds, idle_seconds
        self._calls = itertools.count()
        self._instance = os.urandom(4).hex()  # call ids stay unique when a successor takes the process id
        self._waiting: list[Waiting] = []
        self._unsent: list[Unsent] = []
        self._sending: asyncio.Handle | None = None
        self._sending_later = False  # whether `_sending` is the settlements' timer (uvloop's is no asyncio.TimerHandle)
        self._tasks: set[asyncio.Task[None]] = set()
        self._renewing: asyncio.Task[None] | None = None
        self.holds_slots = False  # a slot was taken since a correction last found none: liveness is renewed
        self._correct = False  # a renewal is due: the next call corrects this process's slots if it can
        self._correcting = False  # a correction of this process's slots is under way: no other call goes
        self._down, self._down_until = False, 0.0

    def _send_back(self, items: list[Item]) -> None:
        """Queue `items` of this process's leases (given back under a lowered limit, or idle) for the next call."""
        if items:
            self._queue([Unsent(items=items, owner=self.process_id)])

    def _give_back(self, items: list[Item], *, held: Held) -> None:
        """Queue `items` freeing what `held` took beyond what its leases keep: slots go at once (another replica's
        request may be refused for want of one), tokens with the next call or within `settle_seconds`."""
        if items:
            slots = any(item.kind is ItemKind.SLOTS for item in items)
            self._queue([Unsent(items=items, owner=held.demand.whose[1])], delay=0.0 if slots else None)

    def _call(self) -> Call:
        return Call(process=self.process_id, live_ms=self._live_ms, call_id=f"{self._instance}:{next(self._calls)}")

    def _queue(self, unsent: list[Unsent], *, delay: float | None = None) -> None:
        if not unsent:  # nothing new (a spend added to an item queued already, whose send is due)
            return
        self._unsent += unsent
        if len(self._unsent) > MOST_UNSENT:
            del self._unsent[: len(self._unsent) - MOST_UNSENT]
            self.spending.sending()  # a later spend makes a new item rather than add to one dropped
        self._send_soon(self._settle_seconds if delay is None else delay)

    def _send_soon(self, delay: float) -> None:
        """Send what waits at the end of this pass of the loop (admissions), or within `delay` (settlements alone)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # settled outside the loop: sent with the next call
            return
        if self._sending is not None and (delay or not self._sending_later):
            return  # a send is due no later than asked
        if self._sending is not None:  # an admission does not wait for the settlements' timer
            self._sending.cancel()
        self._sending_later = bool(delay)
        self._sending = loop.call_later(delay, self._send) if delay else loop.call_soon(self._send)

    def _send(self) -> None:
        self._sending = None
        if self._correcting:  # sent when it ends: a call overtaking it on another connection would be undone
            return
        waiting, self._waiting = self._waiting, []
        if self._clock() < self._down_until:
            for each in waiting:
                each.unanswered()
            if self._unsent and math.isfinite(self._down_until):
                self._send_soon(max(self._down_until - self._clock(), self._settle_seconds))
            return
        if waiting or self._unsent or self._correct:
            task = asyncio.get_running_loop().create_task(self._exchange(waiting))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take_unsent(self) -> list[Unsent]:
        unsent, self._unsent = self._unsent, []
        self.spending.sending()
        return unsent

    async def _exchange(self, waiting: list[Waiting]) -> None:
        """One call: the unsent settlements, a correction when one is due and can go, then each waiting admission;
        their outcomes handed to the admissions."""
        unsent = self._take_unsent()
        corrected = self._correct and self._may_correct()
        if corrected:  # with what a closed governor handed over: the leases count it already, as the rest
            unsent += self.holding.take_handed()
        call = self._call()
        settled = settle_in(call, unsent)
        slots_held = None  # by the correction, if one goes
        if corrected:  # after the settlements it carries, which the leases count already; before its admissions
            corrections = self.holding.corrections()
            call.add(Op.CORRECT, corrections)
            self._correct, self._correcting = False, True
            slots_held = any(item.amount for item in corrections)
        for each in waiting:
            call.add_arguments(Op.ADMIT, each.asked.args)
        try:
            reply = await self._script(keys=call.keys, args=call.args)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._unsent[:0] = unsent  # sent when Redis is back, first
            for each in waiting:  # first: what their leases covered is not in flight when the fallback counts it
                each.unanswered()
            self._lost(exc)
            self._send_soon(self._settle_seconds)
            return
        finally:
            if corrected:  # what waited meanwhile goes now
                self._correcting = False
                if self._waiting or self._unsent:
                    self._send_soon(0.0)
        self._reached()
        if slots_held is False and not self.holding.holds_slots():  # none in Redis now: no renewal until one is taken
            self.holds_slots = False
        outcomes, now = [Outcome.read(answer) for answer in reply], self._clock()
        self.spending.told(settled, outcomes[: len(settled)], now=now)
        for each, outcome in zip(waiting, outcomes[len(settled) + corrected :], strict=True):
            self._give_back(each.answered(outcome, now), held=each.held)  # taken for a caller that left: back

    def _may_correct(self) -> bool:
        """Whether a call about to go may correct this process's slots: no other call of it is in flight (Redis
        might run it after the correction, which counts it already), and no other governor shares its leases
        (nor is this one closing: it is no holder then, and its successor may have calls in flight)."""
        return len(self._tasks) <= 1 and self.holding.holders == {self._instance}

    async def _send_unsent(self, *, retire: bool) -> None:
        unsent = self._take_unsent()
        call = self._call()
        settled = settle_in(call, unsent)
        if retire:
            call.add(Op.RETIRE, [])
        if call.operations:
            try:
                reply = await self._script(keys=call.keys, args=call.args)
            except BaseException:  # failed or cut short: kept, for `close` to hand over
                self._unsent[:0] = unsent
                raise
            outcomes = [Outcome.read(answer) for answer in reply[: len(settled)]]
            self.spending.told(settled, outcomes, now=self._clock())

    def keep_alive(self) -> None:
        """Renew this process's liveness record every second from now on (outside a running loop: from the next slot)."""
        self._tend(slots=True)

    def _tend(self, *, slots: bool) -> None:
        """Give back idle leases from now on, and (`slots`: it leased some) renew the liveness record."""
        self.holds_slots = self.holds_slots or slots
        if self._renewing is None and self._instance in self.holding.holders:  # not once closed
            with contextlib.suppress(RuntimeError):  # no running loop
                self._renewing = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        """Give back idle leases, send what a closed governor handed over, and (it holds slots) renew liveness and
        correct the slots with a call sent at once (see _exchange)."""
        while True:
            await asyncio.sleep(self._renew_seconds)
            if self._clock() < self._down_until:
                continue
            self._send_back(self.holding.idle(self._clock(), seconds=self._idle_seconds))
            self._queue(self.holding.take_handed())
            if self.holds_slots or self.holding.holds_slots():  # its own, or leased by a governor it replaced
                self._correct = True
                self._send_soon(0.0)

    def _lost(self, exc: BaseException) -> None:
        self._down_until = self._clock() + self._retry_seconds
        self._tend(slots=True)  # renewals try Redis again; once back, their corrections count what the fallback let in
        if not self._down:
            self._down = True
            self.holding.lend(self.fallback.ledger)  # its requests in flight count in the fallback too
            problem = masked(str(exc), self._connection)
            log.warning("limits: redis unreachable (%s); each process counts alone until it is back", problem)

    def _reached(self) -> None:
        if self._down:
            self._down = False
            self.holding.reclaim()
            log.warning("limits: redis reachable again; limits are shared again")
