"""What loads but could never work is refused at load, each problem with its dotted path.

Classes of input, each a few members: Redis URLs the client refuses, base URLs with credentials,
a query or a fragment, header names and values HTTP cannot carry, override params a JSON body
cannot carry, names that cannot go out in a response header. The runtime's own guard against the
same Redis URLs is tests/server/test_redis_refused_e2e.py.
"""

from __future__ import annotations

import textwrap

import pytest

from gateway.config.loader import ConfigError, parse_config


def errors_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text), env=env or {})
    return list(caught.value.errors)


def loads(text: str, env: dict[str, str] | None = None) -> None:
    parse_config(textwrap.dedent(text), env=env or {})


MOCK = "routes: {m: {provider: mock}}\n"


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


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("http://user:pw@127.0.0.1/v1", "must not carry credentials (user:password@)"),
        ("http://user@127.0.0.1/v1", "must not carry credentials"),
        ("http://127.0.0.1/v1?api-version=1", "must not carry credentials, a query or a fragment"),
        ("http://127.0.0.1/v1?", "a query or a fragment"),
        ("http://127.0.0.1/v1#frag", "a query or a fragment"),
        ("http://127.0.0.1/v 1", "must not contain spaces or control characters"),
        ("ftp://127.0.0.1/v1", "must be an http(s) URL"),
        ("http:///v1", "must be an http(s) URL"),
        ("http://127.0.0.1:70000/v1", "must be an http(s) URL"),
        ("http://127.0.0.1:0/v1", "port must be between 1 and 65535"),
    ],
)
@pytest.mark.parametrize("api_key", ["", "apiKey: sk-1, "])
def test_base_urls_requests_could_never_use(base_url: str, problem: str, api_key: str) -> None:
    # credentials are refused with or without an apiKey: aiohttp would send them as Basic auth,
    # which clashes with any Authorization header, and they would show in every URL logged
    errors = errors_of(f"routes: {{m: {{provider: openai, {api_key}baseUrl: '{base_url}'}}}}")
    assert any(error.startswith("routes.m.baseUrl: ") and problem in error for error in errors), errors
    assert not any("pw@" in error for error in errors)


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ("{'x team': a}", "headers.x team: not an HTTP header name"),
        ("{'': a}", "headers.: not an HTTP header name"),
        ("{'x-a:b': a}", "not an HTTP header name"),
        ("{Content-Length: '5'}", "headers.Content-Length: the HTTP client sets it"),
        ("{transfer-encoding: chunked}", "headers.transfer-encoding: the HTTP client sets it"),
        ("{x-team: \"a\\r\\nx-injected: 1\"}", "headers.x-team: must not contain control characters"),
        ("{x-team: \"a\\0b\"}", "headers.x-team: must not contain control characters"),
        ("{x-team: \"a\\x7fb\"}", "headers.x-team: must not contain control characters"),
        ("{x-team: 智能}", "headers.x-team: must be ASCII text"),
        ("{x-team: café}", "headers.x-team: must be ASCII text"),  # an anthropic target 500'd on it (httpx)
        ("{x-team: [a]}", "headers.x-team: must be a string"),
    ],
)
def test_headers_http_cannot_carry(headers: str, problem: str) -> None:
    errors = errors_of(f"routes: {{m: {{provider: openai, apiKey: k, headers: {headers}}}}}")
    assert any(problem in error for error in errors), errors


def test_headers_http_can_carry() -> None:
    loads("routes: {m: {provider: openai, apiKey: k, headers: {Host: h.example, x-team: \"a b\\tc\", X_Y: '1', x-e: ''}}}")


