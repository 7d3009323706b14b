"""Breakers shared by every gateway process and host, kept in Redis.

Each process reads a mirror of every breaker on the request path (the local board's state) and
changes the shared state with one Lua script, on Redis' clock, whose reply refreshes the mirror:

- a healthy call costs no round trip: its success is counted locally and handed over when the
  route's mirror is next refreshed, in the background, at most once per `ttl` (1 s), one round
  trip for all of the route's targets (their keys share a hash tag);
- a failure, the success that ends a run of failures, a probe's outcome and a trial claim cost one
  round trip each, awaited, so the process acts on the shared verdict;
- when Redis cannot be reached no request fails: the mirrors act as local breakers, a warning is
  logged once, and Redis is tried again after `retry_seconds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gateway.core.breaker import CLOSED, OPEN, ORDINARY, PROBE, REFUSED, Admission
from gateway.core.routing import Outcome
from gateway.core.settings import BreakerStoreKind
from gateway.core.stores import RedisConnection
from gateway.core.tree import BreakerPolicy, Route, Target
from gateway.stores.redis import Patience, RedisClient, close_client, masked, open_client
from gateway.upstream.breakers.board import (
    BreakerListener,
    Guard,
    LocalBreakers,
    RouteGuards,
    TargetHealth,
    counts_as_failure,
    trial_lease,
)

log = logging.getLogger("gateway.breakers")

# KEYS: breakers (hashes). ARGV: op (sync|ok|fail|claim|release), probe (1/0), retry-after ms (-1:
# none), trial lease ms, trial token, then per key: failures, failure rate, min requests, window ms,
# cooldown ms, max cooldown ms, key ttl s, successes not yet counted. Per key it returns: trial
# granted, state (0 closed, 2 open), ms until the cooldown ends, ms until the trial's lease ends,
# failures in a row, trips in a row, calls and failures in the window. The same rules as
# gateway/breakers/state.py, on Redis' clock.
_EVENT: Final = """
local op, probe, retry, lease, token = ARGV[1], ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(x) return string.format('%d', math.floor(x)) end
local out = {}
for k = 1, #KEYS do
  local key, base = KEYS[k], 5 + (k - 1) * 8
  local limit, rate, least = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local width, cooldown, longest = tonumber(ARGV[base + 4]) / 10, tonumber(ARGV[base + 5]), tonumber(ARGV[base + 6])
  local ttl, pending = tonumber(ARGV[base + 7]), tonumber(ARGV[base + 8])
  local h = redis.call('HGETALL', key)
  local s = {}
  for i = 1, #h, 2 do s[h[i]] = h[i + 1] end
  local state, open_until = tonumber(s.state or '0'), tonumber(s.open_until or '0')
  local trial_until, fails, trips = tonumber(s.trial_until or '0'), tonumber(s.fails or '0'), tonumber(s.trips or '0')
  local slot, last = math.floor(now / width), tonumber(s.slot or '0')
  local calls, failed = {}, {}
  for i = 0, 9 do calls[i], failed[i] = tonumber(s['c' .. i] or '0'), tonumber(s['f' .. i] or '0') end
  if slot - last >= 10 or slot < last then
    for i = 0, 9 do calls[i], failed[i] = 0, 0 end
  else
    for i = last + 1, slot do calls[i % 10], failed[i % 10] = 0, 0 end
  end
  local here = slot % 10
  local function clear() for i = 0, 9 do calls[i], failed[i] = 0, 0 end end
  local function trip()
    local extended = 0
    if retry >= 0 then extended = math.min(retry, longest) end
    open_until = now + math.max(math.min(cooldown * 2 ^ math.min(trips, 64), longest), extended)
    state, trips, fails, trial_until = 2, trips + 1, 0, 0
  end
  local granted = 0
  if state == 0 then calls[here] = calls[here] + pending end
  if op == 'ok' then
    if state == 0 then
      fails, calls[here] = 0, calls[here] + 1
    elseif probe then
      state, trips, fails, trial_until = 0, 0, 0, 0
      clear()
    end
  elseif op == 'fail' then
    if state == 0 then
      fails, calls[here], failed[here] = fails + 1, calls[here] + 1, failed[here] + 1
      local c, f = 0, 0
      for i = 0, 9 do c, f = c + calls[i], f + failed[i] end
      if fails >= limit or (c >= least and f > rate * c) then trip() end
    else
      local tripped = false
      if probe then
        trial_until = 0
        if now >= open_until then trip(); tripped = true end
      end
      if not tripped and retry >= 0 then open_until = math.max(open_until, now + math.min(retry, longest)) end
    end
  elseif op == 'claim' then
    if state ~= 0 and now >= open_until and now >= trial_until then
      trial_until, granted = now + lease, 1
      redis.call('HSET', key, 'trial_by', token)
    end
  elseif op == 'release' then
    if s.trial_by == token then trial_until = 0 end
  end
  local fields = {'state', state, 'open_until', int(open_until), 'trial_until', int(trial_until),
                  'fails', fails, 'trips', trips, 'slot', int(slot)}
  local c, f = 0, 0
  for i = 0, 9 do
    table.insert(fields, 'c' .. i); table.insert(fields, calls[i])
    table.insert(fields, 'f' .. i); table.insert(fields, failed[i])
    c, f = c + calls[i], f + failed[i]
  end
  redis.call('HSET', key, unpack(fields))
  redis.call('EXPIRE', key, ttl)
  for _, v in ipairs({granted, state, open_until - now, trial_until - now, fails, trips, c, f}) do
    table.insert(out, math.floor(v))
  end
