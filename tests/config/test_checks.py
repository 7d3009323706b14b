"""What a value of the right type may still not be (gateway.config.checks), refused at load with its dotted path.

Base URLs with credentials, a query or a fragment; header names and values HTTP cannot carry;
override params a JSON body cannot carry or OpenAI's API would refuse; names that cannot go out in a
response header; CORS entries, metrics paths and allowedHosts entries that could never match."""

from __future__ import annotations

import pytest

from gateway.config.checks import allowed_host_problem, cors_origin_problem, listed, tenant_problem
from gateway.config.loader import ConfigError, parse_config
from tests.support.config_text import MOCK, errors_of, loads


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


@pytest.mark.parametrize("header", ['"a\\nb"', '"x a"', '"é"'])
def test_cors_allow_headers_are_header_names(header: str) -> None:
    errors = errors_of(f"cors: {{allowOrigins: ['*'], allowHeaders: [x-ok, {header}]}}\n{MOCK}")
    assert any(error.startswith("cors.allowHeaders[1]: must be '*' or a header name") for error in errors), errors


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


def test_the_config_refuses_entries_that_admit_nothing() -> None:
    text = "requestConfig: {enabled: true, allowedHosts: [api.example.com, 'https://x.example', 'h.example:443']}\nroutes: {m: {provider: mock}}"
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert [error.split(":")[0] for error in caught.value.errors] == [
        "requestConfig.allowedHosts[1]",
        "requestConfig.allowedHosts[2]",
    ]



def test_list_entries_are_kept_without_trailing_slashes_and_checked_that_way() -> None:
    assert listed("https://app.example/") == "https://app.example" and listed("*") == "*"
    assert cors_origin_problem("https://app.example/") is None
    assert cors_origin_problem("https://app.example/path") is not None
    assert allowed_host_problem("API.example.com/") is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [("team-a", None), ("a.b@c_d", None), ("", "must be 1-64"), ("a:b", "must be 1-64"), ("x" * 65, "must be 1-64")],
)
def test_a_tenant_name_keeps_memory_keys_unambiguous(name: str, problem: str | None) -> None:
    found = tenant_problem(name)
    assert found is None if problem is None else (found or "").startswith(problem)
