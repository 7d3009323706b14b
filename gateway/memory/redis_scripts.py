"""The Redis store's Lua scripts and what their replies mean: a memory turn is two of them.

`TAKE` locks the conversation and reads its window in one round trip, `APPEND` writes the turn
and lets the lock go in another. Every key a script names is one conversation's (one hash tag,
so one Cluster slot); a replica's liveness record lives elsewhere and is read apart (see
`redis_locks`).

A conversation's version is the id of the last write to it (meta field `write`, random per
write): a process that cached the conversation at a version reads no rows while it is still
the version stored. A delete drops it and an undo or a redo replaces it, so a version never comes back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, Protocol

from redis.typing import EncodableT, KeyT


class Taken(IntEnum):
    """What `TAKE` replied, its first element."""

    HELD = 0  # another holder has the lock: [HELD, its value]
    NONE = 1  # locked (or read); no conversation is stored
    SAME = 2  # locked (or read); the conversation is at [SAME, version]: no rows were asked for, or the cache holds them
    READ = 3  # locked (or read): [READ, version, system, updated_at, total, rows...] (the newest rows)
    MOVED_ON = 4  # another holder wrote since this hold let the lock go: nothing taken


# KEYS: lock, meta, msgs. ARGV: this holder's lock value ('' = read without locking), lease (ms),
# a dead holder's value to replace ('' = none), the version cached ('' = none), rows to read
# (0 = none), the version the conversation must still be at ('' = any).
TAKE: Final = """
if ARGV[1] ~= '' then
  local holder = redis.call('GET', KEYS[1])
  if holder and holder ~= ARGV[1] and holder ~= ARGV[3] then
    return {0, holder}
  end
end
local meta = redis.call('HMGET', KEYS[2], 'write', 'system', 'updated_at')
local version = meta[1] or ''
if ARGV[6] ~= '' and version ~= ARGV[6] then
  return {4}
end
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if not (meta[1] or meta[2] or meta[3]) then
  return {1}
end
local rows = tonumber(ARGV[5])
if rows == 0 or (ARGV[4] ~= '' and version == ARGV[4]) then
  return {2, version}
end
local reply = {3, version, meta[2] or '[]', meta[3] or '', redis.call('LLEN', KEYS[3])}
for _, row in ipairs(redis.call('LRANGE', KEYS[3], -rows, -1)) do
  reply[#reply + 1] = row
end
return reply
"""

# KEYS: msgs, meta, lock. ARGV: lock value ('' = unlocked write), cap, ttl, system ('' = keep),
# write id, '1' to let the lock go with the write, entries... The write id makes a retried call
# (the reply was lost, not the write) a no-op: [0]. Else [1, the version before, updated_at].
# Each entry (dump_entry's JSON object) is stored with its time added as "c" (load_entry reads
# it), and a turn empties the conversation's redo stack (meta field `redo`, see redis_history).
APPEND: Final = """
local before = redis.call('HGET', KEYS[2], 'write')
if before == ARGV[5] then
  return {0}
end
if ARGV[1] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return redis.error_reply('LOCKLOST the conversation lock is no longer held by this request')
end
local now = redis.call('TIME')
local updated = now[1] .. '.' .. string.format('%06d', tonumber(now[2]))
redis.call('HSET', KEYS[2], 'write', ARGV[5], 'updated_at', updated)
if #ARGV > 6 then
  local stamp = ',"c":' .. updated .. '}'
  for i = 7, #ARGV do
    ARGV[i] = string.sub(ARGV[i], 1, -2) .. stamp
  end
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 7))
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
  redis.call('HDEL', KEYS[2], 'redo')
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], 'system', ARGV[4])
else
  redis.call('HSETNX', KEYS[2], 'system', '[]')
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[6] == '1' then
  redis.call('DEL', KEYS[3])
end
return {1, before or '', updated}
"""

# KEYS: lock. ARGV: the holder's value. Deletes the lock only while it is this holder's.
RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: lock. ARGV: the holder's value, lease (ms). Extends the lease only while it is this holder's.
RENEW: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class Script(Protocol):
    """A registered script: redis-py's (`AsyncScript`) or the lean client's (`stores.lean_redis.LeanScript`)."""

    def __call__(self, keys: Sequence[KeyT] | None = ..., args: Iterable[EncodableT] | None = ...) -> Awaitable[Any]: ...


@dataclass(frozen=True, slots=True)
class Scripts:
    """The store's scripts, each registered by `register` (each call: EVALSHA, loaded again if Redis lost it).

    Every one is safe to run twice, as a client's retry after a lost reply may: TAKE sets the
    lock to the holder's own value, APPEND's write id makes a second run a no-op, RELEASE and
    RENEW act only while the lock is the holder's.
    """

    take: Script
    append: Script
    release: Script
    renew: Script

    @classmethod
    def of(cls, register: Callable[[str], Script]) -> Scripts:
        return cls(take=register(TAKE), append=register(APPEND), release=register(RELEASE), renew=register(RENEW))
