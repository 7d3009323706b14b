"""The keys API reads a key's routes and limits as check-config reads auth.keys[]: the same values refused, in the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.config.loader import ConfigError, parse_config
from tests.support.key_admin import ADMIN, ROUTES, admin_config, call, start_replica

REFUSED = [
    {"routes": []},
    {"routes": "m"},
    {"routes": ["m", "nowhere"]},
    {"routes": ["m", None]},
    {"limits": {"requestsPerMinute": 2**64 - 1}},
    {"limits": {"tokensPerMinute": 0}},
    {"limits": {"concurrentRequests": 1.5}},
    {"limits": {"requestsPerMinute": "60"}},
    {"limits": {"budget": {"usd": 5, "period": 3}}},
    {"limits": {"budget": {"usd": 5, "period": "year"}}},
    {"limits": {"budget": {"usd": -1}}},
    {"limits": {"budget": {}}},
    {"limits": {"requestPerMinute": 60}},
    {"limits": "fast"},
]
ACCEPTED = [
    ({"routes": ["m", "n"]}, {"routes": ["m", "n"], "limits": None}),
    ({"limits": {"requestsPerMinute": 10**9, "budget": {"usd": 1e9, "period": "total"}}},
     {"routes": None, "limits": {"requestsPerMinute": 10**9, "budget": {"usd": 1e9, "period": "total"}}}),
    ({"limits": {"requests_per_minute": 5.0}}, {"routes": None, "limits": {"requestsPerMinute": 5}}),
]  # fmt: skip


def check_config(fields: dict[str, Any]) -> list[str]:
    """What check-config says of a configured key with `fields`, each path as the body names it."""
    key = orjson.dumps({"name": "team-c", "key": "sk-team-c-0123456789", **fields}).decode()
    text = f"auth: {{keys: [{key}], adminKeys: [{{name: ops, key: gw-admin-key}}]}}\n{ROUTES}"
    try:
        parse_config(text, env={})
    except ConfigError as refused:
        return [error.removeprefix("auth.keys[0].") for error in refused.errors]
    return []


@pytest.fixture
async def base(aiohttp_server: Any, tmp_path: Path) -> str:
    return await start_replica(aiohttp_server, admin_config(f"{{store: local, path: '{tmp_path / 'keys.db'}'}}"))


@pytest.mark.parametrize("fields", REFUSED, ids=lambda fields: orjson.dumps(fields).decode())
@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_what_check_config_refuses_the_api_refuses_in_its_words(base: str, method: str, fields: dict[str, Any]) -> None:
    if method == "PATCH":
        assert (await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-c"}))[0] == 201
    path = "/v1/gateway/keys" if method == "POST" else "/v1/gateway/keys/team-c"
    body = {"name": "team-c", **fields} if method == "POST" else fields
    status, answer = await call(base, method, path, headers=ADMIN, json=body)
    error = answer["error"]
    assert status == 400 and error["message"] in check_config(fields), (error, check_config(fields))
    assert error["message"].startswith(f"{error['param']}: ")


@pytest.mark.parametrize(("fields", "shown"), ACCEPTED, ids=lambda value: orjson.dumps(value).decode())
async def test_what_check_config_accepts_the_api_accepts(base: str, fields: dict[str, Any], shown: dict[str, Any]) -> None:
    assert check_config(fields) == []
    status, issued = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-c", **fields})
    assert status == 201 and {"routes": issued["routes"], "limits": issued["limits"]} == shown

