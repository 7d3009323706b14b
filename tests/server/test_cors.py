"""CORS: browser preflights answered before auth, CORS headers on every answer to an allowed origin."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from gateway.config.loader import parse_config
from gateway.core.settings import CorsConfig
from gateway.server.app import create_app
from gateway.server.cors import CorsPolicy, vary_on_origin
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import GATEWAY_KEY, Gateway, app_of
from tests.support.servers import require_binary

ORIGIN = "https://app.example.com"
AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}
KEYS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}"
ROUTES = "routes: {m: {provider: mock}}"
CORS_ON = f"{KEYS}\ncors: {{allowOrigins: ['{ORIGIN}/']}}\n{ROUTES}"
CORS_OFF = f"{KEYS}\n{ROUTES}"
# What Chromium sends before the openai JS SDK's first chat.completions.create in a page.
SDK_REQUEST_HEADERS = (
    "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,"
    "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
    "x-stainless-runtime-version,x-stainless-timeout"
)
SDK_PREFLIGHT = {
    "Accept": "*/*",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": SDK_REQUEST_HEADERS,
    "Origin": ORIGIN,
    "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Sec-Fetch-Mode": "cors",
    "Sec-Fetch-Site": "cross-site",
    "Sec-Fetch-Dest": "empty",
    "Referer": f"{ORIGIN}/",
    "Accept-Encoding": "gzip, deflate, br, zstd",
    "Accept-Language": "en-US,en;q=0.9",
}
EXPOSED = {
    "x-request-id", "x-gateway-route", "x-gateway-target", "x-gateway-attempts", "x-memory-id",
    "x-memory-history", "x-memory-evicted", "x-memory-summary", "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens",
    "x-ratelimit-limit-requests", "x-ratelimit-reset-tokens", "retry-after",
}
MESSAGES = [{"role": "user", "content": "hi"}]


async def call(client: openai.AsyncOpenAI, method: str, path: str, **kwargs: Any) -> tuple[int, CIMultiDict[str], bytes]:
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    async with aiohttp.ClientSession() as session, session.request(method, base + path, **kwargs) as response:
        return response.status, CIMultiDict(response.headers), await response.read()


def cors_headers(headers: CIMultiDict[str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items() if name.lower().startswith("access-control-")}


def assert_cors_answer(headers: Any) -> None:
    """The headers every answer to ORIGIN must carry so that a page can read it."""
    assert headers["access-control-allow-origin"] == ORIGIN
    assert "Origin" in headers["vary"]
    exposed = {name.strip() for name in headers["access-control-expose-headers"].split(",")}
    assert exposed >= EXPOSED


# ---------------------------------------------------------------- preflight


async def test_sdk_preflight_is_answered_without_a_key(gateway: Gateway) -> None:
    client = await gateway(CORS_ON)
    status, headers, body = await call(client, "OPTIONS", "/v1/chat/completions", headers=SDK_PREFLIGHT)
    assert status == 204, body
    assert body == b""
    assert cors_headers(headers) == {
        "access-control-allow-origin": ORIGIN,
        "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
        "access-control-allow-headers": SDK_REQUEST_HEADERS,
        "access-control-max-age": "600",
    }
    assert headers["vary"] == "Origin"


@pytest.mark.parametrize("path", ["/v1/memory/conv-1", "/v1/no-such-endpoint", "/healthz"])
async def test_preflight_is_answered_on_any_path(gateway: Gateway, path: str) -> None:
    client = await gateway(CORS_ON)
    headers = {**SDK_PREFLIGHT, "Access-Control-Request-Method": "DELETE"}
    status, got, _ = await call(client, "OPTIONS", path, headers=headers)
    assert status == 204
    assert got["access-control-allow-origin"] == ORIGIN


async def test_configured_allow_headers_and_max_age_are_sent(gateway: Gateway) -> None:
    config = f"{KEYS}\ncors: {{allowOrigins: ['*'], allowHeaders: [Authorization, Content-Type], maxAgeSeconds: 60}}\n{ROUTES}"
    client = await gateway(config)
    status, headers, _ = await call(client, "OPTIONS", "/v1/chat/completions", headers=SDK_PREFLIGHT)
    assert status == 204
    assert headers["access-control-allow-origin"] == ORIGIN  # echoed, not "*"
    assert headers["access-control-allow-headers"] == "authorization, content-type"
    assert headers["access-control-max-age"] == "60"


async def test_preflight_from_another_origin_gets_no_cors_headers(gateway: Gateway) -> None:
    client = await gateway(CORS_ON)
    headers = {**SDK_PREFLIGHT, "Origin": "https://evil.example.com", "Authorization": "Bearer wrong"}
    status, got, body = await call(client, "OPTIONS", "/v1/chat/completions", headers=headers)
    assert status == 403  # not 401: auth never ran
    assert cors_headers(got) == {}
    assert b'"code":"origin_not_allowed"' in body


async def test_without_cors_options_behaves_as_before(gateway: Gateway) -> None:
    client = await gateway(CORS_OFF)
    status, headers, body = await call(client, "OPTIONS", "/v1/chat/completions", headers=SDK_PREFLIGHT)
    assert status == 401, body
    assert cors_headers(headers) == {}
    status, headers, _ = await call(client, "OPTIONS", "/v1/chat/completions", headers={**SDK_PREFLIGHT, **AUTH})
    assert status == 405
    assert cors_headers(headers) == {} and "vary" not in headers
    app: web.Application = app_of(client)
    assert len(app.middlewares) == 1 and not app.on_response_prepare


# ---------------------------------------------------------------- actual answers


async def test_json_answer_carries_cors_headers(gateway: Gateway) -> None:
    client = await gateway(CORS_ON, default_headers={"Origin": ORIGIN})
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert_cors_answer(raw.headers)
    assert raw.parse().choices[0].message.content


async def test_stream_carries_cors_headers(gateway: Gateway) -> None:
    client = await gateway(CORS_ON, default_headers={"Origin": ORIGIN})
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, stream=True)
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert_cors_answer(raw.headers)
    assert [part async for part in raw.parse()]


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/v1/chat/completions", {"Authorization": "Bearer wrong"}, 401),
        ("/v1/chat/completions", {}, 401),
        ("/v1/nope", AUTH, 404),
        ("/nope", {}, 404),
    ],
)
async def test_errors_carry_cors_headers(gateway: Gateway, path: str, headers: dict[str, str], status: int) -> None:
    client = await gateway(CORS_ON)
    got, response_headers, body = await call(client, "POST", path, headers={**headers, "Origin": ORIGIN}, json={})
    assert got == status, body
    assert_cors_answer(response_headers)


async def test_relayed_rate_limit_headers_are_exposed(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion(), headers={"x-ratelimit-remaining": "9", "x-ratelimit-limit-requests": "10"}))
    config = f"{KEYS}\ncors: {{allowOrigins: ['{ORIGIN}']}}\nroutes: {{m: {{baseUrl: '{upstream.url}', apiKey: k}}}}"
    client = await gateway(config, default_headers={"Origin": ORIGIN})
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    exposed = [name.strip() for name in raw.headers["access-control-expose-headers"].split(",")]
    assert "x-ratelimit-remaining" in exposed  # not a name we list: added because it was relayed
    assert exposed.count("x-ratelimit-limit-requests") == 1


async def test_other_origins_and_non_browser_clients_get_no_cors_headers(gateway: Gateway) -> None:
    client = await gateway(CORS_ON)
    for headers in ({**AUTH, "Origin": "https://evil.example.com"}, AUTH):
        status, got, body = await call(client, "GET", "/v1/models", headers=headers)
        assert status == 200, body
        assert cors_headers(got) == {}
        assert got["vary"] == "Origin"  # a cache must not serve this answer to an allowed origin


# ---------------------------------------------------------------- the policy, without a server


def test_policy_normalises_configured_origins() -> None:
    policy = CorsPolicy.from_config(CorsConfig(allow_origins=("HTTPS://App.Example.com:443/", "http://127.0.0.1:8080")))
    assert policy.allows("https://app.example.com")
    assert policy.allows("http://127.0.0.1:8080")
    assert not policy.allows("http://app.example.com")
    assert not policy.allows("http://127.0.0.1:8081")
    assert not policy.allows("null")


def test_policy_star_allow_headers_echoes_the_request() -> None:
    """`*` in Allow-Headers would not cover Authorization, so it echoes what was asked for."""
    policy = CorsPolicy.from_config(CorsConfig(allow_origins=("*",), allow_headers=("*",)))
    assert policy.allows("null")
    headers = policy.preflight_headers(ORIGIN, "authorization,content-type")
    assert headers["Access-Control-Allow-Headers"] == "authorization,content-type"
    assert "Access-Control-Allow-Headers" not in policy.preflight_headers(ORIGIN, None)


@pytest.mark.parametrize(
    ("vary", "expected"),
    [(None, "Origin"), ("", "Origin"), ("Accept-Encoding", "Accept-Encoding, Origin"), ("accept, origin", "accept, origin")],
)
def test_vary_on_origin(vary: str | None, expected: str) -> None:
    assert vary_on_origin(vary) == expected


# ---------------------------------------------------------------- a real browser

PAGE = """<!doctype html>
<html><body><pre id="result">pending</pre><script>
fetch("GATEWAY/v1/chat/completions", {
  method: "POST",
  headers: {"Authorization": "Bearer KEY", "Content-Type": "application/json"},
  body: JSON.stringify({model: "m", messages: [{role: "user", content: "hello from the browser"}]}),
})
  .then((r) => r.json().then((j) => `answered ${r.status} route=${r.headers.get("x-gateway-route")} ${j.choices[0].message.content}`))
  .catch((e) => `fetch failed: ${e}`)
  .then((text) => { document.getElementById("result").textContent = text; });