@pytest.mark.parametrize("key", ["\"sk\\r\\nx-injected: 1\"", "\"sk\\x00\"", "sk-智能", "clé"])
def test_api_keys_a_header_cannot_carry(key: str) -> None:
    errors = errors_of(f"routes: {{m: {{provider: openai, apiKey: {key}}}}}")
    assert any(error.startswith("routes.m.apiKey: ") and "(it is sent in a header)" in error for error in errors), errors


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ("{blob: !!binary aGVsbG8=}", "overrideParams.blob: must be a JSON value"),
        ("{tags: !!set {a, b}}", "overrideParams.tags: must be a JSON value"),
        ("{day: 2024-01-01}", "overrideParams.day: must be a JSON value"),
        ("{seed: 123456789012345678901234567890}", "overrideParams.seed: an integer beyond 64 bits"),
        ("{temperature: .nan}", "overrideParams.temperature: must be a finite number"),
        ("{top_p: -.inf}", "overrideParams.top_p: must be a finite number"),
        ("{metadata: {1: a}}", "overrideParams.metadata: keys must be strings"),
        ("{metadata: {deep: [1, {x: !!binary aGVsbG8=}]}}", "overrideParams.metadata.deep[1].x: must be a JSON value"),
    ],
)
def test_override_params_a_json_body_cannot_carry(params: str, problem: str) -> None:
    errors = errors_of(f"routes: {{m: {{provider: mock, overrideParams: {params}}}}}")
    assert any(error.startswith("routes.m.") and problem in error for error in errors), errors


def test_override_params_a_json_body_can_carry() -> None:
    loads("routes: {m: {provider: mock, overrideParams: {seed: 18446744073709551615, n: -1, stop: [a, b], x: {y: true, z: [null]}}}}")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('routes: {"a\\nb": {provider: mock}}', "routes.'a\\nb': a route name must be printable text"),
        ('routes: {m: {provider: mock, name: "t\\r\\nx: 1"}}', "routes.m.name: must be printable text"),
        (
            'routes: {m: {strategy: {mode: fallback}, targets: [{provider: mock}, {provider: mock, name: "a\\x00"}]}}',
            "routes.m.targets[1].name: must be printable text",
        ),
    ],
)
def test_names_a_response_header_cannot_carry(text: str, problem: str) -> None:
    assert any(problem in error for error in errors_of(text)), errors_of(text)


def test_unicode_names_load() -> None:
    loads("routes: {智能: {provider: mock, name: 'tést/one'}}")


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ("{stream_options: 1}", "overrideParams.stream_options: must be a mapping, got 1"),
        ("{stream_options: [a]}", "overrideParams.stream_options: must be a mapping"),
        ("{stream_options: {include_usage: 1}}", "overrideParams.stream_options: must be a mapping whose include_usage"),
        ("{stream: 'yes'}", "overrideParams.stream: must be true or false"),
        ("{model: ''}", "overrideParams.model: must be a non-empty string"),
        ("{model: null}", "overrideParams.model: must be a non-empty string"),
        ("{messages: hello}", "overrideParams.messages: must be a non-empty list of messages"),
        ("{messages: [{content: x}]}", "overrideParams.messages: must be a non-empty list of messages"),
        ("{stop: [1]}", "overrideParams.stop: must be a string or a list of strings"),
        ("{n: true}", "overrideParams.n: must be an integer"),
        ("{temperature: hot}", "overrideParams.temperature: must be a number"),
        ("{tools: {}}", "overrideParams.tools: must be a list"),
    ],
)
def test_override_params_of_fields_the_gateway_reads_have_their_api_types(params: str, problem: str) -> None:
    # a stream_options of 1 made every streamed request to a mock target a 500 (AttributeError)
    errors = errors_of(f"routes: {{m: {{provider: mock, overrideParams: {params}}}}}")
    assert any(error.startswith("routes.m.") and problem in error for error in errors), errors


