"""What the memory API does to conversations in Redis, off the turn path: read one whole, undo, redo, list.

A conversation is `{prefix}:meta` (a hash: system, updated_at, write, redo) and `{prefix}:msgs`
(a list of rows, each `dump_entry`'s JSON with "c", when the row was written, added by the
append script). Callers hold the conversation's lock, so a read and the write after it do not
interleave with a turn; each write is one MULTI/EXEC of the conversation's keys (one hash slot).

The redo stack is the meta field `redo`: a JSON list of the turns undone, each the list of its
rows as they were stored (their times kept), the last undone last. The append script deletes
the field with every turn, in the same script: a new turn empties the stack at no cost of its
own.

Listing walks the keyspace (SCAN, on every primary of a Cluster) for the tenant's `:meta` keys.
A per-tenant index could not be written by the append script on a Cluster: its key would be in
another hash slot than the conversation's, so it would cost a turn a round trip of its own, and
would outlive conversations Redis expires. A page's cost grows with the keyspace instead; it
keeps only the page's ids meanwhile.
"""

from __future__ import annotations

from typing import Final

import orjson

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import last_turn_start, load_entry
from gateway.core.memory.listing import Listed, Listing, Page, count_turns
from gateway.memory.store import Key
from gateway.stores.redis import RedisClient

_SCAN_BATCH: Final = 1_000  # keys SCAN is asked for at a time, and ids held before the page's are picked from them


def key_prefix(key: Key) -> str:
    """The keys of one conversation start with this; its hash tag puts them in one Cluster slot.

    A tenant (a key's name in the config) has no ':' and no braces, a memoryId no braces: the tag
    names one (tenant, memoryId) alone, and a tenant's tags all start with `{tenant:`.
    """
    tenant, memory_id = key
    return f"gw:mem:{{{tenant}:{memory_id}}}"


async def load(client: RedisClient, key: Key) -> Conversation | None:
    """The whole conversation, each entry with the time its row was written (None for rows older gateways wrote)."""
    prefix = key_prefix(key)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hmget(f"{prefix}:meta", "system", "updated_at")
        pipe.lrange(f"{prefix}:msgs", 0, -1)
        (system, updated_at), rows = await pipe.execute()
    if system is None and updated_at is None:
        return None
    # read here too: a conversation stored unreadable (no time, a system that is no JSON) is a store fault (503), not a 500
    return Conversation(orjson.loads(system or b"[]"), [load_entry(row) for row in rows], float(updated_at))


async def undo(client: RedisClient, key: Key, *, version: bytes) -> bool:
    """Move the last turn from the conversation onto its redo stack; False when it has no messages.

    `version`: the conversation's new version (see redis_scripts).
    """
    prefix = key_prefix(key)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hget(f"{prefix}:meta", "redo")
        pipe.lrange(f"{prefix}:msgs", 0, -1)
        stacked, rows = await pipe.execute()
    if not rows:
        return False
    start = last_turn_start([load_entry(row) for row in rows])
    stack = _stack(stacked)
    stack.append([row.decode() for row in rows[start:]])
    now = await redis_now(client)
    async with client.pipeline(transaction=True) as pipe:
        if start == 0:
            pipe.delete(f"{prefix}:msgs")
        else:
            pipe.ltrim(f"{prefix}:msgs", 0, start - 1)
        pipe.hset(f"{prefix}:meta", mapping={"updated_at": now, "write": version, "redo": orjson.dumps(stack)})
        await pipe.execute()
    return True


async def redo(client: RedisClient, key: Key, *, version: bytes, cap: int, ttl: int) -> bool:
    """Append the turn the last undo removed, its rows as they were stored; False when the redo stack is empty.

    The conversation keeps its newest `cap` messages and lives `ttl` seconds from now, as after a turn.
    """
    prefix = key_prefix(key)
    meta, msgs = f"{prefix}:meta", f"{prefix}:msgs"
    stack = _stack(await client.hget(meta, "redo"))
    if not stack:
        return False
    rows = stack.pop()
    now = await redis_now(client)
    async with client.pipeline(transaction=True) as pipe:
        pipe.rpush(msgs, *rows)
        pipe.ltrim(msgs, -cap, -1)
        pipe.hset(meta, mapping={"updated_at": now, "write": version})
        if stack:
            pipe.hset(meta, "redo", orjson.dumps(stack))
        else:
            pipe.hdel(meta, "redo")
        pipe.expire(msgs, ttl)
        pipe.expire(meta, ttl)
        await pipe.execute()
    return True


async def page(client: RedisClient, tenant: str, listing: Listing) -> Page:
    """A page of `tenant`'s conversations: its ids found by SCAN, then each one read (one that expired meanwhile is left out)."""
    head = f"gw:mem:{{{tenant}:"
    tail = "}:meta"
    # The prefix has only a memoryId's characters (the API checks it), none of them special to MATCH.
    scanned = client.scan_iter(match=f"{head}{listing.prefix}*{tail}", count=_SCAN_BATCH)
    ids: list[str] = []
    batch: list[str] = []
    async for name in scanned:
        batch.append(name.decode()[len(head) : -len(tail)])
        if len(batch) >= _SCAN_BATCH:
            ids, batch = listing.first_ids([*ids, *batch]), []
    found: list[Listed] = []
    for memory_id in listing.first_ids([*ids, *batch]):
        conversation = await load(client, (tenant, memory_id))
        if conversation is not None:
            found.append(Listed(memory_id, count_turns(conversation.messages), conversation.updated_at))
    return Page.of(found, listing)


def _stack(stacked: bytes | str | None) -> list[list[str]]:
    return [] if stacked is None else list(orjson.loads(stacked))


async def redis_now(client: RedisClient) -> float:
    """Redis's clock, which the append script stamps turns by."""
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6
