"""Keys, admin keys and limits read from a file (gateway.config.access), and the checks between them and the routes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gateway.core.governance import UNLIMITED, Budget, BudgetPeriod, LimitsConfig, LimitStoreKind, RateLimits
from gateway.core.settings import ApiKey, limits_redis
from gateway.core.stores import RedisConnection
from tests.support.config_text import MOCK, errors_of, loads
from tests.support.secret_env import SECRETS, check_config, set_secrets

ROUTES = "routes: {fast: {provider: mock}, smart: {provider: mock}}\n"
# The issue's example, as written there
ISSUE = """
auth:
  keys:
    - {name: team-a, key: "${TEAM_A_KEY}", routes: [fast, smart],
       limits: {requestsPerMinute: 600, tokensPerMinute: 200000, concurrentRequests: 20,
                budget: {usd: 100, period: month}}}
limits:
  store: redis            # local | redis (default: redis when memory is on Redis)
  defaults: {requestsPerMinute: 60}     # for keys that name none
memory: {store: redis, url: "redis://127.0.0.1:6379/0"}
routes:
  fast: {provider: mock}
  smart:
    provider: mock
    limits: {requestsPerMinute: 3000, tokensPerMinute: 2000000}   # the route as a whole, all keys
"""


def test_the_issues_example_reads_into_the_settings() -> None:
    config = loads(ISSUE, env={"TEAM_A_KEY": "team-a-secret"})
    assert config.api_keys == (
        ApiKey(
            "team-a",
            hashlib.sha256(b"team-a-secret").digest(),
            routes=frozenset({"fast", "smart"}),
            limits=RateLimits(
                requests_per_minute=600, tokens_per_minute=200000, concurrent_requests=20,
                budget=Budget(usd=100, period=BudgetPeriod.MONTH),
            ),
        ),
    )  # fmt: skip
    assert config.limits == LimitsConfig(store=LimitStoreKind.REDIS, defaults=RateLimits(requests_per_minute=60))
    assert config.routes["smart"].limits == RateLimits(requests_per_minute=3000, tokens_per_minute=2_000_000)
    assert config.routes["fast"].limits == UNLIMITED
    assert config.admin_keys == ()


def test_without_any_governance_nothing_is_limited() -> None:
    config = loads(MOCK)
    assert config.limits == LimitsConfig() and config.admin_keys == ()
    assert config.routes["m"].limits == UNLIMITED


def test_a_key_that_names_no_routes_nor_limits_has_none_of_its_own() -> None:
    """None: every route, and limits.defaults' limits (the governance layer applies them)."""
    (key,) = loads("auth: {keys: [{name: a, key: k}]}\n" + MOCK).api_keys
    assert (key.routes, key.limits) == (None, None)


def test_admin_keys_are_read_by_key_or_digest() -> None:
    digest = hashlib.sha256(b"admin-secret").hexdigest()
    config = loads(f"auth: {{adminKeys: [{{name: ops, key: admin-secret}}, {{name: ops2, keySha256: '{digest}'}}]}}\n{MOCK}")
    assert config.admin_keys == (
        ApiKey("ops", hashlib.sha256(b"admin-secret").digest()),
        ApiKey("ops2", bytes.fromhex(digest)),
    )
    assert config.api_keys == ()


def test_every_period_and_the_limits_sections_settings_are_read() -> None:
    for period in BudgetPeriod:
        config = loads(f"limits: {{defaults: {{budget: {{usd: 2.5, period: {period}}}}}}}\n{MOCK}")
        assert config.limits.defaults.budget == Budget(usd=2.5, period=period)
    config = loads(
        "limits: {store: local, path: /var/lib/gateway/keys.db, defaults: {concurrentRequests: 4}}\n" + MOCK
    )
    assert config.limits == LimitsConfig(
        store=LimitStoreKind.LOCAL, path="/var/lib/gateway/keys.db", defaults=RateLimits(concurrent_requests=4)
    )


