"""The Redis governor's one Lua script, the keys it names and how a batch of admissions and settlements is written to it.

Every key carries the hash tag {gateway-limits}: one slot, so one script call reads and writes a
key's and a route's state at once, on a Redis Cluster too. One call carries a batch of
operations, run in order: settlements (give back tokens, free slots, add spend), admissions
(check every limit, then take from all or none) and peeks (GET /v1/gateway/usage). Buckets run
on Redis' clock (TIME), so replicas with skewed clocks agree; the arithmetic is core.buckets'.

An admission may also lease (redis_leases): an item of kind BUCKET_LEASED or SLOTS_LEASED takes
what the request needs, all or nothing with the other items, and then a top-up from what is
left: min(limit / 10, (what is left after the request) / 4), rounded down. A tenth of the limit
is six seconds of a bucket's refill: one round trip serves a tenth of a minute's requests, and a
process holds back at most that from the others; a quarter of what is left makes leases shrink
as a limit runs out (several replicas asking in turn leave three quarters each time), and under
ten, or with fewer than four left, the top-up is 0: each request its own round trip, exact as
without leases. Items the process's lease covers are sent only to be read (BUCKET_COVERED) or
not at all (SLOTS_COVERED), keeping their place in the reply.

Concurrency slots are counted per process: a field per process id in a key's slots hash (the
slots it leased: its requests in flight and the ones it holds ready), read only while that
process's liveness record (`live:<id>`, renewed by each of its calls and every second while it
holds slots) exists; a dead process's fields are dropped by the next reader. With a renewal that
no other call of it overlaps (redis_calls), a process also sets its fields to the slots it knows it
holds, so a count that went wrong (a reply lost after the script ran, a Redis restarted empty) is
right again within a second.

A call is safe to run twice (a client may send it again after losing the reply): its reply is
kept under the process's `reply` key with the call's sequence id, and a second run returns it.
A settlement of spend is applied once however it is sent again: it names the call it was first
sent in (a call whose reply never came, Redis stalled past the client's timeout, may still run),
and the first run of either records that name in the process's `settled` set (for five minutes,
the last 10,000 at most: ~1.2 MB); a later one only reads what it would have changed. Other
settlements are not named: a slot freed twice is set right by the process's next correction
(within a second), tokens given back twice refill a bucket a little early.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

PREFIX: Final = "gw:lim:{gateway-limits}:"

# KEYS: 1 the process's liveness record, 2 its last reply, 3 the settlements it applied. The keys
# the items name are in ARGV: they share the hash tag of these, so they are in the slot the call
# was sent to.
# ARGV: process id, liveness ms, call id, liveness key prefix, then operations: a code (A admit,
# S settle, P peek, C correct a process's slots to the amounts given, X retire), an item count,
# the process whose slots a settlement frees, the call a settlement was first sent in (else
# empty), and per item its kind (ItemKind), key, limit (capacity; slots; USD; for a settled spend
# the expiry, 0: none) and amount.
# Per operation it returns: the first refusing item (0: none), ms until it would not refuse,
# then per item three values: a bucket's whole level and ms until full, slots in use, or spend
# as text; then the top-up leased (0 but for a leasing item of an admission that took).
SCRIPT: Final = """
-- the spends settled are remembered five minutes (a late run of a call long lost), the last 10,000 at most
local SETTLED_MS, SETTLED_MOST = 300000, 10000
local pid, live_ms, call, live = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local last = redis.call('HMGET', KEYS[2], 'call', 'reply')
if last[1] == call then return cjson.decode(last[2]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function level(key, cap)
  local v = redis.call('HMGET', key, 'l', 'at')
  if not v[1] then return cap end
  return math.min(cap, tonumber(v[1]) + math.max(0, now - tonumber(v[2])) * cap / 60000)
end
local function keep(key, cap, l)
  redis.call('HSET', key, 'l', string.format('%.17g', l), 'at', string.format('%d', now))
  local full = 0
  if cap > 0 then full = math.ceil((cap - l) * 60000 / cap) end
  redis.call('PEXPIRE', key, string.format('%d', full + 1000))
end
local function in_use(key)
  local h, n = redis.call('HGETALL', key), 0
  for i = 1, #h, 2 do
    if h[i] == pid or redis.call('EXISTS', live .. h[i]) == 1 then n = n + tonumber(h[i + 1])
    else redis.call('HDEL', key, h[i]) end
  end
  return n
end
local function spent(key) return tonumber(redis.call('GET', key) or '0') end
local out, i, retired, settled = {}, 5, false, false
while i <= #ARGV do
  local op, m, owner, first = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  local items, seen, failed, wait = {}, {}, 0, 0
  for j = 1, m do
    local b = i + 4 + (j - 1) * 4
    items[j] = {ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])}
  end
  i = i + 4 + m * 4
  if op == 'X' then retired = true end
  if op == 'C' then
    for j, it in ipairs(items) do
      if it[4] > 0 then redis.call('HSET', it[2], owner, string.format('%d', it[4]))
      else redis.call('HDEL', it[2], owner) end
      seen[j] = {it[4], 0, 0}
    end
  elseif op == 'S' then
    local again = first ~= '' and redis.call('ZSCORE', KEYS[3], first)
    for j, it in ipairs(items) do
      local kind, key, lim, amount = it[1], it[2], it[3], it[4]
      if again then
        if kind == 'q' then seen[j] = {math.floor(level(key, lim)), 0, 0}
        elseif kind == 's' then seen[j] = {0, 0, 0}
        else seen[j] = {string.format('%.17g', spent(key)), 0, 0} end
      elseif kind == 'q' then
        local l = math.min(lim, level(key, lim) + amount)
        keep(key, lim, l)
        seen[j] = {math.floor(l), 0, 0}
      elseif kind == 's' then
        if redis.call('HINCRBY', key, owner, amount) <= 0 then redis.call('HDEL', key, owner) end
        seen[j] = {0, 0, 0}
      else
        local total = redis.call('INCRBYFLOAT', key, string.format('%.17g', amount))
        if lim > 0 then redis.call('EXPIREAT', key, string.format('%d', lim)) end
        seen[j] = {total, 0, 0}
      end
    end
    if first ~= '' and not again then redis.call('ZADD', KEYS[3], now, first); settled = true end
  else
    local values = {}
    for j, it in ipairs(items) do
      local kind, key, lim, amount = it[1], it[2], it[3], it[4]
      local v
      if kind == 'q' or kind == 'Q' or kind == 'c' then
        v = level(key, lim)
        if kind ~= 'c' and failed == 0 and v < amount then
          failed, wait = j, math.ceil((amount - v) * 60000 / math.max(lim, 1))
        end
      elseif kind == 's' or kind == 'S' then
        v = in_use(key)
        if failed == 0 and v + amount > lim then failed = j end
      elseif kind == 'h' then v = 0
      else
        v = spent(key)
        if failed == 0 and v >= lim then failed = j end
      end
      values[j] = v
    end
    for j, it in ipairs(items) do
      local kind, key, lim, amount, v = it[1], it[2], it[3], it[4], values[j]
      local more = 0
      if op == 'A' and failed == 0 then
        if kind == 'Q' or kind == 'S' then
          local left = v - amount
          if kind == 'S' then left = lim - v - amount end
          more = math.max(0, math.min(math.floor(lim / 10), math.floor(left / 4)))
        end
        if kind == 'q' or kind == 'Q' then v = v - amount - more; keep(key, lim, v)
        elseif kind == 's' or kind == 'S' then redis.call('HINCRBY', key, pid, amount + more); v = v + amount + more end
      end
      if kind == 'q' or kind == 'Q' or kind == 'c' then
        seen[j] = {math.floor(v), lim > 0 and math.ceil((lim - v) * 60000 / lim) or 0, more}
      elseif kind == 'b' then seen[j] = {string.format('%.17g', v), 0, 0}
      else seen[j] = {v, 0, more} end
    end
  end
  local reply = {failed, wait}
  for j = 1, m do
    reply[#reply + 1] = seen[j][1]; reply[#reply + 1] = seen[j][2]; reply[#reply + 1] = seen[j][3]
  end
  out[#out + 1] = reply
end
if settled then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - SETTLED_MS)
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -SETTLED_MOST - 1)
  redis.call('PEXPIRE', KEYS[3], SETTLED_MS)