</script></body></html>
"""
BROWSER_TIMEOUT = 60


async def serve_page(aiohttp_server: Any) -> tuple[TestServer, dict[str, str]]:
    """Origin A: one page whose script calls the gateway at `target["url"]`."""
    target: dict[str, str] = {}

    async def page(request: web.Request) -> web.Response:
        html = PAGE.replace("GATEWAY", target["url"]).replace("KEY", GATEWAY_KEY)
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    return await aiohttp_server(app), target


async def dump_dom(url: str, profile: Path) -> str:
    """The DOM of `url` after its script ran, as headless Chromium renders it."""
    binary = require_binary("chromium")
    process = await asyncio.create_subprocess_exec(
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--dump-dom", "--virtual-time-budget=10000", url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, so its helpers go down with it
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), BROWSER_TIMEOUT)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode()


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        ("page", 'answered 200 route=m Mock reply: received 1 messages; last user message: "hello from the browser"'),
        ("https://other.example.com", "fetch failed: TypeError: Failed to fetch"),
    ],
)
async def test_browser_page_calls_the_gateway(aiohttp_server: Any, tmp_path: Path, allowed: str, expected: str) -> None:
    require_binary("chromium")
    page_server, target = await serve_page(aiohttp_server)
    page_url = str(page_server.make_url("/"))
    origin = page_url.rstrip("/") if allowed == "page" else allowed
    config = parse_config(textwrap.dedent(f"{KEYS}\ncors: {{allowOrigins: ['{origin}']}}\n{ROUTES}"))
    gateway_server: TestServer = await aiohttp_server(create_app(config))
    target["url"] = str(gateway_server.make_url("")).rstrip("/")
    dom = await dump_dom(page_url, tmp_path / "profile")
    assert f'<pre id="result">{expected}</pre>' in dom, dom