def test_limits_without_a_redis_of_their_own_are_counted_in_memorys() -> None:
    config = loads("memory: {store: redis, url: 'redis://seed:7000/0', cluster: true}\nlimits: {store: redis}\n" + MOCK)
    assert limits_redis(config) == RedisConnection(url="redis://seed:7000/0", cluster=True)
    config = loads("limits: {store: redis, url: 'redis://b:7000/0', cluster: true}\n" + MOCK)
    assert limits_redis(config) == RedisConnection(url="redis://b:7000/0", cluster=True)
    config = loads("limits: {store: redis, sentinel: {masterName: m, nodes: ['s1:26379'], db: 3}}\n" + MOCK)
    sentinel = limits_redis(config).sentinel
    assert sentinel is not None and sentinel.db == 3


@pytest.mark.parametrize(
    ("text", "told"),
    [
        (
            "auth: {keys: [{name: a, key: k, routes: [fast, nope]}]}\n" + ROUTES,
            ["auth.keys[0].routes[1]: no route named 'nope' (routes: fast, smart)"],
        ),
        (  # an earlier key refused whole keeps the places of the keys after it
            "auth: {keys: [{key: j}, {name: a, key: k, routes: [{x: 1}, nope]}]}\n" + ROUTES,
            [
                "auth.keys[0].name: is required",
                "auth.keys[1].routes[0]: must be a string, got a mapping",
                "auth.keys[1].routes[1]: no route named 'nope' (routes: fast, smart)",
            ],
        ),
        (
            "auth: {keys: [{name: a, key: k}], adminKeys: [{name: a, key: other}]}\n" + ROUTES,
            ["auth.adminKeys[0].name: 'a' is also the name of auth.keys[0]: an admin key is a tenant of its own"],
        ),
        (
            "auth: {keys: [{name: a, key: k}], adminKeys: [{name: ops, key: k}]}\n" + ROUTES,
            ["auth.adminKeys[0]: is the same key as auth.keys[0]: an admin key must be a key of its own"],
        ),
        (
            "auth: {keys: [{name: a, key: k1}, {name: b, key: k2}, {name: a, key: k3, limits: {requestsPerMinute: 5}}]}\n" + ROUTES,
            [
                "auth.keys[2]: gives other routes or limits than auth.keys[0], of the same name 'a': "
                "keys of one name are one tenant, with one set of routes and limits"
            ],
        ),
        (
            "routes: {fast: {provider: mock, limits: {budget: {usd: 5}}}}",
            [
                "routes.fast.limits.budget: a route has no budget: a budget is a key's "
                "(auth.keys[].limits.budget, or limits.defaults.budget)"
            ],
        ),
        (
            "auth: {keys: [{name: a, key: k, limits: {requestsPerMinute: 0, budget: {usd: 0}}}]}\n"
            "limits: {defaults: {tokensPerMinute: -1}}\n" + ROUTES,
            [
                "auth.keys[0].limits.requestsPerMinute: must be >= 1, got 0",
                "auth.keys[0].limits.budget.usd: must be > 0, got 0",
                "limits.defaults.tokensPerMinute: must be >= 1, got -1",
            ],
        ),
        (
            "limits: {store: redis}\n" + ROUTES,
            [
                "limits.store: redis needs limits.url or limits.sentinel: memory is not on Redis (memory.store: sqlite) "
                "to share its connection"
            ],
        ),
        (
            "limits: {store: redis, url: 'redis://a:1/0', cluster: true, sentinel: {masterName: m, nodes: ['s:1']}}\n" + ROUTES,
            [
                "limits.sentinel: give either limits.url or limits.sentinel, not both",
                "limits.sentinel: a Redis Cluster has no Sentinel: give cluster or sentinel, not both",
            ],
        ),
        ("limits: {cluster: true}\n" + ROUTES, ["limits.cluster: needs limits.url (without one, limits are counted in memory's Redis)"]),
        ("limits: {url: 'redis://seed:7000/2', cluster: true}\n" + ROUTES, ["limits.url: a Redis Cluster has only database 0, got /2"]),
    ],
)
def test_check_config_refuses_governance_that_cannot_be(text: str, told: list[str]) -> None:
    assert errors_of(text) == told