end
if retired then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], '1', 'PX', live_ms) end
redis.call('HSET', KEYS[2], 'call', call, 'reply', cjson.encode(out))
redis.call('PEXPIRE', KEYS[2], 60000)
return out
"""


class ItemKind(StrEnum):
    """What an item of an operation counts: a token bucket, concurrency slots, or a budget's spend; how an admission takes it."""

    BUCKET = "q"
    SLOTS = "s"
    SPEND = "b"
    BUCKET_LEASED = "Q"  # taken, and a top-up leased to the process
    SLOTS_LEASED = "S"  # taken, and a top-up leased to the process
    BUCKET_COVERED = "c"  # covered by the process's lease: only read
    SLOTS_COVERED = "h"  # covered by the process's lease: neither read nor taken


class Op(StrEnum):
    """What an operation of a call does with its items."""

    ADMIT = "A"  # check every item, take from all or none
    SETTLE = "S"  # give back tokens, free slots, add spend
    PEEK = "P"  # read, take nothing
    RETIRE = "X"  # this process's liveness record is dropped: its slots free at once
    CORRECT = "C"  # this process's slots set to what it holds (a lost reply or a restarted Redis undone)


@dataclass(slots=True)
class Item:
    """One limit an operation reads or changes: its kind, its key, its limit and the amount."""

    kind: ItemKind
    key: str
    limit: float
    amount: float = 0

    @classmethod
    def bucket(cls, key: str, capacity: float, amount: float) -> Item:
        """A token bucket of `capacity`: `amount` taken (admission) or given back (settlement)."""
        return cls(kind=ItemKind.BUCKET, key=key, limit=capacity, amount=amount)

    @classmethod
    def slots(cls, key: str, limit: float, amount: float) -> Item:
        """Slots under `limit`: one taken (admission), `amount` freed (settlement: -1)."""
        return cls(kind=ItemKind.SLOTS, key=key, limit=limit, amount=amount)

    @classmethod
    def spend(cls, key: str, limit: float, amount: float = 0) -> Item:
        """Spend: checked against `limit` USD (admission), or `amount` added and kept until `limit` (settlement)."""
        return cls(kind=ItemKind.SPEND, key=key, limit=limit, amount=amount)


