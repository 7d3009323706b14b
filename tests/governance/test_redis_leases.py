"""Leases in one process, without Redis: what they show, cover, keep, give back, and put back when Redis refused."""

from __future__ import annotations

import pytest

from gateway.core.governance import Quota
from gateway.governance.redis_leases import BucketLease, Holding, SlotsLease, ask
from gateway.governance.redis_script import Item, ItemKind, Outcome, bucket_key, slots_key

TOKENS = bucket_key("key", "a", "tokens")
SLOTS = slots_key("key", "a")


def test_a_bucket_lease_shows_the_level_redis_reported_refilled_since_plus_what_it_holds() -> None:
    lease = BucketLease(TOKENS, 600)  # refills 10 a second
    lease.reported(100, 50.0)
    lease.left = 40
    assert lease.quota(50.0) == Quota(limit=600, remaining=140, reset_seconds=46.0)
    assert lease.quota(52.5).remaining == 165
    assert lease.quota(500.0) == Quota(limit=600, remaining=600, reset_seconds=0.0)  # never over the limit
    lease.left = -30  # a debt: shown as taken
    assert lease.quota(50.0).remaining == 70


def test_a_settlement_keeps_a_tenth_of_the_limit_in_the_lease_and_gives_back_the_rest() -> None:
    lease = BucketLease(TOKENS, 1000)
    lease.left = 30
    assert lease.settle(50) == []  # 80: under a tenth
    assert lease.settle(70) == [Item.bucket(TOKENS, 1000, 50)]
    assert lease.left == 100
    assert lease.settle(-160) == [] and lease.left == -60  # more used than reserved: a debt, kept until charged
    slots = SlotsLease(SLOTS, 20)
    slots.leased, slots.in_flight = 5, 5
    assert slots.free() == [] and slots.free() == []  # two free: a tenth of 20
    assert slots.free() == [Item.slots(SLOTS, 0, -1)]
    assert (slots.leased, slots.in_flight) == (4, 2)


def test_leases_unused_for_the_idle_time_are_given_back_and_used_ones_kept() -> None:
    holding = Holding()
    idle, used = holding.bucket(TOKENS, 1000), holding.bucket(bucket_key("route", "r", "tokens"), 1000)
    idle.left, used.left = 70, 30
    idle.used_at, used.used_at = 10.0, 10.8
    slots = holding.slot(SLOTS, 20)
    slots.leased, slots.in_flight, slots.used_at = 3, 1, 10.0
    assert holding.idle(11.0, seconds=1.0) == [Item.bucket(TOKENS, 1000, 70), Item.slots(SLOTS, 0, -2)]
    assert (idle.left, used.left, slots.leased) == (0, 30, 1)
    assert holding.corrections() == [Item.slots(SLOTS, 0, 1)]  # its field: the slot in flight
    assert holding.idle(11.0, seconds=1.0) == []  # nothing more to give


def test_everything_is_given_back_at_the_end_and_later_settlements_go_to_redis() -> None:
    holding = Holding()
    tokens = holding.bucket(TOKENS, 1000)
    tokens.left = 70
    slots = holding.slot(SLOTS, 20)
    slots.leased, slots.in_flight = 3, 1
    assert holding.give_all_back() == [Item.bucket(TOKENS, 1000, 70), Item.slots(SLOTS, 0, -2)]
    assert tokens.settle(5) == [Item.bucket(TOKENS, 1000, 5)]  # a request that ends after: straight to Redis
    assert slots.free() == []  # its process retired: its slots free with its liveness record


