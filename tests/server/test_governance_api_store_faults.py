"""Issued keys through a key store's faults: a record no version writes, and a store not read yet when the process started."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.governance.key_store_redis import GENERATION, KEYS
from gateway.governance.key_store_sqlite import SQLiteKeyStore
from gateway.governance.stored_keys import StoredKey, digest_of
from tests.support.key_admin import ADMIN, TEAM_A, admin_config, call, refused, start_replica
from tests.support.servers import redis_server
from tests.support.waiting import eventually

ISSUED = "gk-issued-while-the-store-was-away"


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as server:
        yield server.url


async def test_a_record_that_cannot_be_read_stops_neither_the_refresh_nor_the_listing(aiohttp_server: Any, redis_url: str) -> None:
    base = await start_replica(aiohttp_server, admin_config(f"{{store: redis, url: '{redis_url}'}}"))
    status, issued = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "victim"})
    assert status == 201
    await eventually(lambda: _works(base, issued["key"]), what="the issued key known")
    client = aioredis.Redis.from_url(redis_url)
    await client.hset(KEYS, "broken", "not json")
    await client.incr(GENERATION)
    await client.aclose()
    status, listed = await call(base, "GET", "/v1/gateway/keys", headers=ADMIN)
    assert status == 200 and [k["name"] for k in listed["data"] if k["source"] == "api"] == ["victim"]
    assert (await call(base, "DELETE", "/v1/gateway/keys/victim", headers=ADMIN))[0] == 200
    await eventually(lambda: refused(base, issued["key"]), what="the revoked key refused: the refresh went on")
    assert (await call(base, "DELETE", "/v1/gateway/keys/broken", headers=ADMIN))[0] == 200


async def test_a_key_the_process_cannot_look_up_yet_is_a_503_until_the_store_is_read(aiohttp_server: Any, tmp_path: Path) -> None:
    path = tmp_path / "away" / "keys.db"  # no such directory yet: the store fails until it exists
    base = await start_replica(aiohttp_server, admin_config(f"{{store: local, path: '{path}'}}"))
    status, answer = await call(base, "GET", "/v1/models", headers={"Authorization": f"Bearer {ISSUED}"})
    assert (status, answer["error"]["code"], answer["error"]["type"]) == (503, "key_store_unavailable", "server_error")
    assert (await call(base, "GET", "/v1/models", headers=TEAM_A))[0] == 200  # configured keys need no store
    assert (await call(base, "GET", "/v1/models", headers={"Authorization": "Basic x"}))[0] == 401
    os.mkdir(path.parent)
    store = SQLiteKeyStore(str(path))
    assert await store.create(StoredKey(name="team-c", sha256=digest_of(ISSUED), created_at=1))
    await store.close()
    await eventually(lambda: _works(base, ISSUED), what="the store read: the issued key works")
    status, answer = await call(base, "GET", "/v1/models", headers={"Authorization": "Bearer gk-no-such-key"})
    assert (status, answer["error"]["code"]) == (401, "invalid_api_key")


async def _works(base: str, key: str) -> bool:
    return (await call(base, "GET", "/v1/models", headers={"Authorization": f"Bearer {key}"}))[0] == 200
