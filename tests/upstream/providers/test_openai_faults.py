"""A call that cannot be built or sent fails its attempt: the fallback answers, else a 502; never a 500.

Each case is a target whose call aiohttp (or yarl) refuses before anything reaches the network,
or whose connection fails in a way of its own: credentials in the baseUrl beside an apiKey, a
header value with a line break or a NUL, a header value that is not text, URLs yarl or aiohttp
refuse, TLS to a plain HTTP server. The loader may refuse some of these configs; the runtime
must hold without it, so the targets are changed after loading (tests/support/configs.py). Each
goes through every path that calls an upstream: chat completions passed through, the Responses
API passed through and translated, the Messages API translated and passed through (an anthropic
target), streamed or not.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from tests.support.configs import with_targets
from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY, Gateway

QUESTION = [{"role": "user", "content": "hi"}]

# What makes the target broken, given its upstream's port (so the URL is otherwise right).
BROKEN: dict[str, Callable[[int], dict[str, Any]]] = {
    "credentials-in-url-beside-api-key": lambda port: {"base_url": f"http://user:pw@127.0.0.1:{port}/v1"},
    "line-break-in-header": lambda port: {"headers": {"X-Team": "a\r\nX-Injected: 1"}},
    "nul-in-header": lambda port: {"headers": {"X-Team": "a\x00b"}},
    "header-not-text": lambda port: {"headers": {"X-Team": 5}},
    "port-out-of-range": lambda port: {"base_url": "http://127.0.0.1:99999/v1"},
    "unclosed-ipv6-bracket": lambda port: {"base_url": "http://[::1/v1"},
    "no-host": lambda port: {"base_url": "http:///v1"},
    "not-http": lambda port: {"base_url": f"ftp://127.0.0.1:{port}/v1"},
    "tls-to-plain-http": lambda port: {"base_url": f"https://127.0.0.1:{port}/v1"},
}
APIS = ("chat", "responses-native", "responses-translated", "messages-translated", "messages-native")


def config(broken: FakeUpstream, healthy: FakeUpstream, api: str, case: str) -> Config:
    """Route `fb` (the broken target, then a healthy one) and `alone` (a broken target alone)."""
    mode = "translate" if api == "responses-translated" else "native"
    broken_target = f'provider: openai, baseUrl: "{broken.url}", apiKey: k, responsesApi: {mode}'
    if api == "messages-native":  # Anthropic's own API, passed through (its baseUrl is the host's root)
        broken_target = f'provider: anthropic, baseUrl: "{broken.url.removesuffix("/v1")}", apiKey: k'
    loaded = parse_config(textwrap.dedent(f"""
        routes:
          fb:
            strategy: {{mode: fallback}}
            targets:
              - {{name: broken, {broken_target}}}
              - {{name: healthy, provider: openai, baseUrl: "{healthy.url}", apiKey: k, responsesApi: translate}}
          alone: {{name: broken-alone, {broken_target}}}
    """))
    port = int(broken.url.split(":")[2].split("/")[0])
    change = BROKEN[case](port)
    return with_targets(loaded, {"broken": change, "broken-alone": change})


async def ask(client: openai.AsyncOpenAI, api: str, route: str, *, stream: bool) -> str:
    """The answer's text from `route` through `api`; the SDK's error when it fails."""
    if api == "chat":
        if not stream:
            answer = await client.chat.completions.create(model=route, messages=QUESTION)  # type: ignore[arg-type]
            return answer.choices[0].message.content or ""
        chunks = await client.chat.completions.create(model=route, messages=QUESTION, stream=True)  # type: ignore[arg-type]
        return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
    if api.startswith("responses"):
        if not stream:
            return (await client.responses.create(model=route, input="hi")).output_text
        events = await client.responses.create(model=route, input="hi", stream=True)
        return "".join([e.delta async for e in events if e.type == "response.output_text.delta"])
    root = str(client.base_url).removesuffix("/").removesuffix("/v1")
    async with anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0, timeout=20) as sdk:
        if not stream:
            message = await sdk.messages.create(model=route, max_tokens=16, messages=QUESTION)  # type: ignore[arg-type]
            return "".join(block.text for block in message.content if block.type == "text")
        async with sdk.messages.stream(model=route, max_tokens=16, messages=QUESTION) as texts:  # type: ignore[arg-type]
            return "".join([text async for text in texts.text_stream])


# An anthropic target's key goes in x-api-key, which aiohttp sends beside a URL's credentials.
CASES = [(case, api) for case in BROKEN for api in APIS if (case, api) != ("credentials-in-url-beside-api-key", "messages-native")]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("case", "api"), CASES, ids=[f"{case}-{api}" for case, api in CASES])
async def test_a_call_that_cannot_be_made_fails_its_attempt(
    gateway: Gateway, make_upstream: Any, case: str, api: str, stream: bool
) -> None:
    broken, healthy = await make_upstream(), await make_upstream()
    client = await gateway(config(broken, healthy, api, case))
    assert await ask(client, api, "fb", stream=stream) == "Hello from upstream"  # the fallback's answer
    assert (broken.calls, healthy.calls) == (0, 1)
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as caught:
        await ask(client, api, "alone", stream=stream)
    error = caught.value
    assert isinstance(error, openai.APIStatusError | anthropic.APIStatusError)
    assert error.status_code == 502, error.response.text
    body = error.response.json()
    if api.startswith("messages"):  # the Messages API's own error shape
        assert body["type"] == "error" and body["error"]["type"] == "api_error"
        message = body["error"]["message"]
    else:
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
        assert body["error"]["code"] == "upstream_unavailable"
        message = body["error"]["message"]
    assert "broken-alone: 502" in message  # the target is named, its URL never
    assert "127.0.0.1" not in message and "/v1" not in message and "user:pw" not in message
    assert broken.calls == 0


async def test_header_values_beyond_latin_1_reach_the_upstream(gateway: Gateway, make_upstream: Any) -> None:
    """Not a failure at all: aiohttp sends them as UTF-8 (and undecodable bytes as they came)."""
    broken, healthy = await make_upstream(), await make_upstream()
    loaded = config(broken, healthy, "chat", "no-host")  # then given back a working URL
    loaded = with_targets(loaded, {"broken": {"base_url": broken.url, "headers": {"X-Team": "é€ \udcff"}}})
    client = await gateway(loaded)
    assert await ask(client, "chat", "fb", stream=False) == "Hello from upstream"
    assert (broken.calls, healthy.calls) == (1, 0)
    assert broken.requests[0].headers["X-Team"].startswith("é€")
