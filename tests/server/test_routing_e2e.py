"""Routing end to end: the openai SDK as client, real aiohttp fake upstreams on loopback."""

from __future__ import annotations

import openai
import orjson
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, error_body
from tests.support.gateway import GATEWAY_KEY, Gateway

MESSAGES = [{"role": "user", "content": "hello"}]


def fallback_config(first: FakeUpstream, second: FakeUpstream, *, codes: str = "", extra: str = "") -> str:
    on = f", onStatusCodes: [{codes}]" if codes else ""
    return f"""
    routes:
      chat:
        strategy: {{mode: fallback{on}}}
        targets:
          - {{name: first, provider: openai, baseUrl: "{first.url}", apiKey: sk-first{extra}}}
          - {{name: second, provider: openai, baseUrl: "{second.url}", apiKey: sk-second}}
    """


async def test_non_stream_passes_the_answer_through(gateway: Gateway, upstream: FakeUpstream) -> None:
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: sk-up}}}}')
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=MESSAGES, extra_headers={"x-request-id": "req-123"}
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from upstream"
    assert raw.headers["x-request-id"] == "req-123"
    assert raw.headers["x-gateway-route"] == "chat"
    assert raw.headers["x-gateway-target"] == "chat"
    assert raw.headers["x-gateway-attempts"] == "1"
    assert upstream.requests[0].path == "/v1/chat/completions"
    assert upstream.requests[0].body == {"model": "chat", "messages": MESSAGES}


async def test_fallback_on_429(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=429, body=error_body(429)))
    client = await gateway(fallback_config(first, second, codes="429"))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == "Hello from upstream"
    assert raw.headers["x-gateway-target"] == "second"
    assert raw.headers["x-gateway-attempts"] == "2"
    assert (first.calls, second.calls) == (1, 1)


async def test_no_fallback_on_400_when_codes_are_429(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=400, body=error_body(400, "context too long")))
    client = await gateway(fallback_config(first, second, codes="429"))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert "first: 400 context too long" in caught.value.message
    assert caught.value.code == "e400"
    assert second.calls == 0


async def test_without_on_status_codes_any_error_moves_on_and_an_empty_list_none(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=500, body=error_body(500)), Step(status=500, body=error_body(500)))
    moving = await gateway(fallback_config(first, second))
    raw = await moving.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "second"
    staying = await gateway(fallback_config(first, second).replace("mode: fallback", "mode: fallback, onStatusCodes: []"))
    with pytest.raises(openai.InternalServerError):  # the first target's own answer, not a fallback
        await staying.chat.completions.create(model="chat", messages=MESSAGES)
    assert (first.calls, second.calls) == (2, 1)


async def test_everything_failed_lists_every_attempt(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=503, body=error_body(503, "overloaded")))
    second.then(Step(status=429, body=error_body(429, "slow down"), headers={"retry-after": "7"}))
    client = await gateway(fallback_config(first, second))
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    error = caught.value
    assert error.status_code == 429
    assert "All 2 upstream attempts failed" in error.message
    assert "first: 503 overloaded" in error.message and "second: 429 slow down" in error.message
    assert error.response.headers["x-should-retry"] == "false"
    assert error.response.headers["retry-after"] == "7"
    assert error.response.headers["x-gateway-attempts"] == "2"
    assert error.body == {
        "message": "All 2 upstream attempts failed: first: 503 overloaded; second: 429 slow down",
        "type": "upstream_test",
        "param": None,
        "code": "e429",
    }


async def test_transport_failure_falls_back_then_502(gateway: Gateway, make_upstream) -> None:
    second = await make_upstream()
    second.then(Step(reset=True))
    config = f"""
    routes:
      chat:
        strategy: {{mode: fallback, onStatusCodes: [429]}}
        targets:
          - {{name: closed, provider: openai, baseUrl: "http://127.0.0.1:1/v1", apiKey: k}}
          - {{name: resets, provider: openai, baseUrl: "{second.url}", apiKey: k}}
    """
    client = await gateway(config)
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert "closed: 502 cannot connect" in caught.value.message
    assert "resets: 502 upstream" in caught.value.message


async def test_malformed_upstream_answer_falls_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=200, body=b"<html>not json</html>", content_type="text/html"))
    client = await gateway(fallback_config(first, second, codes="429"))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "second"


async def test_timeout_falls_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(delay=3, body=chat_completion("too late")))
    client = await gateway(fallback_config(first, second, codes="429", extra=", timeout: 0.3"))
    completion = await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert completion.choices[0].message.content == "Hello from upstream"  # not "too late": first was given up


