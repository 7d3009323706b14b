"""What every key store (governance.key_store) must do, checked the same way on SQLite and on Redis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.core.governance import Budget, BudgetPeriod, RateLimits
from gateway.governance.key_store import KeyStore
from gateway.governance.stored_keys import StoredKey, digest_of, encode_key

LIMITED = RateLimits(requests_per_minute=60, tokens_per_minute=1000, budget=Budget(usd=2.5, period=BudgetPeriod.DAY))


def stored_key(name: str, *, key: str | None = None, routes: frozenset[str] | None = None) -> StoredKey:
    return StoredKey(name=name, sha256=digest_of(key or f"gk-{name}"), routes=routes, limits=LIMITED, created_at=1_700_000_000)


async def check_a_key_is_kept_changed_and_forgotten(store: KeyStore) -> None:
    """create, get, list, update and delete, each change moving the generation on, and only a change."""
    first = await store.generation()
    team_b = stored_key("team-b", routes=frozenset({"fast"}))
    assert await store.create(team_b)
    assert await store.get("team-b") == team_b
    assert await store.generation() == first + 1
    assert not await store.create(stored_key("team-b", key="gk-other"))  # the name is taken: nothing changes
    assert await store.get("team-b") == team_b and await store.generation() == first + 1
    assert await store.create(stored_key("team-a"))
    assert [key.name for key in (await store.list()).keys] == ["team-a", "team-b"]
    opened = StoredKey(name="team-b", sha256=team_b.sha256, routes=None, limits=None, created_at=team_b.created_at)
    assert await store.update(opened)
    assert await store.get("team-b") == opened and await store.generation() == first + 3
    assert not await store.update(stored_key("team-z"))
    assert await store.delete("team-b")
    assert await store.get("team-b") is None and [key.name for key in (await store.list()).keys] == ["team-a"]
    assert not await store.delete("team-b")
    assert await store.generation() == first + 4


async def check_two_stores_on_one_place_see_each_other(one: KeyStore, other: KeyStore) -> None:
    """Two processes (or replicas) on one file or Redis: what one changes, the other reads, generation and all."""
    assert await one.create(stored_key("shared"))
    assert await other.generation() == await one.generation()
    assert await other.get("shared") == stored_key("shared")
    assert not await other.create(stored_key("shared", key="gk-again"))
    assert await other.delete("shared")
    assert await one.get("shared") is None and await one.generation() == await other.generation()


# Records no version of encode_key writes: by hand, by a newer version, or limits the config refuses.
UNREADABLE = {
    "not-json": b"not json",
    "newer": encode_key(stored_key("newer"))[:-1] + b',"scopes":["read"]}',
    "huge": encode_key(stored_key("huge")).replace(b'"requestsPerMinute":60', b'"requestsPerMinute":18446744073709551615'),
    "no-digest": b'{"sha256":"zz","routes":null,"limits":null,"created_at":1}',
}


async def check_an_unreadable_record_is_skipped(store: KeyStore, write_raw: Callable[[str, bytes], Awaitable[None]]) -> None:
    """A record decode_key cannot read is no key: listed as unreadable (with why), got as None, deleted as any other."""
    assert await store.create(stored_key("team-b"))
    for name, record in UNREADABLE.items():
        await write_raw(name, record)
    listing = await store.list()
    assert [key.name for key in listing.keys] == ["team-b"] and listing.keys[0] == stored_key("team-b")
    assert sorted(listing.unreadable) == sorted(UNREADABLE)
    assert "not JSON" in listing.unreadable["not-json"] and "1000000000" in listing.unreadable["huge"]
    assert await store.get("not-json") is None and await store.get("team-b") == stored_key("team-b")
    assert await store.delete("not-json")
    assert "not-json" not in (await store.list()).unreadable
