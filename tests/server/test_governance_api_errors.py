"""The keys API's errors, asked of a real gateway: each one the endpoint table lists for /v1/gateway/keys comes, as listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.settings import Config
from gateway.server.endpoints import ENDPOINTS, Endpoint
from tests.support.key_admin import ADMIN, TEAM_A, admin_config, call, start_replica

KEYS_API = [e for e in ENDPOINTS if e.path.startswith("/v1/gateway/keys")]


def endpoint(method: str, path: str) -> Endpoint:
    return next(e for e in ENDPOINTS if (e.method, e.path) == (method, path))


def concrete(path: str) -> str:
    return path.replace("{name}", "team-b")


def assert_listed(answer: tuple[int, Any], where: Endpoint, status: int, code: str) -> None:
    """The gateway answered (status, code), and the table lists it for `where`."""
    got = answer[0], answer[1]["error"]["code"]
    assert got == (status, code), answer
    assert any((f.status, f.code) == (status, code) for f in where.failures), f"{where.method} {where.path} lists no {status} {code}"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return admin_config(f"{{store: local, path: '{tmp_path / 'keys.db'}'}}", more="server: {maxBodyBytes: 4096}\n")


@pytest.fixture
async def base(aiohttp_server: Any, config: Config) -> str:
    base = await start_replica(aiohttp_server, config)
    assert (await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-b"}))[0] == 201
    return base


@pytest.mark.parametrize("where", KEYS_API, ids=lambda e: f"{e.method} {e.path}")
async def test_a_key_that_is_no_admin_key_is_refused(base: str, where: Endpoint) -> None:
    answer = await call(base, where.method, concrete(where.path), headers=TEAM_A, json={"name": "team-c"})
    assert_listed(answer, where, 403, "admin_key_required")


@pytest.mark.parametrize("where", KEYS_API, ids=lambda e: f"{e.method} {e.path}")
async def test_no_key_is_refused(base: str, where: Endpoint) -> None:
    assert_listed(await call(base, where.method, concrete(where.path)), where, 401, "invalid_api_key")


@pytest.mark.parametrize("where", [e for e in KEYS_API if e.method in ("POST", "PATCH")], ids=lambda e: e.method)
async def test_a_body_that_is_no_json_is_refused(base: str, where: Endpoint) -> None:
    headers = {**ADMIN, "Content-Type": "application/json"}
    assert_listed(await call(base, where.method, concrete(where.path), headers=headers, data=b"{no"), where, 400, "invalid_json")
    assert_listed(await call(base, where.method, concrete(where.path), headers=ADMIN, json={"x": "y" * 5000}), where, 413, "request_too_large")


BAD_FIELDS = [
    ({"routes": "m"}, "invalid_value", "routes"),
    ({"routes": []}, "invalid_value", "routes"),
    ({"routes": ["m", None]}, "invalid_value", "routes[1]"),
    ({"routes": ["m", "nowhere"]}, "invalid_value", "routes[1]"),
    ({"limits": []}, "invalid_value", "limits"),
    ({"limits": {"requestsPerMinute": "60"}}, "invalid_value", "limits.requestsPerMinute"),
    ({"limits": {"requestsPerMinute": 1.5}}, "invalid_value", "limits.requestsPerMinute"),
    ({"limits": {"requestsPerMinute": 2**64 - 1}}, "invalid_value", "limits.requestsPerMinute"),
    ({"limits": {"tokensPerMinute": 0}}, "invalid_value", "limits.tokensPerMinute"),
    ({"limits": {"concurrentRequests": True}}, "invalid_value", "limits.concurrentRequests"),
    ({"limits": {"budget": {"usd": 0}}}, "invalid_value", "limits.budget.usd"),
    ({"limits": {"budget": {"usd": 1e10}}}, "invalid_value", "limits.budget.usd"),
    ({"limits": {"budget": {"usd": "5"}}}, "invalid_value", "limits.budget.usd"),
    ({"limits": {"budget": {"usd": 5, "period": "year"}}}, "invalid_value", "limits.budget.period"),
    ({"limits": {"budget": {}}}, "missing_required_parameter", "limits.budget.usd"),
    ({"limits": {"requestPerMinute": 60}}, "unknown_parameter", "limits.requestPerMinute"),
    ({"limits": {"budget": {"usd": 5, "every": "day"}}}, "unknown_parameter", "limits.budget.every"),
    ({"key": "gk-mine"}, "unknown_parameter", "key"),
]


@pytest.mark.parametrize(("fields", "code", "param"), BAD_FIELDS, ids=lambda v: v if isinstance(v, str) else None)
@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_field_out_of_shape_is_refused_naming_it(base: str, method: str, fields: dict[str, Any], code: str, param: str) -> None:
    where = endpoint(method, "/v1/gateway/keys" if method == "POST" else "/v1/gateway/keys/{name}")
    body = {"name": "team-c", **fields} if method == "POST" else fields
    answer = await call(base, method, concrete(where.path), headers=ADMIN, json=body)
    assert_listed(answer, where, 400, code)
    assert answer[1]["error"]["param"] == param


@pytest.mark.parametrize(("body", "code"), [
    ({}, "missing_required_parameter"), ({"name": 7}, "invalid_type"), ({"name": "a:b"}, "invalid_value"), ({"name": "x" * 65}, "invalid_value"),
])  # fmt: skip
async def test_a_name_no_key_can_have_is_refused(base: str, body: dict[str, Any], code: str) -> None:
    answer = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json=body)
    assert_listed(answer, endpoint("POST", "/v1/gateway/keys"), 400, code)
    assert answer[1]["error"]["param"] == "name"


@pytest.mark.parametrize("name", ["team-a", "ops", "team-b"])
async def test_a_name_taken_in_the_config_or_the_store_is_a_conflict(base: str, name: str) -> None:
    answer = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": name})
    assert_listed(answer, endpoint("POST", "/v1/gateway/keys"), 409, "key_exists")


@pytest.mark.parametrize("where", [e for e in KEYS_API if "{name}" in e.path], ids=lambda e: e.method)
async def test_an_unknown_name_is_not_found(base: str, where: Endpoint) -> None:
    options = {"json": {"limits": None}} if where.method == "PATCH" else {}
    answer = await call(base, where.method, where.path.replace("{name}", "team-z"), headers=ADMIN, **options)
    assert_listed(answer, where, 404, "key_not_found")


@pytest.mark.parametrize("where", [e for e in KEYS_API if e.method in ("PATCH", "DELETE")], ids=lambda e: e.method)
@pytest.mark.parametrize("name", ["team-a", "ops"])
async def test_a_configured_key_changes_only_in_the_config(base: str, where: Endpoint, name: str) -> None:
    options = {"json": {"limits": None}} if where.method == "PATCH" else {}
    answer = await call(base, where.method, where.path.replace("{name}", name), headers=ADMIN, **options)
    assert_listed(answer, where, 409, "key_in_config")


@pytest.mark.parametrize("where", KEYS_API, ids=lambda e: f"{e.method} {e.path}")
async def test_a_store_that_fails_is_a_503_and_the_config_s_keys_still_work(aiohttp_server: Any, tmp_path: Path, where: Endpoint) -> None:
    config = admin_config(f"{{store: local, path: '{tmp_path / 'gone' / 'keys.db'}'}}")
    base = await start_replica(aiohttp_server, config)
    options = {"json": {"name": "team-c"} if where.method == "POST" else {"limits": None}} if where.method in ("POST", "PATCH") else {}
    assert_listed(await call(base, where.method, concrete(where.path), headers=ADMIN, **options), where, 503, "key_store_unavailable")
    assert (await call(base, "GET", "/v1/models", headers=TEAM_A))[0] == 200
