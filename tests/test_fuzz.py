"""Property tests: the config loader and x-gateway-config never crash, and the gateway never answers 5xx to bad input.

Documents are drawn both as raw text and shaped like a config (real keys, hostile values), so
examples get past the first check. Through a real gateway, bodies, memory headers and
x-gateway-config values are drawn the same way; the only upstreams an inline tree may reach are
the built-in mock and a fake that always answers 200, so any 5xx is the gateway's own.
"""

from __future__ import annotations

import json
import re
import string
import textwrap
from typing import Any

import openai
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.config.loader import ConfigError, parse_config, read_inline_route
from gateway.core.errors import InvalidRequestError
from gateway.core.hosts import HostPolicy
from gateway.core.memory.settings import MemorySettings
from gateway.core.settings import Config
from gateway.server.inline import read_tree
from tests.support.fakes import FakeUpstream
from tests.support.gateway import Gateway

FUZZ = settings(
    max_examples=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAMES = st.builds(
    str.__add__, st.sampled_from(string.ascii_letters), st.text(string.ascii_letters + string.digits + "_", max_size=7)
)
# path ": " message, where a path is dotted names with [i] indexes (or the two whole-document cases)
PATH_QUALIFIED = re.compile(r"(top level|invalid YAML|[\w$-]+(\[\d+\])*(\.[\w$-]+(\[\d+\])*)*): \S")

HOSTILE = st.sampled_from(
    [
        "openai", "mock", "anthropic", "bedrock", "fallback", "loadbalance", "single", "native",
        "http://h:99999/v1", "http://[::1/v1", "ftp://x", "https://api.example.com/v1", "http://127.0.0.1:1/v1",
        "${UNSET}", "${X:-7}", "", " ", "é", "\u0000", -1, 0, 0.5, 1, 600, 10**400, -(10**400), 1e308,
        True, None, [], {}, [429, 500], [99, 600], ["x"],
    ]
)  # fmt: skip
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | HOSTILE
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3), max_leaves=6
)

SECTION_KEYS = {
    "strategy": ["mode", "onStatusCodes", "on_status_codes"],
    "retry": ["attempts", "onStatusCodes", "backoffSeconds", "maxBackoffSeconds", "maxRetryAfterSeconds"],
    "breaker": ["enabled", "failures", "failureRate", "minRequests", "windowSeconds", "cooldownSeconds"],
    "mock": ["latency", "reply", "statuses", "chunkSize", "chunkDelay"],
    "memory": ["memoryType", "maxMessages", "maxTokens", "maxRounds", "maxChars"],
    "providerParams": ["awsRegionName", "apiVersion", "vertexProject", "aws_region_name", "region"],
    "headers": ["x-a", "authorization", "Host"],
    "overrideParams": ["model", "temperature", "api_base"],
}
LEAF_KEYS = ["provider", "apiKey", "api_key", "baseUrl", "base_url", "name", "weight", "timeout", "streamIdleTimeout", "responsesApi"]


def sections(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys) | NAMES, json_values, max_size=4)


section_values = st.one_of(*(sections(keys) for keys in SECTION_KEYS.values()))
base_nodes = st.dictionaries(st.sampled_from([*LEAF_KEYS, *SECTION_KEYS]) | NAMES, json_values | section_values, max_size=5)
nodes = st.recursive(
    base_nodes,
    lambda inner: st.builds(lambda node, children: {**node, "targets": children}, base_nodes, st.lists(inner, max_size=3)),
    max_leaves=4,
)
TOP_SECTIONS = {
    "server": ["host", "port", "maxBodyBytes", "maxResponseBytes", "bodyReadTimeoutSeconds", "backlog", "drainSeconds"],
    "cors": ["allowOrigins", "allowHeaders", "maxAgeSeconds"],
    "metrics": ["enabled", "path", "requireAuth", "streamUsage"],
    "breakers": ["store", "url"],
    "requestConfig": ["enabled", "allowedHosts"],
    "auth": ["keys"],
    "memory": ["store", "path", "url", "ttlSeconds", "defaults", "limits", "lockTimeoutSeconds"],
}
documents = st.fixed_dictionaries(
    {},
    optional={
        "routes": st.dictionaries(NAMES | st.just("other"), nodes | json_values, max_size=3) | json_values,
        "defaultRoute": NAMES | json_values,
        **{name: sections(keys) | json_values for name, keys in TOP_SECTIONS.items()},
    },
)