@dataclass(slots=True)
class Unsent:
    """A settlement not yet sent: its items, the process whose slots they free, and for a spend (its last item)
    the key and budget it charges, to tell the listener."""

    items: list[Item]
    owner: str
    charge: tuple[str, float] | None = None
    first_call: str = ""  # a spend's: the call it was first sent in (set by redis_demands.settle_in), named again


def bucket_key(subject: str, name: str, what: str) -> str:
    """The key of `subject` ("key" or "route") `name`'s `what` ("requests" or "tokens") bucket."""
    return f"{PREFIX}bucket:{subject}:{name}:{what}"


def slots_key(subject: str, name: str) -> str:
    """The hash of `subject` `name`'s requests in flight, a field per process."""
    return f"{PREFIX}slots:{subject}:{name}"


def spent_key(tenant: str, period: str) -> str:
    """The USD `tenant` spent in the budget period `period` (an id of core.periods)."""
    return f"{PREFIX}spent:{tenant}:{period}"


def live_key(process: str) -> str:
    return f"{PREFIX}live:{process}"


def reply_key(process: str) -> str:
    return f"{PREFIX}reply:{process}"


def settled_key(process: str) -> str:
    return f"{PREFIX}settled:{process}"


@dataclass(slots=True)
class Call:
    """One script call being written: its three keys and its arguments."""

    process: str
    live_ms: int
    call_id: str
    keys: list[str] = field(default_factory=list)
    args: list[str | int | float] = field(default_factory=list)
    operations: int = 0

    def __post_init__(self) -> None:
        self.keys += [live_key(self.process), reply_key(self.process), settled_key(self.process)]
        self.args += [self.process, self.live_ms, self.call_id, live_key("")]

    def add(self, op: Op, items: Sequence[Item], *, owner: str = "", first_call: str = "") -> int:
        """Append an operation (a settlement frees slots of the process `owner`, this one's by default, and is
        applied once with every other naming `first_call`, the call it was first sent in); its place in the reply."""
        args: list[str | int | float] = []
        for item in items:
            args += (item.kind, item.key, item.limit, item.amount)
        return self.add_arguments(op, args, owner=owner, first_call=first_call)

    def add_arguments(self, op: Op, items: list[str | int | float], *, owner: str = "", first_call: str = "") -> int:
        """Append an operation of items already written as arguments (four each); its place in the reply."""
        self.args += (op, len(items) // 4, owner or self.process, first_call)
        self.args += items
        self.operations += 1
        return self.operations - 1


@dataclass(slots=True)
class Outcome:
    """What the script answered for one operation: the first refusing item (None: none), its wait, each item's
    values, and the top-up each item leased."""

    refused: int | None
    wait_seconds: float
    values: tuple[tuple[Any, int], ...]
    granted: tuple[int, ...] = ()

    @classmethod
    def read(cls, reply: Sequence[Any]) -> Outcome:
        failed = reply[0]
        return cls(
            refused=failed - 1 if failed else None, wait_seconds=reply[1] / 1000,
            values=tuple(zip(reply[2::3], reply[3::3], strict=True)), granted=tuple(reply[4::3]),
        )  # fmt: skip
