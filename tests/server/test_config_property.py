"""Property: a configuration check-config accepts never makes a well-formed request a 500.

Config trees are drawn from the schema: routes of single, fallback and loadbalance nodes nested a
few deep; openai targets on a real loopback upstream whose answer each baseUrl names (tests/support/
behaviours.py: success, 4xx, 5xx other than 500, garbage, a reset, a cut stream), on a closed port,
in odd but loadable URL forms, with `${VAR}` path tokens; anthropic targets on the same upstream
(whose OpenAI-shaped answers they cannot read); mock targets; weights, overrideParams,
retries, timeouts, headers, breakers; memory on every store (Redis real, or on a closed port);
server limits, cors, metrics, auth. Those `parse_config` accepts run as a gateway, which gets
well-formed chat completions, streamed and not, with and without a memoryId. Every answer is
anything but a 500, and every error is OpenAI-shaped; no stream carries the gateway's internal error.

Each example runs a fresh gateway and upstream on its own event loop. Found this way, and now
refused at load (tests/config/test_checks.py): an overrideParams stream_options that is not a
mapping (a mock stream's AttributeError), a non-ASCII header value on an anthropic target.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from gateway.config.loader import MAX_COUNT, MAX_SECONDS, ConfigError, parse_config
from gateway.server.app import create_app
from tests.support.behaviours import BEHAVIOURS, behaviours_app
from tests.support.gateway import GATEWAY_KEY
from tests.support.servers import free_port

PROPERTY = settings(
    max_examples=30,
    deadline=None,
    print_blob=True,  # CI keeps no example database: a failure prints what reproduces it
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ENV = {"TENANT_TOKEN": "tenant-tok-1", "UPSTREAM_KEY": "sk-env-2"}
UPSTREAM = "UPSTREAM"  # replaced by the upstream's host:port once it listens
CLOSED = "CLOSED"  # replaced by a port nothing listens on
_files = itertools.count()
LONGEST = int(MAX_SECONDS)  # for periods no request waits out: a TTL, a breaker's window and cooldown

# baseUrl forms the loader takes, some odd: case, trailing slashes, dot segments, escapes, ${VAR}
URL_FORMS = [
    "http://{host}/{b}/v1", "http://{host}/{b}/v1/", "HTTP://{host}/{b}/v1", "http://{host}/{b}//v1",
    "http://{host}/x/../{b}/v1", "http://{host}/{b}/./v1", "http://{host}/{b}/v%31", "http://{host}/{b}/vé",
    "http://{host}/{b}/${{TENANT_TOKEN}}/v1", "http://{host}/{b}/v1/${{TENANT_TOKEN:-t}}",
]  # fmt: skip
base_urls = st.one_of(
    st.builds(
        lambda form, behaviour: form.format(host=UPSTREAM, b=behaviour),
        st.sampled_from(URL_FORMS),
        st.sampled_from(BEHAVIOURS),
    ),
    st.just(f"http://127.0.0.1:{CLOSED}/v1"),
)
texts = st.sampled_from(["a", "café", "", " spaced ", "x" * 80, "${UPSTREAM_KEY}", "0", "true"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "type"]), inner, max_size=2),
    max_leaves=4,
)
# values of the right type for some field among them, so that overrides get past the loader's checks
plausible = st.sampled_from([
    "gpt-x", 0.5, 2, True, False, ["x", "y"], {"include_usage": True}, {"type": "json_object"}, {"a": "b"},
    [{"role": "system", "content": "be brief"}], [{"role": "user", "content": ""}], [], "auto",
])  # fmt: skip
OVERRIDDEN = [
    "model", "temperature", "max_tokens", "user", "metadata", "stop", "n", "stream", "stream_options",
    "response_format", "tools", "tool_choice", "messages", "seed", "logprobs",
]  # fmt: skip
override_params = st.dictionaries(st.sampled_from(OVERRIDDEN), json_values | plausible, max_size=3)
headers = st.dictionaries(
    st.sampled_from(["x-team", "X-Trace", "Accept", "User-Agent", "Content-Type", "Authorization", "Host", "Accept-Encoding"]),
    st.sampled_from(["a", "a;b=c", "", "application/json", "text/plain", "gzip", "br", "127.0.0.1", "Bearer x"]),
    max_size=3,
)
codes = st.lists(st.sampled_from([400, 404, 429, 502, 503, 504]), max_size=3, unique=True)
retry = st.fixed_dictionaries(
    {},
    optional={
        "attempts": st.integers(0, 2),
        "onStatusCodes": codes,
        "backoffSeconds": st.sampled_from([0, 0.001]),
        "maxBackoffSeconds": st.sampled_from([0, 0.01]),
        "maxRetryAfterSeconds": st.sampled_from([0, 0.01]),
    },
)
breaker = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "failures": st.integers(1, 3),
        "failureRate": st.sampled_from([0.1, 0.5, 1]),
        "minRequests": st.integers(1, 4),
        "windowSeconds": st.sampled_from([1, 30, LONGEST]),
        "cooldownSeconds": st.sampled_from([0.01, 5, LONGEST]),
        "maxCooldownSeconds": st.sampled_from([30, 300, LONGEST]),
    },
)
mock = st.fixed_dictionaries(
    {},
    optional={
        "latency": st.sampled_from([0, 0.001]),
        "reply": texts,
        "statuses": st.lists(st.sampled_from([200, 400, 404, 429, 503]), max_size=3),
        "chunkSize": st.integers(1, 20),
        "chunkDelay": st.just(0),
    },
)
# settings any node may set, inherited by the targets below it
node_settings = {
    "weight": st.sampled_from([0, 0.5, 1, 3]),
    "overrideParams": override_params,
    "headers": headers,
    "retry": retry,
    "breaker": breaker,
    "timeout": st.sampled_from([0.5, 3]),
    "streamIdleTimeout": st.sampled_from([0.5, 3]),
    "apiKey": st.sampled_from(["k", "${UPSTREAM_KEY}", "k 2", "sk-${TENANT_TOKEN:-x}"]),
    "responsesApi": st.sampled_from(["native", "translate"]),
}
# anthropic targets get OpenAI-shaped answers from the upstream: a translation that fails is a 502
openai_targets = st.fixed_dictionaries(
    {"provider": st.sampled_from(["openai", "openai", "anthropic"]), "baseUrl": base_urls}, optional=node_settings
)
mock_targets = st.fixed_dictionaries({"provider": st.just("mock")}, optional={**node_settings, "mock": mock})
strategy = st.fixed_dictionaries(
    {"mode": st.sampled_from(["single", "fallback", "loadbalance"])}, optional={"onStatusCodes": codes}
)
nodes = st.recursive(
    openai_targets | mock_targets,
    lambda children: st.fixed_dictionaries(
        {"strategy": strategy, "targets": st.lists(children, min_size=1, max_size=3)}, optional=node_settings
    ),
    max_leaves=5,
)
memory_settings = st.fixed_dictionaries(
    {},
    optional={
        "memoryType": st.sampled_from(["message_window", "token_window", "round_window"]),
        "maxMessages": st.integers(1, 30) | st.just(MAX_COUNT),
        "maxTokens": st.integers(1, 3000) | st.just(MAX_COUNT),
        "maxRounds": st.integers(1, 5) | st.just(MAX_COUNT),
        "maxChars": st.integers(1, 3000) | st.just(MAX_COUNT),
    },
)
memory_limits = st.fixed_dictionaries(
    {},
    optional={
        "maxMessages": st.integers(1, 30) | st.just(MAX_COUNT),
        "maxTokens": st.integers(1, 3000) | st.just(MAX_COUNT),
        "maxRounds": st.integers(1, 5) | st.just(MAX_COUNT),
        "maxChars": st.integers(1, 3000) | st.just(MAX_COUNT),
    },
)
routes = st.dictionaries(
    st.sampled_from(["smart", "gpt-4o", "openai/gpt-4o-mini", "cheap", "智能"]),
    nodes.map(lambda node: node) | st.builds(lambda node, memory: {**node, "memory": memory}, nodes, memory_settings),
    min_size=1,
    max_size=2,
)
documents = st.fixed_dictionaries(
    {"routes": routes},
    optional={
        "memory": st.fixed_dictionaries(
            {"store": st.sampled_from(["memory", "sqlite", "redis", "redis-closed"])},
            optional={
                "ttlSeconds": st.sampled_from([1, 3600, LONGEST]),
                "maxStoredMessages": st.integers(1, 50) | st.just(MAX_COUNT),
                "lockTimeoutSeconds": st.sampled_from([0.5, 5]),
                "defaults": memory_settings,
                "limits": memory_limits,
            },
        ),
        "server": st.fixed_dictionaries(
            {},
            optional={
                "maxBodyBytes": st.sampled_from([200, 10 * 1024 * 1024]),
                "maxResponseBytes": st.sampled_from([64, 32 * 1024 * 1024]),
                "maxMessages": st.sampled_from([1, 100]),
                "bodyReadTimeoutSeconds": st.sampled_from([5, 30]),
            },
        ),
        "cors": st.fixed_dictionaries(
            {"allowOrigins": st.sampled_from([["*"], ["https://app.example"]])},
            optional={"allowHeaders": st.sampled_from([["x-a"], ["*"]]), "maxAgeSeconds": st.just(60)},
        ),
        "breakers": st.fixed_dictionaries({"store": st.sampled_from(["local", "redis", "redis-closed"])}),
        "metrics": st.fixed_dictionaries(
            {}, optional={"enabled": st.booleans(), "streamUsage": st.booleans(), "requireAuth": st.booleans()}
        ),
        "auth": st.just({"keys": [{"name": "team-a", "key": GATEWAY_KEY}]}),
    },
)
requests = st.lists(
    st.tuples(st.booleans(), st.sampled_from([None, "conv-1", "conv-2"]), st.booleans()), min_size=1, max_size=4
)


def placed(document: dict[str, Any], upstream: str, redis_url: str, directory: Path) -> str:
    """The document as YAML, its placeholders replaced by the real upstream, Redis and files."""
    memory = document.get("memory")
    closed_redis = f"redis://127.0.0.1:{free_port()}/0"
    if memory is not None:
        store = memory["store"]
        if store.startswith("redis"):
            memory["store"], memory["url"] = "redis", closed_redis if store == "redis-closed" else redis_url
        elif store == "sqlite":
            memory["path"] = str(directory / f"memory-{next(_files)}.db")
    breakers = document.get("breakers")
    if breakers is not None and breakers["store"].startswith("redis"):
        breakers["url"] = closed_redis if breakers["store"] == "redis-closed" else redis_url
        breakers["store"] = "redis"
    text = yaml.safe_dump(document, allow_unicode=True)
    return text.replace(UPSTREAM, upstream).replace(CLOSED, str(free_port()))


def assert_openai_error(status: int, body: bytes, where: str) -> None:
    try:
        error = orjson.loads(body)["error"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        pytest.fail(f"{where}: {status} without an OpenAI error body: {body[:300]!r}")
    assert set(error) == {"message", "type", "param", "code"}, f"{where}: {error}"
    assert isinstance(error["message"], str) and isinstance(error["type"], str), f"{where}: {error}"


async def exercise(text: str, asked: list[tuple[bool, str | None, bool]]) -> None:
    """Run a gateway on `text` and send it every request of `asked`, checking each answer."""
    config = parse_config(text, env=ENV)
    server = TestServer(create_app(config))
    await server.start_server()
    try:
        names = list(config.routes)
        async with aiohttp.ClientSession(base_url=server.make_url("/")) as session:
            for index, (stream, memory_id, cors) in enumerate(asked):
                model = names[index % len(names)]
                request_headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
                if memory_id is not None:
                    request_headers["memoryId"] = memory_id
                if cors:
                    request_headers["Origin"] = "https://app.example"
                body = {"model": model, "messages": [{"role": "user", "content": f"question {index}"}], "stream": stream}
                where = f"request {index} ({model}, stream={stream}, memoryId={memory_id})"
                async with session.post("/v1/chat/completions", json=body, headers=request_headers) as response:
                    payload = await response.read()
                    assert response.status != 500, f"{where}: {payload[:500]!r}"
                    if response.status >= 400:
                        assert_openai_error(response.status, payload, where)
                    assert b"internal_error" not in payload, f"{where}: {payload[:500]!r}"
            async with session.get("/v1/gateway/health", headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as health:
                assert health.status == 200, await health.text()
    finally:
        await server.close()


async def run_example(text_of: Callable[[str], str], asked: list[tuple[bool, str | None, bool]]) -> None:
    try:
        parse_config(text_of("127.0.0.1:9"), env=ENV)
    except ConfigError:
        reject()  # check-config refuses it: not this property's concern
    upstream = TestServer(behaviours_app())
    await upstream.start_server()
    try:
        await exercise(text_of(f"127.0.0.1:{upstream.port}"), asked)
    finally:
        await upstream.close()


@PROPERTY
@given(document=documents, asked=requests)
def test_no_config_that_loads_makes_a_request_500(
    document: dict[str, Any], asked: list[tuple[bool, str | None, bool]], redis_url: str, files: Path
) -> None:
    asyncio.run(run_example(lambda upstream: placed(document, upstream, redis_url, files), asked))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where SQLite memory files go: each example names a file of its own."""
    return tmp_path_factory.mktemp("memory")
