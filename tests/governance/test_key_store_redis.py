"""Keys issued through the API in Redis: kept, changed and forgotten, shared by replicas, under the limits' hash tag."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.governance import key_store_redis
from gateway.governance.key_store_redis import GENERATION, KEYS, RedisKeyStore
from gateway.governance.stored_keys import KeyStoreUnavailable
from tests.support.key_stores import (
    check_a_key_is_kept_changed_and_forgotten,
    check_an_unreadable_record_is_skipped,
    check_two_stores_on_one_place_see_each_other,
    stored_key,
)
from tests.support.processes import free_port
from tests.support.servers import flush_redis, redis_server
from tests.support.silent_server import silent_server


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this module's own (its keys are the whole of the limits' hash tag)."""
    with redis_server(tmp_path_factory.mktemp("redis-keys")) as server:
        yield server.url


def config(url: str) -> Config:
    return parse_config(
        f"auth: {{adminKeys: [{{name: ops, key: admin-key}}]}}\nlimits: {{store: redis, url: '{url}'}}\n"
        "routes: {m: {provider: mock}}\n",
        env={},
    )


@pytest.fixture
async def url(redis_url: str) -> str:
    await flush_redis(redis_url)
    return redis_url


async def test_a_key_is_kept_changed_and_forgotten(url: str) -> None:
    store = RedisKeyStore(config(url))
    assert await store.generation() == 0
    await check_a_key_is_kept_changed_and_forgotten(store)
    await store.close()


async def test_two_replicas_on_one_redis_see_each_others_keys(url: str) -> None:
    one, other = RedisKeyStore(config(url)), RedisKeyStore(config(url))
    await check_two_stores_on_one_place_see_each_other(one, other)
    await one.close()
    await other.close()


async def test_every_key_it_writes_carries_the_limits_hash_tag_and_no_key_is_kept(url: str) -> None:
    store = RedisKeyStore(config(url))
    await store.create(stored_key("team-b", key="gk-secret-value"))
    await store.close()
    client = aioredis.Redis.from_url(url)
    names = await client.keys("*")
    values = [await client.hget(name, "team-b") if await client.type(name) == b"hash" else await client.get(name) for name in names]
    await client.aclose()
    assert names and all(b"{gateway-limits}" in name for name in names)
    assert not any(b"gk-secret-value" in value for value in values if value)


async def test_an_unreachable_redis_is_unavailable_and_its_password_never_shown() -> None:
    store = RedisKeyStore(config(f"redis://:hunter2-pw@127.0.0.1:{free_port()}/0"))
    with pytest.raises(KeyStoreUnavailable) as failed:
        await store.generation()
    assert "hunter2-pw" not in str(failed.value)
    await store.close()


async def test_a_url_the_client_refuses_makes_a_store_that_is_never_available() -> None:
    checked = config("redis://127.0.0.1:6379/0")  # the config's checks let only a URL redis-py reads through
    refused = dataclasses.replace(checked, limits=dataclasses.replace(checked.limits, url="memcached://:hunter2-pw@host/0"))
    store = RedisKeyStore(refused)
    with pytest.raises(KeyStoreUnavailable, match="refused") as failed:
        await store.list()
    assert "hunter2-pw" not in str(failed.value)
    await store.close()


async def test_a_record_that_cannot_be_read_is_skipped_not_the_end_of_the_listing(url: str) -> None:
    store = RedisKeyStore(config(url))
    client = aioredis.Redis.from_url(url)

    async def write_raw(name: str, record: bytes) -> None:
        await client.hset(KEYS, name, record)

    await check_an_unreadable_record_is_skipped(store, write_raw)
    await client.aclose()
    await store.close()


async def test_a_generation_set_by_hand_to_no_number_is_unavailable_not_a_crash(url: str) -> None:
    client = aioredis.Redis.from_url(url)
    await client.set(GENERATION, "not a number")
    await client.aclose()
    store = RedisKeyStore(config(url))
    with pytest.raises(KeyStoreUnavailable, match="not a number"):
        await store.generation()
    await store.close()


async def test_a_redis_that_hangs_is_waited_for_once_not_once_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply that does not come is not retried (each retry would wait as long again); a lost connection is."""
    patience = dataclasses.replace(key_store_redis._PATIENCE, socket_seconds=0.5, connect_seconds=5)
    monkeypatch.setattr(key_store_redis, "_PATIENCE", patience)
    async with silent_server() as hung:
        store = RedisKeyStore(config(hung.url))
        try:
            with pytest.raises(KeyStoreUnavailable):
                await store.list()
        finally:
            await store.close()
        assert hung.connections == 1