@pytest.mark.parametrize(
    "text",
    [
        "limits: {store: redis}\nmemory: {store: redis}\n",  # counted in memory's Redis
        "limits: {store: redis, url: 'redis://127.0.0.1:6379/1'}\n",
        "limits: {store: redis, sentinel: {masterName: m, nodes: ['s:1']}}\n",
        "limits: {store: local}\n",
        "auth: {keys: [{name: a, key: k1, routes: [fast]}, {name: a, key: k2, routes: [fast]}]}\n",  # one tenant, two keys
    ],
)
def test_check_config_takes_governance_that_can_be(text: str) -> None:
    loads(text + ROUTES)


def test_a_key_naming_a_route_is_not_told_again_when_the_file_has_no_routes() -> None:
    assert errors_of("auth: {keys: [{name: a, key: k, routes: [fast]}]}\nroutes: {}") == [
        "routes: must be a mapping with at least one route"
    ]


def test_a_limits_url_never_shows_its_password() -> None:
    errors = errors_of(f"limits: {{store: redis, url: 'redis://u:pa55word@h:6379/0?cluster=pa55word'}}\n{MOCK}")
    assert errors and all(error.startswith("limits.url: ") for error in errors)
    assert not any("pa55word" in error for error in errors)
    env = {"REDIS_URL": "redis://:from-env-secret@h:6379/zero"}
    errors = errors_of(f"limits: {{store: redis, url: '${{REDIS_URL}}'}}\n{MOCK}", env)
    assert errors == ["limits.url: the path must be a database number like /0"]


def test_limits_passwords_stay_out_of_the_configs_repr() -> None:
    config = loads(
        "limits: {store: redis, url: 'redis://:pw-0101@h:6379/0'}\n"
        "memory: {store: redis, sentinel: {masterName: m, nodes: ['s:1'], password: pw-0102}}\n" + MOCK
    )
    assert "pw-01" not in repr(config)
    config = loads("limits: {store: redis, sentinel: {masterName: m, nodes: ['s:1'], password: pw-0103}}\n" + MOCK)
    assert "pw-01" not in repr(config)


def test_check_config_shows_no_limits_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_secrets(monkeypatch)
    good = """
    auth:
      keys: [{name: team-a, key: '${GATEWAY_KEY}', limits: {requestsPerMinute: 5}}]
      adminKeys: [{name: ops, key: '${TENANT_TOKEN}'}]
    limits: {store: redis, url: 'redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0', defaults: {requestsPerMinute: 60}}
    routes: {m: {provider: mock}}
    """
    assert check_config(tmp_path, good) == 0
    bad = """
    auth:
      keys: [{name: team-a, key: '${GATEWAY_KEY}', routes: ['${USER_TAG}']}]
      adminKeys: [{name: ops, key: '${GATEWAY_KEY}'}]
    limits: {store: redis, url: 'redis://:${REDIS_PASSWORD}@127.0.0.1:6379/x', sentinel: {masterName: m, nodes: ['s:1'], password: '${OPENAI_KEY}', db: '${USER_TAG}'}}
    routes: {m: {provider: mock}}
    """
    assert check_config(tmp_path, bad) == 2
    out, err = capsys.readouterr()
    assert "auth.keys[0].routes[0]: no route named '${USER_TAG}' (routes: m)" in err
    assert "auth.adminKeys[0]: is the same key as auth.keys[0]: an admin key must be a key of its own" in err
    assert "limits.url: the path must be a database number like /0" in err
    for value in SECRETS.values():
        assert value not in out + err
