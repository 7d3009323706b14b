"""Keys managed without a restart, end to end: issued, used with the openai SDK, listed, changed, revoked on every replica.

Each test runs on a SQLite file (limits local) and on a real Redis (limits redis); two gateways on
one store stand for two replicas (or two processes of one file).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.core.settings import Config
from tests.support.gateway import GATEWAY_KEY
from tests.support.key_admin import ADMIN, ADMIN_KEY, TEAM_A, admin_config, call, chat, refused, start_replica
from tests.support.servers import flush_redis, redis_server
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this module's own: its keys are the whole of the limits' hash tag."""
    with redis_server(tmp_path_factory.mktemp("redis-keys-api")) as server:
        yield server.url


@pytest.fixture(params=["sqlite", "redis"])
async def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    if request.param == "sqlite":
        return admin_config(f"{{store: local, path: '{tmp_path / 'keys.db'}'}}")
    url = request.getfixturevalue("module_redis")
    await flush_redis(url)
    return admin_config(f"{{store: redis, url: '{url}'}}")


async def issue(base: str, body: dict[str, Any]) -> dict[str, Any]:
    status, issued = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json=body)
    assert status == 201, issued
    return issued


async def test_a_key_is_issued_used_listed_changed_and_revoked(aiohttp_server: Any, config: Config) -> None:
    base = await start_replica(aiohttp_server, config)
    limits = {"requestsPerMinute": 100, "budget": {"usd": 5}}
    issued = await issue(base, {"name": "team-b", "routes": ["m"], "limits": limits})
    key = issued.pop("key")
    assert key.startswith("gk-") and len(key) == 46
    assert issued == {
        "object": "gateway.key", "name": "team-b", "source": "api", "admin": False, "routes": ["m"],
        "limits": {"requestsPerMinute": 100, "budget": {"usd": 5.0, "period": "month"}}, "created_at": issued["created_at"],
    }  # fmt: skip
    await eventually(lambda: _works(base, key), what="the issued key works")
    assert await chat(base, key) == await chat(base, GATEWAY_KEY)  # the mock's answer, as for a configured key

    status, listed = await call(base, "GET", "/v1/gateway/keys", headers=ADMIN)
    assert status == 200 and listed["object"] == "list"
    assert [(k["name"], k["source"], k["admin"]) for k in listed["data"]] == [
        ("team-a", "config", False), ("ops", "config", True), ("team-b", "api", False),
    ]  # fmt: skip
    assert key not in str(listed) and all("key" not in k for k in listed["data"])
    assert await call(base, "GET", "/v1/gateway/keys/team-b", headers=ADMIN) == (200, issued)

    status, changed = await call(base, "PATCH", "/v1/gateway/keys/team-b", headers=ADMIN, json={"limits": {"tokensPerMinute": 10}})
    assert status == 200 and changed == {**issued, "limits": {"tokensPerMinute": 10}}
    status, opened = await call(base, "PATCH", "/v1/gateway/keys/team-b", headers=ADMIN, json={"routes": None})
    assert status == 200 and (opened["routes"], opened["limits"]) == (None, {"tokensPerMinute": 10})
    assert await call(base, "GET", "/v1/gateway/keys/team-b", headers=ADMIN) == (200, opened)
    assert not await refused(base, key)  # changed, not revoked

    deleted = await call(base, "DELETE", "/v1/gateway/keys/team-b", headers=ADMIN)
    assert deleted == (200, {"object": "gateway.key.deleted", "name": "team-b", "deleted": True})
    await eventually(lambda: refused(base, key), what="the revoked key is refused")
    assert await call(base, "GET", "/v1/gateway/keys/team-b", headers=ADMIN) == (
        404, {"error": {"message": "No key named 'team-b'.", "type": "invalid_request_error", "param": "name", "code": "key_not_found"}}
    )  # fmt: skip
    assert not await refused(base, GATEWAY_KEY) and not await refused(base, ADMIN_KEY)


async def test_a_key_revoked_on_one_replica_is_refused_by_every_replica(aiohttp_server: Any, config: Config) -> None:
    one = await start_replica(aiohttp_server, config)
    other = await start_replica(aiohttp_server, config)
    key = (await issue(one, {"name": "team-b"}))["key"]
    await eventually(lambda: _works(other, key), what="the key issued on one replica works on the other")
    assert await _works(one, key)
    assert (await call(other, "DELETE", "/v1/gateway/keys/team-b", headers=ADMIN))[0] == 200
    await eventually(lambda: refused(one, key), what="the replica that issued it refuses it")
    await eventually(lambda: refused(other, key), what="the replica that revoked it refuses it")
    assert not await refused(one, GATEWAY_KEY)


async def test_the_key_is_shown_once_and_another_of_the_same_name_is_a_conflict(aiohttp_server: Any, config: Config) -> None:
    base = await start_replica(aiohttp_server, config)
    key = (await issue(base, {"name": "team-b"}))["key"]
    status, again = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-b"})
    assert (status, again["error"]["code"]) == (409, "key_exists")
    status, shadow = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-a"})
    assert (status, shadow["error"]["code"]) == (409, "key_exists")
    status, shown = await call(base, "GET", "/v1/gateway/keys/team-b", headers=ADMIN)
    assert status == 200 and key not in str(shown)


async def test_a_key_sees_its_own_usage_and_an_admin_key_every_keys(aiohttp_server: Any, config: Config) -> None:
    base = await start_replica(aiohttp_server, config)
    key = (await issue(base, {"name": "team-b"}))["key"]
    await eventually(lambda: _works(base, key), what="the issued key works")
    status, own = await call(base, "GET", "/v1/gateway/usage", headers={"Authorization": f"Bearer {key}"})
    assert status == 200 and (own["object"], own["key"]) == ("gateway.usage", "team-b")
    status, mine = await call(base, "GET", "/v1/gateway/usage", headers=TEAM_A)
    assert status == 200 and mine["key"] == "team-a"
    status, every = await call(base, "GET", "/v1/gateway/usage", headers=ADMIN)
    assert status == 200 and every["object"] == "list"
    assert [(usage["object"], usage["key"]) for usage in every["data"]] == [
        ("gateway.usage", "team-a"), ("gateway.usage", "ops"), ("gateway.usage", "team-b"),
    ]  # fmt: skip


async def _works(base: str, key: str) -> bool:
    return not await refused(base, key)