end
return out
"""
_FIELDS: Final = 8  # values per key in the script's reply


def route_tag(name: str) -> str:
    """The hash tag of a route's breaker keys: its name, or a digest of it where a '}' or nothing would cut the tag.

    Redis Cluster hashes only what lies between a key's first '{' and the next '}' (the whole key
    when that is empty), so every key of the route stays in one slot, and one script reaches them all.
    """
    if name and "}" not in name:
        return name
    return "sha1:" + hashlib.sha1(name.encode()).hexdigest()


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _policy_args(policy: BreakerPolicy) -> list[Any]:
    ttl = int(2 * (policy.window_seconds + policy.max_cooldown_seconds)) + 60  # an idle breaker's key expires
    return [
        policy.failures, repr(policy.failure_rate), policy.min_requests, _ms(policy.window_seconds),
        _ms(policy.cooldown_seconds), _ms(policy.max_cooldown_seconds), ttl,
    ]  # fmt: skip


class RedisBreakers(LocalBreakers):
    """One breaker per target for every process that shares the Redis of `connection` (a URL alone: one Redis there).

    A route's breakers share the hash tag `{route}`, so one script reads and writes them all on a
    Redis Cluster too.
    """

    kind = BreakerStoreKind.REDIS

    def __init__(
        self,
        routes: Mapping[str, Route],
        connection: RedisConnection | str,
        *,
        listener: BreakerListener | None = None,
        ttl: float = 1.0,
        retry_seconds: float = 5.0,
        timeout: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(routes, listener=listener, clock=clock)
        self._connection = RedisConnection(url=connection) if isinstance(connection, str) else connection
        self._ttl = ttl
        self.timeout = timeout  # the longest a call waits on Redis (breakers.timeoutSeconds)
        self._retry_seconds = retry_seconds
        self._down_until = 0.0
        self._down = False
        # A Redis that hangs or is gone costs a failing call at most `timeout`, then is left alone.
        self._client: RedisClient | None = None
        patience = Patience(socket_seconds=timeout, connect_seconds=timeout, retry=Retry(NoBackoff(), 0))
        try:
            self._client = open_client(self._connection, patience)
            self._script = self._client.register_script(_EVENT)
        except Exception as exc:  # settings the client refuses: breakers per process, for good
            self._down_until = math.inf
            self._down = True
            problem = masked(str(exc), self._connection)
            log.error("circuit breakers: the redis URL is refused (%s); each process decides alone", problem)
        self._tasks: set[asyncio.Task[None]] = set()
        for entry in self._routes.values():
            for guard in entry.guards:
                guard.key = f"gw:brk:{{{route_tag(entry.route.name)}}}:{guard.target.name}"

    def health(self, route: Route) -> LocalBreakers | None:
        entry = self._routes.get(route.name)
        if entry is None or entry.route is not route:
            return None
        now = self._clock()
        if now >= entry.fresh_until and entry.guards:
            entry.fresh_until = now + self._ttl
            if now >= self._down_until:
                self._spawn(self._refresh(entry))
        return self if entry.unsettled else None

    async def admit(self, target: Target) -> Admission:
        guard = self._guards.get(target)
        if guard is None or guard.breaker.state == CLOSED:
            return ORDINARY
        if self._clock() < self._down_until:
            return await super().admit(target)
        token = os.urandom(8).hex()
        try:
            values = await self._run("claim", [guard], lease=trial_lease(target), token=token)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._lost(exc)
            return await super().admit(target)
        if self._apply(guard, values):
            guard.token = token
            return PROBE
        return REFUSED if guard.breaker.state == OPEN else ORDINARY  # (the reply refreshed the state)

    def record(
        self, target: Target, outcome: Outcome, *, probe: bool = False, retry_after: float | None = None
    ) -> Awaitable[None] | None:
        guard = self._guards.get(target)
        if guard is None:
            return None
        breaker = guard.breaker
        failed = not outcome.ok and counts_as_failure(guard.codes, outcome)
        if not failed and breaker.state == CLOSED and not breaker.failures and not probe:  # nothing shared changes
            breaker.succeeded(self._clock())
            guard.pending += 1  # handed over with the next read of the route
            return None
        if self._clock() < self._down_until:
            self._record(guard, failed, probe=probe, retry_after=retry_after)
            return None
        return self._publish(guard, failed, probe=probe, retry_after=retry_after)

    def release(self, target: Target) -> None:
        super().release(target)
        guard = self._guards.get(target)
        if guard is not None and guard.token and self._clock() >= self._down_until:
            self._spawn(self._release(guard, guard.token))
        if guard is not None:
            guard.token = ""

    async def snapshot(self) -> dict[str, list[TargetHealth]]:
        for entry in self._routes.values():
            # checked for each route: once a read failed (a Redis that hangs), the rest are this process's view
            if entry.guards and self._clock() >= self._down_until:
                await self._refresh(entry)
        return self._snapshot()

    async def settled(self) -> None:
        """Wait for the reads and writes under way in the background."""
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def close(self) -> None:
        with contextlib.suppress(TimeoutError):  # a trial released at shutdown still reaches Redis, if it is quick
            async with asyncio.timeout(1.0):
                await self.settled()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await close_client(self._client)
        await super().close()

    def _window(self, guard: Guard, now: float) -> tuple[int, int]:
        return super()._window(guard, now) if self._down else (guard.calls, guard.failed)

    async def _publish(self, guard: Guard, failed: bool, *, probe: bool, retry_after: float | None) -> None:
        try:
            values = await self._run("fail" if failed else "ok", [guard], probe=probe, retry_after=retry_after)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._lost(exc)
            self._record(guard, failed, probe=probe, retry_after=retry_after)
            return
        self._apply(guard, values)
        if probe:
            guard.token = ""

    async def _refresh(self, entry: RouteGuards) -> None:
        try:
            values = await self._run("sync", entry.guards)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._lost(exc)
            return
        entry.fresh_until = self._clock() + self._ttl
        for index, guard in enumerate(entry.guards):
            self._apply(guard, values[index * _FIELDS : (index + 1) * _FIELDS])

    async def _release(self, guard: Guard, token: str) -> None:
        try:
            values = await self._run("release", [guard], token=token)
        except Exception as exc:  # whatever the client raised: Redis is unavailable
            self._lost(exc)  # the trial's lease will end it
            return
        self._apply(guard, values)

    async def _run(
        self, op: str, guards: list[Guard], *, probe: bool = False, retry_after: float | None = None,
        lease: float = 0.0, token: str = "",
    ) -> list[int]:  # fmt: skip
        args: list[Any] = [op, int(probe), -1 if retry_after is None else _ms(retry_after), _ms(lease), token]
        for guard in guards:
            args += [*_policy_args(guard.target.breaker), guard.pending]
            guard.pending = 0  # handed over (lost if the call fails: a few successes less in the window)
        reply = await self._script(keys=[guard.key for guard in guards], args=args)
        self._reached()
        return [int(value) for value in reply]

    def _apply(self, guard: Guard, values: list[int]) -> bool:
        """Copy the shared state into the mirror; True when the reply granted this process the trial."""
        granted, state, open_ms, trial_ms, failures, trips, calls, failed = values
        now, breaker = self._clock(), guard.breaker
        breaker.state = OPEN if state else CLOSED
        breaker.open_until = now + open_ms / 1000
        breaker.trial_until = now + trial_ms / 1000 if trial_ms > 0 else 0.0
        breaker.failures, breaker.trips = failures, trips
        guard.calls, guard.failed = calls, failed
        self._changed(guard)
        return bool(granted)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _lost(self, exc: BaseException) -> None:
        self._down_until = self._clock() + self._retry_seconds
        if not self._down:
            self._down = True
            problem = masked(str(exc), self._connection)
            log.warning("circuit breakers: redis unreachable (%s); each process decides alone until it is back", problem)

    def _reached(self) -> None:
        if self._down:
            self._down = False
            log.warning("circuit breakers: redis reachable again; breakers are shared again")
