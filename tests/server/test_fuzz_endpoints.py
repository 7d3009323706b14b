"""Property tests through the openai SDK: the gateway never answers 5xx to drawn bodies, memory headers and x-gateway-config values.

The only upstreams an inline tree may reach are the built-in mock and a fake that always answers
200, so any 5xx is the gateway's own. Raw header bytes are fuzzed in test_fuzz.py.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import openai
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support.fakes import FakeUpstream
from tests.support.fuzzing import FUZZ, json_values, scalars
from tests.support.gateway import Gateway


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