def test_override_params_of_the_api_types_load() -> None:
    loads(
        "routes: {m: {provider: mock, overrideParams: {stream_options: {include_usage: true}, stop: null, n: 2,"
        " temperature: 1, top_p: 0.5, messages: [{role: system, content: hi}], tool_choice: auto, custom: [1]}}}"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # each was a 500 or a crash: SQLite's purge overflowed, the health page's datetime too
        ("memory: {store: sqlite, ttlSeconds: 1.0e+300}\n" + MOCK, "memory.ttlSeconds: must be at most"),
        ("memory: {maxStoredMessages: 1000000000000000000000}\n" + MOCK, "memory.maxStoredMessages: must be at most"),
        ("memory: {defaults: {maxMessages: 10000000000}}\n" + MOCK, "memory.defaults.maxMessages: must be at most"),
        ("routes: {m: {provider: mock, breaker: {cooldownSeconds: 1.0e+300, maxCooldownSeconds: 1.0e+300}}}", "cooldownSeconds: must be at most"),
        ("routes: {m: {provider: mock, retry: {backoffSeconds: 1.0e+300}}}", "routes.m.retry.backoffSeconds: must be at most"),
        ("routes: {m: {provider: mock, timeout: 1.0e+300}}", "routes.m.timeout: must be at most 3.1536e+08 seconds"),
        ("server: {bodyReadTimeoutSeconds: 1.0e+20}\n" + MOCK, "server.bodyReadTimeoutSeconds: must be at most"),
    ],
)
def test_durations_and_counts_past_what_clocks_and_stores_hold(text: str, problem: str) -> None:
    assert any(problem in error for error in errors_of(text)), errors_of(text)


def test_long_durations_and_large_counts_load() -> None:
    loads("memory: {ttlSeconds: 315360000, maxStoredMessages: 1000000000}\nroutes: {m: {provider: mock, timeout: 86400}}")


@pytest.mark.parametrize("header", ['"a\\nb"', '"x a"', '"é"'])
def test_cors_allow_headers_are_header_names(header: str) -> None:
    errors = errors_of(f"cors: {{allowOrigins: ['*'], allowHeaders: [x-ok, {header}]}}\n{MOCK}")
    assert any(error.startswith("cors.allowHeaders[1]: must be '*' or a header name") for error in errors), errors


def test_a_password_with_an_unescaped_slash_is_not_quoted() -> None:
    errors = errors_of(f"memory: {{store: redis, url: 'redis://:pa/ss-word@h:6379/0'}}\n{MOCK}")
    assert errors and not any("ss-word" in error for error in errors), errors


@pytest.mark.parametrize("path", ["/m?x", "/m#x", "/{x}", "/{tail:.*}", "//m", "/a//b", "m", "/m m", "/métrics"])
def test_metrics_paths_never_matched_or_matching_everything(path: str) -> None:
    # '/{x}' served the metrics at every one-segment path, '/m?x' at none
    errors = errors_of(f"metrics: {{path: '{path}'}}\n{MOCK}")
    assert any(error.startswith("metrics.path: must be an absolute path of plain segments") for error in errors), errors


@pytest.mark.parametrize("path", ["/", "/metrics", "/internal/metrics/", "/m-1.txt"])
def test_plain_metrics_paths_load(path: str) -> None:
    loads(f"metrics: {{path: '{path}'}}\n{MOCK}")


@pytest.mark.parametrize("host", ["xn--a.com", "xn--zz", "xn--a-ecp.ru"])
def test_a_host_that_is_not_idna_is_refused_with_its_path(host: str) -> None:
    for text, path in (
        (f"routes:\n  a: {{provider: openai, baseUrl: 'http://{host}/v1'}}\n", "routes.a.baseUrl"),
        (f"cors: {{allowOrigins: ['http://{host}']}}\nroutes:\n  a: {{provider: mock}}\n", "cors.allowOrigins[0]"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse_config(text)
        assert any(error.startswith(f"{path}: ") for error in caught.value.errors), caught.value.errors


@pytest.mark.parametrize(
    "query", ["client_name=x%20y", "client_name=a%0d%0aFLUSHALL", "username=%00", "password=a%0Ab"]
)
def test_redis_text_options_the_server_would_refuse_are_refused(query: str) -> None:
    """Sent as CLIENT SETNAME / AUTH, such values fail every command: memory would be unavailable for good."""
    with pytest.raises(ConfigError) as caught:
        parse_config(f"memory: {{store: redis, url: 'redis://127.0.0.1:6379/0?{query}'}}\nroutes:\n  a: {{provider: mock}}\n")
    assert all(error.startswith("memory.url: query option") for error in caught.value.errors), caught.value.errors