async def test_everything_timed_out_is_504(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(delay=3))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, timeout: 0.2}}}}')
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert caught.value.status_code == 504
    assert "timed out after 0.2s" in caught.value.message
    assert caught.value.code == "upstream_timeout"


async def test_retries_on_the_same_target_before_falling_back(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=503, body=error_body(503)), Step(status=503, body=error_body(503)))
    retry = ", retry: {attempts: 2, onStatusCodes: [503], backoffSeconds: 0.01}"
    client = await gateway(fallback_config(first, second, codes="429", extra=retry))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "first"
    assert raw.headers["x-gateway-attempts"] == "3"
    assert (first.calls, second.calls) == (3, 0)


async def test_retry_after_is_honoured(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(status=429, body=error_body(429), headers={"retry-after-ms": "400"}))
    client = await gateway(
        f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, retry: {{attempts: 1, backoffSeconds: 0}}}}}}'
    )
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    first, second = upstream.requests
    assert second.at - first.at >= 0.38


async def test_retry_after_above_the_limit_gives_up_the_target(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=429, body=error_body(429), headers={"retry-after": "120"}))
    # a gateway that waited even the limit (60 s) would outlast the client's 20 s timeout
    retry = ", retry: {attempts: 3, maxRetryAfterSeconds: 60}"
    client = await gateway(fallback_config(first, second, codes="429", extra=retry))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "second"
    assert first.calls == 1


@pytest.mark.parametrize(
    "headers",
    [{"retry-after": "nan"}, {"retry-after-ms": "nan"}, {"retry-after": "inf"}, {"retry-after-ms": "-inf"},
     {"retry-after": "-3"}, {"retry-after": "1e400"}],
    ids=lambda h: "=".join(*h.items()),
)
async def test_nonsense_retry_after_is_ignored_and_fallback_still_works(
    gateway: Gateway, make_upstream, headers: dict[str, str]
) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(*[Step(status=429, body=error_body(429), headers=headers)] * 2)
    retry = ", retry: {attempts: 1, backoffSeconds: 0.01}"
    client = await gateway(fallback_config(first, second, codes="429", extra=retry))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-gateway-target"] == "second" and first.calls == 2  # retried as if no Retry-After


async def test_override_params_reach_the_upstream(gateway: Gateway, upstream: FakeUpstream) -> None:
    config = f"""
    routes:
      smart:
        strategy: {{mode: single}}
        overrideParams: {{temperature: 0.9, max_tokens: 50}}
        targets:
          - {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, overrideParams: {{model: real-model, temperature: 0.2}}}}
    """
    client = await gateway(config)
    await client.chat.completions.create(model="smart", messages=MESSAGES, temperature=1.5, top_p=0.5)
    body = upstream.requests[0].body
    assert body["model"] == "real-model"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50
    assert body["top_p"] == 0.5


async def test_clients_key_never_reaches_the_upstream(gateway: Gateway, make_upstream) -> None:
    keyed, keyless = await make_upstream(), await make_upstream()
    config = f"""
    auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
    routes:
      keyed: {{provider: openai, baseUrl: "{keyed.url}", apiKey: sk-provider, headers: {{x-extra: "yes"}}}}
      keyless: {{provider: openai, baseUrl: "{keyless.url}", apiKey: ""}}
    """
    client = await gateway(config)
    await client.chat.completions.create(model="keyed", messages=MESSAGES)
    await client.chat.completions.create(model="keyless", messages=MESSAGES)
    sent = keyed.requests[0].headers
    assert sent["Authorization"] == "Bearer sk-provider"
    assert sent["x-extra"] == "yes"
    assert "Authorization" not in keyless.requests[0].headers
    for request in (*keyed.requests, *keyless.requests):
        assert GATEWAY_KEY not in repr(request.headers) and GATEWAY_KEY not in repr(request.body)


async def test_provider_key_never_appears_in_errors(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(status=401, body=error_body(401, "Incorrect API key provided: sk-secret-provider-key")))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: sk-secret-provider-key}}}}')
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert "sk-secret-provider-key" not in caught.value.response.text
    assert "***" in caught.value.message