def test_an_admission_asks_what_the_leases_do_not_cover_and_one_top_up_at_a_time() -> None:
    holding = Holding()
    tokens, slots = holding.bucket(TOKENS, 1000), holding.slot(SLOTS, 20)
    tokens.left, slots.leased = 30, 1
    items = [(Item.slots(SLOTS, 20, 1), slots), (Item.bucket(TOKENS, 1000, 100), tokens)]
    first = ask(items, 5.0)
    assert first.args == [ItemKind.SLOTS_COVERED, SLOTS, 20, 0, ItemKind.BUCKET_LEASED, TOKENS, 1000, 70]
    assert (slots.in_flight, tokens.left, tokens.asking) == (1, 0, True)
    second = ask(items, 5.0)  # the slot's lease is used up, the top-up of the tokens is under way
    assert second.args == [ItemKind.SLOTS_LEASED, SLOTS, 20, 1, ItemKind.BUCKET, TOKENS, 1000, 100]
    second.answered(Outcome(refused=None, wait_seconds=0, values=((4, 0), (830, 0)), granted=(3, 0)), 6.0)
    assert (slots.leased, slots.in_flight) == (5, 2)  # its field: 1 + 1 + 3
    first.answered(Outcome(refused=1, wait_seconds=1, values=((0, 0), (20, 0)), granted=(0, 0)), 6.0)
    assert (slots.in_flight, tokens.left, tokens.asking, tokens.seen) == (1, 30, False, 20)  # what it covered, back


def test_an_admission_left_unanswered_puts_back_what_its_leases_covered() -> None:
    holding = Holding()
    tokens = holding.bucket(TOKENS, 1000)
    tokens.left = -20
    asked = ask([(Item.bucket(TOKENS, 1000, 10), tokens)], 5.0)
    assert asked.debts == [Item.bucket(TOKENS, 1000, -20)]  # charged first, whatever the answer
    tokens.left = 4  # a settlement meanwhile
    asked.unanswered()
    assert (tokens.left, tokens.asking) == (4, False)


def test_a_lowered_limit_is_kept_at_once_by_what_the_leases_hold() -> None:
    holding = Holding()
    tokens, slots = holding.bucket(TOKENS, 1000), holding.slot(SLOTS, 100)
    tokens.left = 100
    slots.leased, slots.in_flight = 11, 4
    assert holding.bucket(TOKENS, 200) is tokens and tokens.left == 0  # dropped: Redis' bucket alone is the limit
    assert holding.take_resized() == []  # given back, it would refill a bucket other replicas drained meanwhile
    tokens.left = -30
    assert holding.bucket(TOKENS, 100) is tokens and tokens.left == -30  # a debt stays owed
    tokens.left = 10
    assert holding.bucket(TOKENS, 400) is tokens and (tokens.capacity, tokens.left) == (400, 10)  # raised: kept
    assert holding.slot(SLOTS, 5) is slots and holding.take_resized() == [Item.slots(SLOTS, 0, -7)]  # unused: back
    assert (slots.leased, slots.in_flight, slots.has_room()) == (4, 4, False)
    assert slots.free() == [Item.slots(SLOTS, 0, -1)]  # it keeps none unused until Redis grants it slots again
    asked = ask([(Item.slots(SLOTS, 100, 1), slots)], 5.0)  # asked under the old limit, answered after the change
    asked.answered(Outcome(refused=None, wait_seconds=0, values=((5, 0),), granted=(2,)), 6.0)
    assert (slots.leased, slots.in_flight, slots.has_room()) == (6, 4, False)  # granted under 100: covers nothing
    asked = ask([(Item.slots(SLOTS, 5, 1), slots)], 7.0)
    asked.answered(Outcome(refused=None, wait_seconds=0, values=((5, 0),), granted=(0,)), 8.0)
    assert (slots.leased, slots.in_flight, slots.has_room()) == (7, 5, True)
    assert holding.slot(SLOTS, 8) is slots and holding.take_resized() == [] and slots.has_room()  # raised: kept


def test_a_lease_far_from_its_limit_shows_the_same_quota_again_and_a_new_one_once_it_changed() -> None:
    lease = BucketLease(TOKENS, 600)
    lease.reported(600, 0.0)
    lease.left = 60
    first = lease.quota(0.0)
    assert lease.quota(1.0) is first  # full, then full again: the same figures, the same (frozen) quota
    lease.reported(500, 1.0)
    second = lease.quota(1.0)
    assert second is not first and second == Quota(limit=600, remaining=560, reset_seconds=4.0)
    lease.resize(700)  # a higher limit at the same level: another quota
    assert lease.quota(1.0) == Quota(limit=700, remaining=560, reset_seconds=pytest.approx(140 / (700 / 60)))