def assert_only_path_qualified(load: Any) -> Any:
    try:
        return load()
    except ConfigError as exc:
        assert exc.errors
        for error in exc.errors:
            assert PATH_QUALIFIED.match(error), error
        return None


@FUZZ
@given(text=st.text(max_size=200))
@example(text="{a: " * 2000 + "1" + "}" * 2000)  # nesting deeper than the YAML reader recurses
def test_any_text_is_a_config_or_a_config_error(text: str) -> None:
    try:
        parse_config(text, env={})
    except ConfigError as exc:
        assert exc.errors


@FUZZ
@given(document=documents)
@example(document={"routes": {"r": {"baseUrl": "http://h:99999/v1"}}})  # yarl refuses the port
@example(document={"routes": {"r": {"provider": "mock", "timeout": 10**400}}})  # beyond a float
@example(document={"routes": {"r": {"provider": "mock", "retry": {"attempts": 10**400}}}})
def test_config_shaped_documents_fail_only_with_path_qualified_errors(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    config = assert_only_path_qualified(lambda: parse_config(text, env={}))
    assert config is None or isinstance(config, Config)


@FUZZ
@given(data=nodes | json_values)
@example(data={"baseUrl": "http://[::1/v1"})
def test_any_json_value_is_an_inline_route_or_a_config_error(data: Any) -> None:
    assert_only_path_qualified(lambda: read_inline_route(data, name="inline", memory=MemorySettings()))


@FUZZ
@given(text=st.text(max_size=300) | (nodes | json_values).map(json.dumps))
@example(text='{"baseUrl": "http://h:99999/v1"}')
def test_any_header_text_is_a_tree_or_a_400(text: str) -> None:
    try:
        read_tree(text, HostPolicy.parse(["127.0.0.1", "*"]))
    except InvalidRequestError as exc:
        assert exc.status == 400 and exc.param == "x-gateway-config"


def gateway_config(upstream: FakeUpstream) -> str:
    return textwrap.dedent(f"""
    requestConfig: {{enabled: true, allowedHosts: [127.0.0.1, localhost]}}
    memory: {{store: memory, limits: {{maxMessages: 50, maxTokens: 5000, maxRounds: 10, maxChars: 5000}}}}
    routes:
      m: {{provider: mock}}
      up: {{baseUrl: "{upstream.url}"}}
    """)


UPSTREAM = "http://upstream.invalid/v1"  # replaced by the fake upstream's URL


def trees() -> st.SearchStrategy[Any]:
    """Trees whose reachable upstreams all answer (mock, the fake); anything else must be refused."""
    target = st.fixed_dictionaries(
        {"provider": st.sampled_from(["mock", "openai", "anthropic"])},
        optional={
            "baseUrl": st.sampled_from([UPSTREAM, "http://10.0.0.1/v1", "http://localhost:9/v1", "http://[::1]:9/v1", "http://h:99999/v1"]),
            "apiKey": st.text(max_size=8),
            "name": st.text(max_size=8),
            "weight": st.sampled_from([0, 1, -1, 0.5]),
            "headers": st.dictionaries(st.sampled_from(["x-a", "Host", "a b"]), st.text(max_size=5), max_size=2),
            "overrideParams": st.dictionaries(st.sampled_from(["model", "api_base", "temperature"]), scalars, max_size=2),
            "retry": st.fixed_dictionaries({"attempts": st.sampled_from([0, 1, 11])}),
            "unknown": scalars,
        },
    )
    return st.recursive(
        target,
        lambda inner: st.fixed_dictionaries(
            {
                "strategy": st.fixed_dictionaries({"mode": st.sampled_from(["single", "fallback", "loadbalance", "x"])}),
                "targets": st.lists(inner, max_size=3),
            }
        ),
        max_leaves=6,
    )


def header_text(value: str) -> str:
    """What the SDK can send in a header: printable ASCII, no surrounding spaces (h11 refuses them)."""
    return "".join(c for c in value if c.isprintable() and c.isascii()).strip()


async def assert_no_server_error(client: openai.AsyncOpenAI, body: Any, headers: dict[str, str]) -> None:
    try:
        await client.post("/chat/completions", cast_to=object, body=body, options={"headers": headers})
    except openai.APIStatusError as exc:
        assert exc.status_code < 500, (exc.status_code, exc.message, body, headers)
        error = exc.response.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}


