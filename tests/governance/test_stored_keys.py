"""Stored keys: the snapshot a process starts with (none), new keys, and how a store keeps a key."""

from __future__ import annotations

import base64
import hashlib

import pytest
from pydantic import ValidationError

from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.governance.stored_keys import (
    StoredKey,
    StoredKeys,
    UnreadableKey,
    decode_key,
    digest_of,
    encode_key,
    limits_json,
    limits_of,
    listing_of,
    new_key,
    snapshot_of,
)
from tests.support.key_stores import UNREADABLE, stored_key


def test_a_process_starts_knowing_no_stored_key() -> None:
    known = StoredKeys()
    assert not known.by_digest and not known.by_name and known.generation == 0
    assert not known.awaiting_store  # no store: a key it lacks is no key (the key refresher says otherwise)


def test_a_stored_key_never_shows_its_digest() -> None:
    assert "sha256" not in repr(StoredKey(name="team-b", sha256=b"\x01" * 32))


def test_a_new_key_is_gk_and_32_random_bytes_and_is_kept_as_its_sha256() -> None:
    key, other = new_key(), new_key()
    assert key.startswith("gk-") and len(base64.urlsafe_b64decode(key[3:] + "=")) == 32 and key != other
    assert digest_of(key) == hashlib.sha256(key.encode()).digest()


def test_a_key_reads_back_as_it_was_written() -> None:
    limits = RateLimits(requests_per_minute=60, concurrent_requests=2, budget=Budget(usd=5, period=BudgetPeriod.WEEK))
    key = StoredKey(name="team-b", sha256=b"\x02" * 32, routes=frozenset({"b", "a"}), limits=limits, created_at=17)
    assert decode_key("team-b", encode_key(key)) == key
    bare = StoredKey(name="team-c", sha256=b"\x03" * 32)
    assert decode_key("team-c", encode_key(bare)) == bare


def test_limits_are_written_as_the_config_writes_them() -> None:
    limits = RateLimits(tokens_per_minute=1000, budget=Budget(usd=1.5))
    assert limits_json(limits) == {"tokensPerMinute": 1000, "budget": {"usd": 1.5, "period": "month"}}
    assert limits_of(limits_json(limits)) == limits


def test_a_snapshot_has_maps_of_its_own() -> None:
    key = StoredKey(name="team-b", sha256=b"\x02" * 32)
    snapshot = snapshot_of([key], 4)
    assert (snapshot.by_digest, snapshot.by_name, snapshot.generation) == ({key.sha256: key}, {"team-b": key}, 4)
    assert snapshot_of([], 5).by_digest is not snapshot_of([], 5).by_digest


def test_limits_are_read_as_the_config_reads_them() -> None:
    assert limits_of({"requests_per_minute": 5, "budget": {"usd": 2}}) == RateLimits(requests_per_minute=5, budget=Budget(usd=2))
    with pytest.raises(ValidationError, match="at most 1000000000"):
        limits_of({"requestsPerMinute": 2**64 - 1})


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_record_encode_key_never_writes_is_unreadable(name: str) -> None:
    with pytest.raises(UnreadableKey):
        decode_key(name, UNREADABLE[name])


@pytest.mark.parametrize(
    "record",
    [b"[]", b'{"sha256":"00","routes":null,"limits":null,"created_at":1}', b'{"sha256":"' + b"0" * 64 + b'","routes":"m","limits":null,"created_at":1}',
     b'{"sha256":"' + b"0" * 64 + b'","routes":null,"limits":null,"created_at":"1"}', b'{"sha256":"' + b"0" * 64 + b'","routes":null,"limits":[],"created_at":1}'],
)  # fmt: skip
def test_a_record_of_another_shape_is_unreadable(record: bytes) -> None:
    with pytest.raises(UnreadableKey):
        decode_key("team-b", record)


def test_a_listing_skips_what_it_cannot_read_and_says_why() -> None:
    listing = listing_of([(b"team-c", encode_key(stored_key("team-c"))), (b"broken", b"not json"), (b"\xff", b"{}"), ("team-b", encode_key(stored_key("team-b")))])
    assert [key.name for key in listing.keys] == ["team-b", "team-c"]
    assert sorted(listing.unreadable) == ["b'\\xff'", "broken"]
