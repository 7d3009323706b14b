"""The limits script and how a call is written: keys named once, every key in one slot, a call safe to run twice."""

from __future__ import annotations

import redis.asyncio as aioredis

from gateway.governance.redis_demands import settle_in
from gateway.governance.redis_script import (
    SCRIPT,
    Call,
    Item,
    ItemKind,
    Op,
    Outcome,
    Unsent,
    bucket_key,
    live_key,
    reply_key,
    settled_key,
    slots_key,
    spent_key,
)


async def run(client: aioredis.Redis, call: Call) -> list[Outcome]:
    """`call` through redis-py; each operation's outcome."""
    reply = await client.register_script(SCRIPT)(keys=call.keys, args=call.args)
    return [Outcome.read(answer) for answer in reply]


def test_every_key_carries_the_hash_tag() -> None:
    for key in (bucket_key("key", "a}{b", "tokens"), slots_key("route", "r"), spent_key("a", "day:2026-11-29"),
                live_key("p"), reply_key("p"), settled_key("p")):
        assert key.startswith("gw:lim:{gateway-limits}:")


def test_a_call_names_its_three_keys_and_the_items_in_its_arguments() -> None:
    call = Call("p1", 3000, "c1")
    bucket = Item.bucket(bucket_key("key", "a", "requests"), 60, 1)
    assert call.add(Op.SETTLE, [bucket], owner="p0", first_call="c0") == 0
    assert call.add(Op.ADMIT, [bucket, Item.slots(slots_key("key", "a"), 2, 1)]) == 1
    assert call.keys == [live_key("p1"), reply_key("p1"), settled_key("p1")]
    assert call.args == [
        "p1", 3000, "c1", live_key(""),
        "S", 1, "p0", "c0", "q", bucket.key, 60, 1,
        "A", 2, "p1", "", "q", bucket.key, 60, 1, "s", slots_key("key", "a"), 2, 1,
    ]  # fmt: skip


def test_an_outcome_reads_the_refusing_item_the_values_and_the_top_ups() -> None:
    assert Outcome.read([0, 0, 4, 12000, 3, 1, 0, 0]) == Outcome(refused=None, wait_seconds=0.0,
                                                                values=((4, 12000), (1, 0)), granted=(3, 0))
    assert Outcome.read([2, 1500, 4, 0, 0, 0, 60000, 0]).refused == 1


async def test_a_call_run_twice_takes_once_and_answers_the_same(client: aioredis.Redis) -> None:
    bucket = Item.bucket(bucket_key("key", "a", "requests"), 60, 1)
    first = Call("p", 3000, "c1")
    first.add(Op.ADMIT, [bucket])
    outcomes = await run(client, first)
    assert outcomes[0].values[0][0] == 59
    assert await run(client, first) == outcomes  # a retry after a lost reply
    second = Call("p", 3000, "c2")
    second.add(Op.ADMIT, [bucket])
    assert (await run(client, second))[0].values[0][0] == 58


async def test_a_settlement_sent_again_in_another_call_is_applied_once(client: aioredis.Redis) -> None:
    """A call whose reply never came (Redis stalled past the client's timeout) may have run: its settlements,
    sent again under a new call naming the first, add nothing twice, whichever of the two runs first."""
    spend, tokens = Item.spend(spent_key("a", "total"), 0, 0.25), Item.bucket(bucket_key("key", "a", "tokens"), 600, -100)
    lost, again, other = Call("p", 3000, "c1"), Call("p", 3000, "c2"), Call("p", 3000, "c3")
    lost.add(Op.SETTLE, [spend, tokens], first_call="c1")
    again.add(Op.SETTLE, [spend, tokens], first_call="c1")  # the lost call's settlement
    again.add(Op.SETTLE, [Item.spend(spent_key("a", "total"), 0, 0.5)], first_call="c2")  # and a new one
    await run(client, lost)
    outcomes = await run(client, again)
    assert [float(outcomes[0].values[0][0]), float(outcomes[1].values[0][0])] == [0.25, 0.75]
    assert outcomes[0].values[1][0] == 500  # read, not taken again
    other.add(Op.SETTLE, [spend], first_call="c3")
    await run(client, other)
    await run(client, lost)  # run last (a retry of its own id replays its reply): nothing again
    assert float(await client.get(spent_key("a", "total"))) == 1.0
    assert 0 < await client.pttl(settled_key("p")) <= 300_000


