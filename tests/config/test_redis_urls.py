"""Redis URLs (gateway.config.redis_urls): what the installed client refuses is refused at load, at memory.url and
breakers.url, and no message shows the password. The runtime's own guard against the same URLs is
tests/server/test_redis_refused_e2e.py."""

from __future__ import annotations

import pytest

from gateway.config.loader import ConfigError, parse_config
from gateway.config.redis_urls import redis_url_problems
from tests.support.config_text import MOCK, errors_of, loads


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://h:6379/0?cluster=true", "query option 'cluster' is not one the Redis client takes"),
        ("redis://h:6379/0?timeout=5", "query option 'timeout' is not one the Redis client takes"),
        ("redis://h:6379/0?ssl_cert_reqs=none", "query option 'ssl_cert_reqs' is not one"),  # TLS options: rediss only
        ("redis://h:6379/0?db=zero", "query option 'db': invalid value 'zero'"),
        ("redis://h:6379/0?socket_timeout=0", "query option 'socket_timeout': must be a positive number"),
        ("redis://h:6379/0?protocol=4", "the Redis client refuses it (protocol must be either 2 or 3)"),
        ("redis://h:6379/0?client_name=", "query option 'client_name' needs a value"),
        ("redis://h:99999/0", "cannot be read as a URL"),
        ("redis://h:0/0", "port must be between 1 and 65535"),
        ("redis://h:6379/zero", "the path must be a database number like /0"),
        ("redis:///0", "needs a host"),
        ("http://h:6379/0", "must be a redis://, rediss:// or unix:// URL, got http://"),
        ("h:6379", "must be a redis://, rediss:// or unix:// URL"),
        ("unix://", "a unix:// URL needs the socket's path"),
    ],
)
@pytest.mark.parametrize("where", ["memory", "breakers"])
def test_redis_urls_the_client_refuses(url: str, problem: str, where: str) -> None:
    errors = errors_of(f"{where}: {{store: redis, url: '{url}'}}\n{MOCK}")
    assert [error for error in errors if error.startswith(f"{where}.url: ")] == errors
    assert any(problem in error for error in errors), errors


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://:pw@127.0.0.1:6379/2?socket_timeout=2.5&health_check_interval=10&client_name=gw",
        "rediss://user:pw@redis.example:6380/0?ssl_cert_reqs=none&ssl_check_hostname=false",
        "unix:///run/redis.sock?db=1",
        "redis://[::1]:6379",
    ],
)
def test_redis_urls_the_client_takes(url: str) -> None:
    loads(f"memory: {{store: redis, url: '{url}'}}\nbreakers: {{url: '{url}'}}\n{MOCK}")


def test_a_redis_url_error_never_shows_its_password() -> None:
    errors = errors_of(f"memory: {{store: redis, url: 'redis://u:pa55word@h:6379/0?cluster=pa55word'}}\n{MOCK}")
    assert errors and not any("pa55word" in error for error in errors)
    env = {"REDIS_URL": "redis://:from-env-secret@h:6379/zero"}
    errors = errors_of(f"memory: {{store: redis, url: '${{REDIS_URL}}'}}\n{MOCK}", env)
    assert errors and not any("from-env-secret" in error for error in errors)


def test_a_password_with_an_unescaped_slash_is_not_quoted() -> None:
    errors = errors_of(f"memory: {{store: redis, url: 'redis://:pa/ss-word@h:6379/0'}}\n{MOCK}")
    assert errors and not any("ss-word" in error for error in errors), errors


@pytest.mark.parametrize(
    "query", ["client_name=x%20y", "client_name=a%0d%0aFLUSHALL", "username=%00", "password=a%0Ab"]
)
def test_redis_text_options_the_server_would_refuse_are_refused(query: str) -> None:
    """Sent as CLIENT SETNAME / AUTH, such values fail every command: memory would be unavailable for good."""
    with pytest.raises(ConfigError) as caught:
        parse_config(f"memory: {{store: redis, url: 'redis://127.0.0.1:6379/0?{query}'}}\nroutes:\n  a: {{provider: mock}}\n")
    assert all(error.startswith("memory.url: query option") for error in caught.value.errors), caught.value.errors



def test_a_usable_url_has_no_problems_and_an_unusable_one_every_problem_at_once() -> None:
    assert redis_url_problems("redis://127.0.0.1:6379/0?socket_timeout=1") == []
    problems = redis_url_problems("redis://:0/x?nope=1&client_name=")
    assert problems[:3] == [
        "needs a host (redis://host:6379/0)",
        "port must be between 1 and 65535, got 0",
        "the path must be a database number like /0",
    ]
    assert problems[3].startswith("query option 'nope' is not one the Redis client takes (")
    assert "socket_timeout" in problems[3] and "ssl_cert_reqs" not in problems[3]  # TLS options: rediss:// only
    assert problems[4:] == ["query option 'client_name' needs a value"]
