"""A secret in a target's baseUrl path never reaches a client, a log line or a metric.

The target's baseUrl carries a token from the environment in its path (`/v1/${TENANT_TOKEN}`),
and its upstream fails every way that once put the URL into an error text: nothing listens,
its answer has a 100 KB header line, its body or stream is cut off, it echoes the path in its
own error. For each, streamed or not, the client's bytes, every log record (access lines
among them, formatted as the gateway writes them) and the /metrics exposition hold neither the
token nor the URL's path; the client's error names the target instead. A token with characters
the URL escapes (non-ASCII, reserved ones, `%`) is masked in the escaped spelling an upstream
echoes too.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web

from gateway.config.loader import parse_config
from gateway.observe.logs import JsonFormatter
from tests.support.configs import with_targets
from tests.support.fakes import FakeUpstream, Step, chunk, error_body
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.raw_upstream import (
    CUT_OFF_JSON,
    CUT_OFF_STREAM,
    OVERSIZED_HEADER,
    closed_port,
    raw_upstream,
)
from tests.support.scrape import metrics_text, root_url

TOKEN = "tnt-7f3e9a1c5b"
PATH = f"/v1/{TOKEN}"
QUESTION = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}

Upstream = Callable[[bool], AbstractAsyncContextManager[str]]  # given stream: the upstream's /v1 URL


@asynccontextmanager
async def refused(stream: bool) -> AsyncIterator[str]:
    yield f"http://127.0.0.1:{closed_port()}/v1"


@asynccontextmanager
async def oversized_header(stream: bool) -> AsyncIterator[str]:
    async with raw_upstream(OVERSIZED_HEADER) as upstream:
        yield upstream.url


@asynccontextmanager
async def cut_off(stream: bool) -> AsyncIterator[str]:
    async with raw_upstream(CUT_OFF_STREAM if stream else CUT_OFF_JSON) as upstream:
        yield upstream.url


UPSTREAMS: dict[str, Upstream] = {"refused": refused, "oversized-header": oversized_header, "cut-off": cut_off}


def config_text(base: str) -> str:
    """One route, `chat`, to target `tenant` at `base` with the token's path."""
    return textwrap.dedent(f"""
        routes:
          chat: {{name: tenant, provider: openai, baseUrl: "{base}/${{TENANT_TOKEN}}", apiKey: k}}
    """)


async def start(gateway: Gateway, base: str) -> openai.AsyncOpenAI:
    loaded = parse_config(config_text(base), {"TENANT_TOKEN": TOKEN})
    # what the loader records, set here too, so the runtime's masking is tested on its own
    return await gateway(with_targets(loaded, {"tenant": {"env_values": (TOKEN,)}}))


async def post(client: openai.AsyncOpenAI, *, stream: bool) -> tuple[int, str]:
    """POST /v1/chat/completions: the status and every byte of the answer, as text."""
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    body = {**QUESTION, "stream": stream}
    async with aiohttp.ClientSession() as session, session.post(
        root_url(client) + "/v1/chat/completions", json=body, headers=headers
    ) as response:
        return response.status, await response.text()


def hides_the_secret(text: str) -> None:
    assert TOKEN not in text and PATH not in text, text


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Callable[[], str]:
    """Every log record so far, formatted as the gateway writes them (access lines among them).

    aiohttp's access lines are left out: the gateway serves without them (`gateway serve`), and
    here they are also the fake upstream's, which sees the token as it should.
    """
    caplog.set_level(logging.DEBUG)
    formatter = JsonFormatter()
    return lambda: "\n".join(formatter.format(r) for r in caplog.records if r.name != "aiohttp.access")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("fault", list(UPSTREAMS))
async def test_a_failing_upstream_never_shows_its_urls_secret(
    gateway: Gateway, records: Callable[[], str], fault: str, stream: bool
) -> None:
    async with UPSTREAMS[fault](stream) as base:
        client = await start(gateway, base)
        status, text = await post(client, stream=stream)
        metrics = await metrics_text(client)
    assert status == 502, text
    error = orjson.loads(text)["error"]
    assert error["code"] == "upstream_unavailable" and "tenant: 502" in error["message"]
    hides_the_secret(text)
    access = [line for line in records().splitlines() if '"gateway.access"' in line]
    assert any('"status":502' in line for line in access), access
    hides_the_secret(records())
    hides_the_secret(metrics)


async def test_a_stream_cut_off_after_its_first_event_ends_without_the_secret(
    gateway: Gateway, upstream: FakeUpstream, records: Callable[[], str]
) -> None:
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "Par"})], reset=True))
    client = await start(gateway, upstream.url)
    status, text = await post(client, stream=True)
    assert status == 200 and "tenant: upstream response was cut off" in text, text
    assert upstream.requests[0].path == f"{PATH}/chat/completions"  # the token did reach the upstream
    hides_the_secret(text)
    hides_the_secret(records())
    hides_the_secret(await metrics_text(client))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_upstream_that_echoes_the_path_has_it_masked(
    gateway: Gateway, upstream: FakeUpstream, records: Callable[[], str], stream: bool
) -> None:
    upstream.then(Step(404, error_body(404, f"no route for POST {PATH}/chat/completions")))
    client = await start(gateway, upstream.url)
    status, text = await post(client, stream=stream)
    assert status == 404 and "no route for POST" in text, text
    hides_the_secret(text)
    hides_the_secret(records())
    hides_the_secret(await metrics_text(client))


ENCODED_TOKENS = ["pathSECRETdé[x]", "a+SECRET&b=c;d", "at@SECRET:c", "50%SECRET", "x%41SECRETy", "日本SECRET語", "q\"SECRET<>{|}"]


async def echo_raw_path(request: web.Request) -> web.Response:
    """Answers 404 quoting the path as it arrived, percent-escapes and all, as OpenAI's "Invalid URL" does."""
    return web.json_response(error_body(404, f"Invalid URL (POST {request.raw_path})"), status=404)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("token", ENCODED_TOKENS)
async def test_a_path_token_echoed_percent_encoded_is_masked(
    gateway: Gateway, aiohttp_server: Any, records: Callable[[], str], token: str, stream: bool
) -> None:
    """A token with characters the URL escapes comes back escaped: that spelling is masked too."""
    echo = web.Application()
    echo.router.add_post("/{tail:.*}", echo_raw_path)
    server = await aiohttp_server(echo)
    config = config_text(str(server.make_url("/v1")))
    client = await gateway(parse_config(config, {"TENANT_TOKEN": token}))
    status, text = await post(client, stream=stream)
    assert status == 404 and "Invalid URL (POST /v1/***/chat/completions)" in text, text
    assert "SECRET" not in text, text
    assert "SECRET" not in records()


def test_the_config_names_the_token_by_its_variable() -> None:
    """The loaded target knows its URL (the call needs it); only what is shown is masked."""
    loaded = parse_config(config_text("http://127.0.0.1:1/v1"), {"TENANT_TOKEN": TOKEN})
    assert loaded.routes["chat"].first_target.base_url.endswith(PATH)