async def test_secret_header_values_never_appear_in_errors(gateway: Gateway, upstream: FakeUpstream) -> None:
    """An Azure-style `api-key` header echoed back by the upstream is masked, in JSON and stream errors."""
    echoed = "Access denied for key azure-secret-0123456789 on deployment"
    upstream.then(
        Step(status=401, body=error_body(401, echoed)),
        Step(events=[chunk({"role": "assistant", "content": "a"}), b"data: " + orjson.dumps(error_body(500, echoed)) + b"\n\n"]),
    )
    client = await gateway(f"""
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: "", headers: {{api-key: azure-secret-0123456789}}}}
""")
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.chat.completions.create(model="chat", messages=MESSAGES)
    assert "azure-secret-0123456789" not in caught.value.response.text and "***" in caught.value.message
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError) as raised:
        async for _ in stream:
            pass
    assert "azure-secret-0123456789" not in str(raised.value) and "key *** on deployment" in str(raised.value)


async def test_rate_limit_headers_pass_through(gateway: Gateway, upstream: FakeUpstream) -> None:
    upstream.then(Step(body=chat_completion(), headers={"x-ratelimit-remaining-requests": "42", "x-secret": "no"}))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-ratelimit-remaining-requests"] == "42"
    assert "x-secret" not in raw.headers


async def test_completions_and_embeddings_are_routed(gateway: Gateway, make_upstream) -> None:
    first, second = await make_upstream(), await make_upstream()
    first.then(Step(status=503, body=error_body(503)), Step(status=503, body=error_body(503)))
    second.then(
        Step(body={"id": "c", "object": "text_completion", "created": 1, "model": "m",
                   "choices": [{"index": 0, "text": "done", "finish_reason": "stop", "logprobs": None}]}),
        Step(body={"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0, "embedding": [0.5]}],
                   "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
    )
    client = await gateway(fallback_config(first, second))
    completion = await client.completions.create(model="chat", prompt="say done")
    assert completion.choices[0].text == "done"
    embedding = await client.embeddings.create(model="chat", input="x", encoding_format="float")
    assert embedding.data[0].embedding == [0.5]
    assert [r.path for r in second.requests] == ["/v1/completions", "/v1/embeddings"]


async def test_mock_provider_scripted_statuses(gateway: Gateway) -> None:
    client = await gateway(
        """
        routes:
          m:
            strategy: {mode: fallback}
            targets:
              - {name: flaky, provider: mock, mock: {statuses: [500]}}
              - {name: steady, provider: mock, mock: {reply: fixed answer}}
        """
    )
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert raw.parse().choices[0].message.content == "fixed answer"
    raw = await client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "quote me"}]
    )
    assert raw.parse().choices[0].message.content == 'Mock reply: received 2 messages; last user message: "quote me"'


async def test_weighted_loadbalance_spreads_requests(gateway: Gateway, make_upstream) -> None:
    heavy, light = await make_upstream(), await make_upstream()
    client = await gateway(f"""
routes:
  lb:
    strategy: {{mode: loadbalance}}
    targets:
      - {{name: heavy, provider: openai, baseUrl: "{heavy.url}", apiKey: k, weight: 3}}
      - {{name: light, provider: openai, baseUrl: "{light.url}", apiKey: k, weight: 1}}
""", seed=11)
    for _ in range(80):
        await client.chat.completions.create(model="lb", messages=MESSAGES)
    assert heavy.calls + light.calls == 80
    assert 45 <= heavy.calls <= 75  # ~60 expected; a fixed seed keeps this deterministic


async def test_fallback_over_a_nested_loadbalance(gateway: Gateway, make_upstream) -> None:
    main, sub_a, sub_b = await make_upstream(), await make_upstream(), await make_upstream()
    main.then(Step(status=429, body=error_body(429)))
    sub_a.then(Step(status=503, body=error_body(503)))
    sub_b.then(Step(status=503, body=error_body(503)))
    client = await gateway(f"""
routes:
  combo:
    strategy: {{mode: fallback, onStatusCodes: [429, 503]}}
    targets:
      - {{name: main, provider: openai, baseUrl: "{main.url}", apiKey: k}}
      - strategy: {{mode: loadbalance, onStatusCodes: [503]}}
        targets:
          - {{name: sub-a, provider: openai, baseUrl: "{sub_a.url}", apiKey: k}}
          - {{name: sub-b, provider: openai, baseUrl: "{sub_b.url}", apiKey: k}}
""")
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model="combo", messages=MESSAGES)
    # main, then both loadbalance children (re-picked on 503), and the subtree's last 503 is final
    assert caught.value.status_code == 503
    assert (main.calls, sub_a.calls, sub_b.calls) == (1, 1, 1)
    assert caught.value.response.headers["x-gateway-attempts"] == "3"
