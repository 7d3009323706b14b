"""A Redis store's connection in the file: url, cluster: true, or sentinel; breakers default to memory's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, parse_config
from gateway.core.settings import Config, breakers_redis
from gateway.core.stores import RedisConnection, SentinelSettings
from tests.support.secret_env import SECRETS, check_config, set_secrets

ROUTES = "routes: {m: {provider: mock}}\n"


def load(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(textwrap.dedent(text).strip() + "\n" + ROUTES, env=env or {})


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(text)
    return list(caught.value.errors)


def test_a_cluster_is_reached_through_any_node_as_the_seed() -> None:
    config = load("memory: {store: redis, url: 'redis://seed:7000/0', cluster: true}")
    assert config.memory.redis == RedisConnection(url="redis://seed:7000/0", cluster=True)


def test_a_sentinel_primary_is_named_with_its_sentinels() -> None:
    config = load(
        """
        memory:
          store: redis
          sentinel: {masterName: mymaster, nodes: ['s1:26379', '[::1]:26380'], password: '${P}', db: 2}
        """,
        env={"P": "primary-pass"},
    )
    assert config.memory.redis.sentinel == SentinelSettings(
        master_name="mymaster", nodes=(("s1", 26379), ("::1", 26380)), password="primary-pass", db=2
    )


def test_breakers_without_a_redis_of_their_own_connect_as_memory_does() -> None:
    sentinel = "sentinel: {masterName: mymaster, nodes: ['s1:26379']}"
    config = load(f"memory: {{store: redis, {sentinel}}}\nbreakers: {{store: redis}}")
    assert breakers_redis(config) == config.memory.redis
    config = load("memory: {store: redis, url: 'redis://seed:7000/0', cluster: true}")
    assert breakers_redis(config) == RedisConnection(url="redis://seed:7000/0", cluster=True)
    config = load(f"memory: {{store: redis, url: 'redis://a:1/0'}}\nbreakers: {{store: redis, {sentinel}}}")
    assert breakers_redis(config).sentinel is not None and breakers_redis(config).url == ""
    config = load("memory: {store: redis, url: 'redis://a:1/0'}\nbreakers: {url: 'redis://b:7000/0', cluster: true}")
    assert breakers_redis(config) == RedisConnection(url="redis://b:7000/0", cluster=True)


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("memory: {url: 'redis://seed:7000/3', cluster: true}", "memory.url: a Redis Cluster has only database 0, got /3"),
        ("breakers: {url: 'redis://seed:7000/1', cluster: true}", "breakers.url: a Redis Cluster has only database 0, got /1"),
        ("breakers: {store: redis, cluster: true}", "breakers.cluster: needs breakers.url (without one, breakers connect as memory does)"),
        (
            "memory: {url: 'redis://a:1/0', sentinel: {masterName: m, nodes: ['s:1']}}",
            "memory.sentinel: give either memory.url or memory.sentinel, not both",
        ),
        (
            "breakers: {cluster: true, url: 'redis://a:1/0', sentinel: {masterName: m, nodes: ['s:1']}}",
            "breakers.sentinel: a Redis Cluster has no Sentinel: give cluster or sentinel, not both",
        ),
        ("memory: {sentinel: {masterName: m, nodes: []}}", "memory.sentinel.nodes: must be a non-empty list of host:port strings, got an empty list"),
        ("memory: {sentinel: {nodes: ['s:1']}}", "memory.sentinel.masterName: is required"),
        ("memory: {sentinel: {masterName: m}}", "memory.sentinel.nodes: is required"),
        ("memory: {sentinel: {masterName: m, nodes: ['s']}}", "memory.sentinel.nodes[0]: must be host:port, got 's'"),
        ("memory: {sentinel: {masterName: m, nodes: ['s:1', 's:99999']}}", "memory.sentinel.nodes[1]: the port must be between 1 and 65535, got 's:99999'"),
        (
            "memory: {sentinel: {masterName: m, nodes: ['::1:26379']}}",
            "memory.sentinel.nodes[0]: must be host:port (an IPv6 host in brackets: [::1]:26379), got '::1:26379'",
        ),
        ("memory: {sentinel: {masterName: m, nodes: ['s:1'], db: -1}}", "memory.sentinel.db: must be >= 0, got -1"),
        ("memory: {cluster: maybe}", "memory.cluster: must be true or false, got 'maybe'"),
        (
            "memory: {url: 'redis://seed:7000/0', cluster: true, waitReplicas: 1}",
            "memory.waitReplicas: must be 0 with cluster: true (a Cluster's WAIT would need each conversation's node)",
        ),
        ("memory: {waitTimeoutSeconds: 0}", "memory.waitTimeoutSeconds: must be > 0, got 0"),
    ],
)
def test_check_config_refuses_a_connection_that_cannot_be(text: str, told: str) -> None:
    assert told in errors_of(text)


def test_sentinel_passwords_stay_out_of_the_configs_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load(
        "memory: {store: redis, sentinel: {masterName: m, nodes: ['s:1'], password: pw-0101, sentinelPassword: pw-0102}}"
    )
    assert "pw-01" not in repr(config)


def test_check_config_shows_sentinel_passwords_as_their_references(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_secrets(monkeypatch)
    text = """
    memory:
      store: redis
      sentinel: {masterName: m, nodes: ['s:1'], password: '${REDIS_PASSWORD}', sentinelPassword: '${TENANT_TOKEN}', db: '${USER_TAG}'}
    routes: {m: {provider: mock}}
    """
    code = check_config(tmp_path, text)
    out, err = capsys.readouterr()
    assert code == 2
    assert "memory.sentinel.db: must be an integer, got '${USER_TAG}'" in err
    for value in SECRETS.values():
        assert value not in out + err