MEMORY_HEADERS = ["memoryId", "memoryType", "maxMessages", "maxTokens", "x-memory-id", "x-memory-max-rounds", "x-memory-max-chars"]
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": st.text(max_size=20)}), min_size=1, max_size=3)
bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["m", "up", "nope"]) | json_values, "messages": messages | json_values},
    optional={"stream": st.booleans() | json_values, "api_base": json_values, "extra_body": json_values, "temperature": json_values},
)


@pytest.fixture
async def fuzzed(gateway: Gateway, upstream: FakeUpstream) -> tuple[openai.AsyncOpenAI, FakeUpstream]:
    """One gateway for every example of a test."""
    return await gateway(gateway_config(upstream)), upstream


CONFIGS = (
    trees().map(json.dumps)
    | st.sampled_from(["m", "up", "nope", "{", "[]", "null", '{"baseUrl": "http://h:99999/v1"}'])
    | st.text(max_size=20)
)


@FUZZ
@given(
    body=bodies | json_values,
    memory=st.dictionaries(st.sampled_from(MEMORY_HEADERS), st.text(max_size=12).map(header_text), max_size=3),
    config=st.none() | CONFIGS.map(header_text),
)
@example(body={"model": "m", "messages": [{"role": "user", "content": "hi"}]}, memory={}, config='{"baseUrl": "http://h:99999/v1"}')
async def test_bodies_headers_and_configs_never_get_a_server_error(
    fuzzed: tuple[openai.AsyncOpenAI, FakeUpstream], body: Any, memory: dict[str, str], config: str | None
) -> None:
    client, upstream = fuzzed
    headers = {**memory, **({"x-gateway-config": config.replace(UPSTREAM, upstream.url)} if config is not None else {})}
    await assert_no_server_error(client, body, headers)


ENDPOINTS = [
    "/responses", "/messages", "/messages/count_tokens", "/completions", "/embeddings",
    "/images/generations", "/audio/speech", "/moderations", "/rerank",
]  # fmt: skip
FIELDS = ["model", "input", "messages", "prompt", "max_tokens", "stream", "previous_response_id", "tools",
          "tool_choice", "system", "instructions", "voice", "query", "documents", "store", "text"]  # fmt: skip
other_bodies = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6).map(
    lambda body: {"model": "m", **body} if "model" not in body else body
)


@FUZZ
@given(path=st.sampled_from(ENDPOINTS), body=other_bodies | json_values, memory=st.dictionaries(
    st.sampled_from(MEMORY_HEADERS), st.text(max_size=12).map(header_text), max_size=2))
async def test_every_model_endpoint_answers_any_body_without_a_server_error(
    fuzzed: tuple[openai.AsyncOpenAI, FakeUpstream], path: str, body: Any, memory: dict[str, str]
) -> None:
    client, _ = fuzzed
    try:
        await client.post(path, cast_to=object, body=body, options={"headers": memory})
    except openai.APIStatusError as exc:
        assert exc.status_code < 500, (exc.status_code, exc.message, path, body, memory)
        error = exc.response.json()["error"]
        assert set(error) >= ({"type", "message"} if path.startswith("/messages") else {"message", "type", "param", "code"})
