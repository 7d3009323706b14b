"""x-gateway-config end to end: the openai SDK as client, fake upstreams on loopback.

Loopback is what the fakes listen on, so these tests also show the address rules: the fake's
host is listed in some configs and not in others.
"""

from __future__ import annotations

import textwrap
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from gateway.config.loader import parse_config
from gateway.core.settings import Config
from gateway.server.inline import INLINE_CONFIGS, INLINE_ROUTE, InlineConfigs
from tests.support.fakes import FakeUpstream, Step, error_body, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway, app_of

MESSAGES = [{"role": "user", "content": "hello"}]


def enabled(*hosts: str, routes: str = "m: {provider: mock}", extra: str = "") -> str:
    return textwrap.dedent(f"""
    requestConfig: {{enabled: true, allowedHosts: {orjson.dumps(list(hosts)).decode()}}}
    memory: {{store: memory}}
    {extra}
    routes:
      {routes}
    """)


def tree(*targets: dict[str, Any], mode: str = "fallback") -> str:
    if len(targets) == 1:
        return orjson.dumps(targets[0]).decode()
    return orjson.dumps({"strategy": {"mode": mode}, "targets": list(targets)}).decode()


def openai_target(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "baseUrl": upstream.url, **extra}


async def ask(client: openai.AsyncOpenAI, config: str, *, model: str = "m", **options: Any) -> Any:
    return await client.chat.completions.with_raw_response.create(
        model=model, messages=MESSAGES, extra_headers={"x-gateway-config": config}, **options
    )


def refused(caught: pytest.ExceptionInfo[openai.APIStatusError], code: str) -> str:
    """The error's message, once it is checked to be OpenAI-shaped and about the header."""
    body = caught.value.response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    assert (body["param"], body["code"]) == ("x-gateway-config", code), body
    return str(body["message"])


@pytest.mark.parametrize("config", ["routes: {m: {provider: mock}}", "requestConfig: {enabled: false}\nroutes: {m: {provider: mock}}"])
@pytest.mark.parametrize("value", ['{"provider": "mock"}', "m"])
async def test_the_header_is_refused_while_request_config_is_off(gateway: Gateway, config: str, value: str) -> None:
    client = await gateway(config)
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, value)
    assert "not enabled" in refused(caught, "request_config_disabled")


async def test_a_route_name_picks_that_route(gateway: Gateway, make_upstream: Any) -> None:
    a, b = await make_upstream(), await make_upstream()
    routes = f'a: {{baseUrl: "{a.url}"}}\n      b: {{baseUrl: "{b.url}"}}'
    client = await gateway(enabled(routes=routes))
    raw = await ask(client, "b", model="a")
    assert raw.headers["x-gateway-route"] == "b"
    assert (a.calls, b.calls) == (0, 1)
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, "nope", model="a")
    assert "routes: a, b" in refused(caught, "unknown_route")