async def test_the_spends_settled_are_remembered_ten_thousand_at_most(client: aioredis.Redis) -> None:
    script = client.register_script(SCRIPT)
    async with client.pipeline(transaction=False) as pipe:
        for n in range(10_005):
            call = Call("p", 3000, f"c{n}")
            call.add(Op.SETTLE, [Item.spend(spent_key("a", "total"), 0, 0.0)], first_call=f"c{n}")
            await script(keys=call.keys, args=call.args, client=pipe)
        await pipe.execute()
    assert await client.zcard(settled_key("p")) == 10_000
    assert await client.zscore(settled_key("p"), "c10004")  # the oldest go (by time, then by name)


def test_only_a_spend_settled_names_the_call_it_was_first_sent_in() -> None:
    """A slot freed twice is corrected within a second and tokens given back twice only refill early: a spend
    added twice would stand for the period."""
    call = Call("p", 3000, "c1")
    slot, spend = Item.slots(slots_key("key", "a"), 0, -1), Item.spend(spent_key("a", "total"), 0, 0.25)
    settled = settle_in(call, [Unsent(items=[slot], owner="p"), Unsent(items=[spend], owner="p", charge=("a", 1.0))])
    assert [each.first_call for batch in settled for each in batch] == ["", "c1"]
    assert call.args[4:8] == ["S", 1, "p", ""] and call.args[12:16] == ["S", 1, "p", "c1"]


async def test_a_settled_spend_expires_after_its_period_and_a_total_one_never(client: aioredis.Redis) -> None:
    call = Call("p", 3000, "c")
    call.add(Op.SETTLE, [Item.spend(spent_key("a", "day:x"), 4_000_000_000, 0.25),
                         Item.spend(spent_key("a", "total"), 0, 0.5)])
    assert [float(spent) for spent, _ in (await run(client, call))[0].values] == [0.25, 0.5]
    assert await client.expiretime(spent_key("a", "day:x")) == 4_000_000_000
    assert await client.ttl(spent_key("a", "total")) == -1


async def test_a_bucket_of_no_capacity_is_no_error(client: aioredis.Redis) -> None:
    call = Call("p", 3000, "c")
    call.add(Op.ADMIT, [Item.bucket(bucket_key("key", "z", "tokens"), 0, 0)])
    call.add(Op.SETTLE, [Item.bucket(bucket_key("key", "z", "tokens"), 0, 5)])
    assert [outcome.refused for outcome in await run(client, call)] == [None, None]


async def test_a_leasing_item_tops_up_a_tenth_of_the_limit_or_a_quarter_of_what_is_left(client: aioredis.Redis) -> None:
    tokens = bucket_key("key", "a", "tokens")
    call = Call("p", 3000, "c")
    for need in (100, 700, 80, 70):  # one script: one moment, no refill between them
        call.add(Op.ADMIT, [Item(ItemKind.BUCKET_LEASED, tokens, 1000, need)])
    outcomes = await run(client, call)
    # 1000 - 100 leaves 900: a tenth (100) leased; 800 - 700 leaves 100: a quarter (25); 75 cannot give 80;
    # 75 - 70 leaves 5: 1
    assert [(outcome.refused, outcome.granted[0], outcome.values[0][0]) for outcome in outcomes] == [
        (None, 100, 800), (None, 25, 75), (0, 0, 75), (None, 1, 4),
    ]  # fmt: skip


async def test_slots_lease_with_a_request_and_a_covered_item_is_only_read(client: aioredis.Redis) -> None:
    slots, requests = slots_key("key", "a"), bucket_key("key", "a", "requests")
    call = Call("p", 3000, "c")
    call.add(Op.ADMIT, [Item(ItemKind.SLOTS_LEASED, slots, 40, 1), Item(ItemKind.BUCKET_COVERED, requests, 60, 0)])
    call.add(Op.ADMIT, [Item(ItemKind.SLOTS_COVERED, slots, 40, 0), Item(ItemKind.BUCKET_LEASED, requests, 60, 61)])
    first, second = await run(client, call)
    assert (first.refused, first.granted, first.values[0][0]) == (None, (4, 0), 5)  # 1 + min(4, 39 // 4)
    assert first.values[1][0] == 60  # read, not taken
    assert second.refused == 1 and await client.hget(slots, "p") == b"5"  # all or nothing: the slot stays as it was
