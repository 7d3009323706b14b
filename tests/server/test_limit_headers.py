"""A limited key's x-ratelimit-* on every answer (gateway.server.limit_headers), the upstream's renamed x-upstream-ratelimit-*.

They are added where x-request-id is: by the gateway middleware to an answer its handler returned
(a JSON answer, an error), and by the relays to a stream they start (an event stream, speech
audio), before its headers go out. With a recording governor (tests/support/governors); the
limits themselves are tests/governance's.
"""

from __future__ import annotations

from collections.abc import Mapping

import openai
import pytest
from multidict import CIMultiDict
from openai.types.chat import ChatCompletionMessageParam

from gateway.core.errors import InvalidRequestError
from gateway.core.ratelimit_headers import quota_headers
from gateway.governance.admission import Admission
from gateway.server import handlers, limit_headers
from gateway.server.keys import ADMISSION
from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.gateway import KEYS, Gateway
from tests.support.governors import REQUESTS, TOKENS, Recorder, recorder

__all__ = ["recorder"]  # the fixture

UPSTREAM_LIMITS = {"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999"}
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello there"}]
AUDIO = b"ID3" + bytes(range(256)) * 4


def config(upstream: FakeUpstream) -> str:
    target = f'{{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key}}'
    return f"""
{KEYS}
routes:
  chat: {target}
  tts: {target}
"""


def quotas_shown(headers: Mapping[str, str]) -> bool:
    """Whether `headers` show the recorder's quotas and the upstream's limits renamed, not under their own names."""
    return (
        all(headers.get(name) == value for name, value in quota_headers(REQUESTS, TOKENS).items())
        and headers.get("x-upstream-ratelimit-limit-requests") == "10000"
        and headers.get("x-upstream-ratelimit-remaining-requests") == "9999"
    )


def test_an_admission_s_quotas_are_added_and_the_upstream_s_renamed() -> None:
    headers = CIMultiDict({"Content-Type": "application/json", "X-RateLimit-Limit-Requests": "10000"})
    headers.add("x-ratelimit-limit-requests", "20000")  # twice: both kept, renamed
    limit_headers.add_quota_headers({ADMISSION: Admission("a", "chat", 1, requests=REQUESTS)}, headers)
    assert headers.getall("x-upstream-ratelimit-limit-requests") == ["10000", "20000"]
    assert headers.getall("x-ratelimit-limit-requests") == ["60"]  # the key's alone
    assert "x-ratelimit-limit-tokens" not in headers  # the key's tokens are not limited


@pytest.mark.parametrize("state", [{}, {ADMISSION: Admission("a", "chat", 1)}], ids=["not admitted", "no quota"])
def test_an_answer_without_quotas_keeps_its_headers(state: dict[object, object]) -> None:
    headers = CIMultiDict({"x-ratelimit-limit-requests": "10000"})
    limit_headers.add_quota_headers(state, headers)  # type: ignore[arg-type]
    assert list(headers.items()) == [("x-ratelimit-limit-requests", "10000")]


def test_the_upstream_s_rate_limit_names_are_found_after_answers_without_any() -> None:
    plain = ["Content-Type", "x-request-id"]
    assert limit_headers.rate_limit_names(plain) == []
    assert limit_headers.OTHER_NAMES.issuperset(plain)  # remembered: the next such answer is passed over
    assert limit_headers.rate_limit_names(plain) == []
    relayed = [*plain, "x-ratelimit-limit-requests", "X-RateLimit-Reset-Tokens", "x-ratelimit-limit-requests"]
    assert limit_headers.rate_limit_names(relayed) == ["x-ratelimit-limit-requests", "X-RateLimit-Reset-Tokens"]
    assert not limit_headers.OTHER_NAMES & {"x-ratelimit-limit-requests", "X-RateLimit-Reset-Tokens"}


async def test_a_stream_carries_them_from_its_first_byte(gateway: Gateway, upstream: FakeUpstream, recorder: Recorder) -> None:
    upstream.default = Step(events=stream_of("Hi there"), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream))
    async with client.chat.completions.with_streaming_response.create(model="chat", messages=HELLO, stream=True) as raw:
        assert quotas_shown(raw.headers)
        assert "Hi" in await raw.text()


async def test_speech_relayed_as_it_arrives_carries_them(gateway: Gateway, upstream: FakeUpstream, recorder: Recorder) -> None:
    upstream.default = Step(events=[AUDIO], events_type="audio/mpeg", headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream))
    async with client.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as raw:
        assert quotas_shown(raw.headers)
        assert await raw.read() == AUDIO


async def test_an_upstream_s_error_answer_carries_them(gateway: Gateway, upstream: FakeUpstream, recorder: Recorder) -> None:
    upstream.default = Step(status=429, body={"error": {"message": "slow down", "type": "requests"}}, headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream))
    with pytest.raises(openai.RateLimitError) as caught:
        await client.with_options(max_retries=0).chat.completions.create(model="chat", messages=HELLO)
    assert quotas_shown(caught.value.response.headers)


async def test_a_json_answer_carries_them_once(gateway: Gateway, upstream: FakeUpstream, recorder: Recorder) -> None:
    upstream.default = Step(body=chat_completion(), headers=UPSTREAM_LIMITS)
    client = await gateway(config(upstream))
    raw = await client.chat.completions.with_raw_response.create(model="chat", messages=HELLO)
    assert quotas_shown(raw.headers)
    assert raw.headers.get_list("x-ratelimit-limit-requests") == ["60"]


async def test_an_error_that_closes_the_connection_carries_them(
    gateway: Gateway, upstream: FakeUpstream, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Such an error is sent before the middleware's usual step (none is raised after admission today but may be)."""

    def closing(*args: object) -> None:
        raise InvalidRequestError("Too many messages.", code="invalid_body", headers={"Connection": "close"})

    monkeypatch.setattr(handlers, "check_count", closing)
    client = await gateway(config(upstream))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.with_options(max_retries=0).chat.completions.create(model="chat", messages=HELLO)
    headers = caught.value.response.headers
    assert all(headers.get(name) == value for name, value in quota_headers(REQUESTS, TOKENS).items())
    assert headers.get_list("x-ratelimit-limit-requests") == ["60"]