async def test_a_tree_reaches_a_listed_host_with_the_clients_key(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(enabled("127.0.0.1"))
    raw = await ask(client, tree(openai_target(upstream, apiKey="sk-client", overrideParams={"model": "up"})))
    assert raw.parse().choices[0].message.content == "Hello from upstream"
    assert (raw.headers["x-gateway-route"], raw.headers["x-gateway-target"]) == (INLINE_ROUTE, "inline")
    sent = upstream.requests[0]
    assert sent.headers["Authorization"] == "Bearer sk-client"
    assert sent.body["model"] == "up"


async def test_a_tree_falls_back_and_streams(gateway: Gateway, make_upstream: Any) -> None:
    broken, good = await make_upstream(), await make_upstream()
    broken.then(Step(status=503, body=error_body(503)))
    good.then(Step(events=stream_of("Hel", "lo")))
    client = await gateway(enabled("127.0.0.1"))
    config = tree(openai_target(broken, name="first"), openai_target(good, name="second"))
    stream = await client.chat.completions.create(
        model="anything", messages=MESSAGES, stream=True, extra_headers={"x-gateway-config": config}
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "Hello"
    assert (broken.calls, good.calls) == (1, 1)


async def test_loopback_is_refused_unless_listed(gateway: Gateway, upstream: FakeUpstream) -> None:
    for hosts, reason in ((["*"], "127.0.0.1 is a loopback address"), (["api.example.com"], "is not in requestConfig.allowedHosts")):
        client = await gateway(enabled(*hosts))
        with pytest.raises(openai.BadRequestError) as caught:
            await ask(client, tree({"provider": "mock"}, openai_target(upstream)))
        message = refused(caught, "config_not_allowed")
        assert f"targets[1].baseUrl: {'host ' if 'not in' in reason else ''}" in message and reason in message
    assert upstream.calls == 0


async def test_a_listed_name_is_refused_for_a_loopback_address(gateway: Gateway, upstream: FakeUpstream) -> None:
    """The resolved addresses are checked too: `localhost` alone does not admit 127.0.0.1."""
    by_name = upstream.url.replace("127.0.0.1", "localhost")
    client = await gateway(enabled("localhost"))
    with pytest.raises(openai.BadRequestError) as caught:  # refused, not retried
        await ask(client, tree({"baseUrl": by_name, "retry": {"attempts": 2, "backoffSeconds": 0}}))
    message = refused(caught, "config_not_allowed")
    assert "inline: localhost resolves to a loopback address" in message
    assert "127.0.0.1" not in message
    assert upstream.calls == 0
    client = await gateway(enabled("localhost", "127.0.0.0/8", "::1"))
    raw = await ask(client, tree({"baseUrl": by_name}))
    assert raw.parse().choices[0].message.content == "Hello from upstream"


async def test_a_redirect_from_an_inline_target_is_not_followed(gateway: Gateway, make_upstream: Any) -> None:
    redirecting, elsewhere = await make_upstream(), await make_upstream()
    redirecting.then(Step(status=307, headers={"Location": f"{elsewhere.url}/chat/completions"}))
    client = await gateway(enabled("127.0.0.1"))
    with pytest.raises(openai.APIStatusError) as caught:
        await ask(client, tree(openai_target(redirecting)))
    assert caught.value.status_code == 502
    assert "redirects are not followed" in caught.value.message
    assert (redirecting.calls, elsewhere.calls) == (1, 0)


async def test_a_configured_target_does_not_follow_redirects(gateway: Gateway, make_upstream: Any) -> None:
    """The operator's key must not follow an upstream's redirect either (the shared session)."""
    redirecting, elsewhere = await make_upstream(), await make_upstream()
    redirecting.then(Step(status=307, headers={"Location": f"{elsewhere.url}/chat/completions"}))
    client = await gateway(f'routes: {{r: {{baseUrl: "{redirecting.url}", apiKey: sk-operator}}}}')
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="r", messages=MESSAGES)
    assert caught.value.status_code == 502 and "redirect" in caught.value.message  # never a 3xx to the client
    assert (redirecting.calls, elsewhere.calls) == (1, 0)


async def test_a_redirect_counts_as_a_failure_a_fallback_moves_on_from(gateway: Gateway, make_upstream: Any) -> None:
    redirecting, healthy = await make_upstream(), await make_upstream()
    redirecting.then(Step(status=302, headers={"Location": "http://169.254.169.254/"}))
    client = await gateway(
        f"""routes:
  r:
    strategy: {{mode: fallback, onStatusCodes: [503]}}
    targets: [{{baseUrl: "{redirecting.url}", apiKey: k}}, {{baseUrl: "{healthy.url}", apiKey: k}}]
"""
    )
    answer = await client.chat.completions.with_raw_response.create(model="r", messages=MESSAGES)
    assert answer.headers["x-gateway-attempts"] == "2" and healthy.calls == 1


async def test_operator_keys_never_reach_a_client_chosen_host(
    gateway: Gateway, make_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator, chosen = await make_upstream(), await make_upstream()
    monkeypatch.setenv("OPERATOR_KEY", "sk-operator-secret")  # in the gateway's environment, as in production
    config: Config = parse_config(
        enabled(
            "127.0.0.1",
            routes=f'smart: {{baseUrl: "{operator.url}", apiKey: "${{OPERATOR_KEY}}", headers: {{x-operator: "${{OPERATOR_HEADER}}"}}}}',
        ),
        env={"OPERATOR_KEY": "sk-operator-secret", "OPERATOR_HEADER": "operator-header-secret"},
    )
    client = await gateway(config)
    keyed = openai_target(chosen, name="keyed", apiKey="${OPERATOR_KEY}")
    bare = openai_target(chosen, name="bare")
    chosen.then(Step(status=500, body=error_body(500)))
    await ask(client, tree(keyed, bare), model="smart")  # the model names the operator's route
    assert chosen.calls == 2 and operator.calls == 0
    first, second = chosen.requests
    assert first.headers["Authorization"] == "Bearer ${OPERATOR_KEY}"  # text, never interpolated
    assert "Authorization" not in second.headers
    for received in chosen.requests:
        seen = repr(received.headers).encode() + received.raw
        for secret in (b"sk-operator-secret", b"operator-header-secret", GATEWAY_KEY.encode()):
            assert secret not in seen


async def test_an_invalid_tree_gets_every_path_qualified_error(gateway: Gateway) -> None:
    client = await gateway(enabled("127.0.0.1"))
    bad = {"strategy": {"mode": "fallback"}, "targets": [{"provider": "mock", "weight": -1}, {"provider": "mock", "timeout": "soon"}]}
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, orjson.dumps(bad).decode())
    message = refused(caught, "invalid_config")
    assert "targets[0].weight: must be >= 0, got -1" in message
    assert "targets[1].timeout: must be a number, got 'soon'" in message
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, "{not json")
    assert "not valid JSON" in refused(caught, "invalid_config")


async def test_only_openai_and_mock_targets_are_allowed(gateway: Gateway) -> None:
    client = await gateway(enabled("*"))
    anthropic = {"provider": "anthropic", "apiKey": "sk-ant", "baseUrl": "http://127.0.0.1:9"}
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, tree({"provider": "mock"}, anthropic))
    message = refused(caught, "config_not_allowed")
    assert "targets[1].provider: 'anthropic' is not allowed" in message
    raw = await ask(client, tree({"provider": "mock", "mock": {"reply": "from the client's mock"}}))
    assert raw.parse().choices[0].message.content == "from the client's mock"


async def test_what_a_tree_may_not_carry(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(enabled("127.0.0.1"))
    sneaky = openai_target(
        upstream,
        headers={"Host": "internal.example", "x-fine": "ok"},
        overrideParams={"api_base": "http://169.254.169.254"},
        apiKey="sk\r\nX-Injected: 1",
    )
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, tree(sneaky))
    message = refused(caught, "config_not_allowed")
    for problem in ("headers.Host: not a header a client may set", "overrideParams.api_base: not allowed", "apiKey: must be printable ASCII"):
        assert problem in message
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, tree(*[{"provider": "mock", "name": f"t{i}"} for i in range(17)]))
    assert "at most 16 targets" in refused(caught, "config_not_allowed")
    assert upstream.calls == 0


async def test_a_repeated_tree_is_read_once(gateway: Gateway) -> None:
    client = await gateway(enabled())
    configs: InlineConfigs = app_of(client)[INLINE_CONFIGS]
    for _ in range(3):
        await ask(client, tree({"provider": "mock"}))
    await ask(client, tree({"provider": "mock", "name": "other-text"}))
    assert configs.parses == 2 and len(configs) == 2


async def test_an_inline_tree_keeps_the_models_memory_settings(gateway: Gateway) -> None:
    routes = "m: {provider: mock, memory: {memoryType: message_window, maxMessages: 2}}"
    client = await gateway(enabled(routes=routes))
    inline = tree({"provider": "mock"})

    async def evicted(model: str, memory_id: str) -> int:
        for word in ("one", "two", "three"):
            raw = await client.chat.completions.with_raw_response.create(
                model=model,
                messages=[{"role": "user", "content": word}],
                extra_headers={"x-gateway-config": inline, "memoryId": memory_id},
            )
        return int(raw.headers["x-memory-evicted"])

    assert await evicted("m", "conv-1") > 0  # the route's window of 2 messages
    assert await evicted("not-a-route", "conv-2") == 0  # the config's default window of 20


async def test_a_malformed_base_url_is_a_400(gateway: Gateway) -> None:
    client = await gateway(enabled("*"))
    for url in ("http://api.example.com:99999/v1", "http://[::1/v1"):
        with pytest.raises(openai.BadRequestError) as caught:
            await ask(client, tree({"baseUrl": url}))
        assert "baseUrl: must be an http(s) URL" in refused(caught, "invalid_config")


async def test_the_header_given_twice_is_refused(gateway: Gateway, aiohttp_client: Any) -> None:
    client = await gateway(enabled())
    async with aiohttp.ClientSession() as session:
        headers = [("x-gateway-config", "m"), ("x-gateway-config", "m"), ("Authorization", f"Bearer {GATEWAY_KEY}")]
        async with session.post(f"{client.base_url}chat/completions", json={"model": "m", "messages": MESSAGES}, headers=headers) as answer:
            assert answer.status == 400
            assert (await answer.json())["error"]["param"] == "x-gateway-config"




@pytest.mark.parametrize("host", ["xn--a.com", "xn--zz", "xn--a-ecp.ru"])
async def test_a_tree_whose_host_is_not_idna_is_an_invalid_config_not_a_500(gateway: Gateway, host: str) -> None:
    """yarl decodes a punycode label only when its host is read, and raises UnicodeError there."""
    client = await gateway(enabled(host))
    with pytest.raises(openai.BadRequestError) as caught:
        await ask(client, tree({"provider": "openai", "baseUrl": f"http://{host}/v1"}))
    assert "baseUrl" in refused(caught, "invalid_config")
