"""The relay's idle deadline: one timer per stream that only an upstream wait of `idle` seconds trips."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from gateway.upstream.deadline import IdleDeadline
from tests.support.fakes import FakeUpstream, Step, chunk, stream_of
from tests.support.gateway import Gateway
from tests.support.metrics import scrape, value

MESSAGES = [{"role": "user", "content": "stream please"}]


async def never() -> None:
    """An upstream read that never completes."""
    await asyncio.Event().wait()


async def test_a_wait_of_idle_seconds_cancels_the_task_as_expired() -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    deadline = IdleDeadline(loop, 0.05)
    deadline.since = loop.time()
    try:
        with pytest.raises(asyncio.CancelledError):
            await never()
        assert deadline.expired()
        assert task.cancelling() == 0  # undone: the relay goes on to write its in-band error
    finally:
        deadline.close()


async def test_another_cancellation_is_not_taken_for_silence() -> None:
    loop = asyncio.get_running_loop()
    deadline = IdleDeadline(loop, 60)
    started = asyncio.Event()

    async def relay() -> bool:
        deadline.since = loop.time()
        started.set()
        try:
            await never()
        except asyncio.CancelledError:
            return deadline.expired()
        return True

    task = asyncio.create_task(relay())
    await started.wait()
    task.cancel()
    assert await task is False
    deadline.close()


async def test_each_wait_has_the_whole_idle_time_however_long_the_stream() -> None:
    """Eleven waits of a tenth of `idle` each: the stream outlives `idle`, no wait reaches it, even slowed down."""
    loop = asyncio.get_running_loop()
    deadline = IdleDeadline(loop, 1)
    try:
        for _ in range(11):
            deadline.since = loop.time()
            await asyncio.sleep(0.1)  # the upstream's answer, 100 ms later
            deadline.since = None
    finally:
        deadline.close()


async def test_time_spent_between_waits_is_not_silence() -> None:
    """Writing to a slow client (no upstream wait under way) for longer than `idle` cancels nothing."""
    loop = asyncio.get_running_loop()
    deadline = IdleDeadline(loop, 0.05)
    try:
        await asyncio.sleep(0.2)
    finally:
        deadline.close()


async def test_a_closed_deadline_never_fires() -> None:
    """A relay that ended inside a wait (a transport error, say) leaves `since` set: close() must disarm it."""
    loop = asyncio.get_running_loop()
    deadline = IdleDeadline(loop, 0.05)
    deadline.since = loop.time()
    deadline.close()
    await asyncio.sleep(0.2)


async def test_a_stream_longer_than_its_idle_timeout_completes_when_no_gap_reaches_it(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    events: list[bytes | float | asyncio.Event] = [chunk({"role": "assistant", "content": "a"})]
    for piece in "bcde":
        events += [0.3, chunk({"content": piece})]
    events += stream_of()[1:]  # the finish chunk and [DONE]
    upstream.then(Step(events=events))
    # gaps well short of the idle timeout (a loaded machine may stretch one), adding up to more than it
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, streamIdleTimeout: 1}}}}')
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    text = ""
    async for part in stream:
        text += part.choices[0].delta.content or "" if part.choices else ""
    assert text == "abcde"


async def test_a_gap_past_the_idle_timeout_ends_the_stream_with_a_timeout(gateway: Gateway, upstream: FakeUpstream) -> None:
    events: list[bytes | float | asyncio.Event] = [chunk({"role": "assistant", "content": "a"}), 0.1, chunk({"content": "b"})]
    events += [asyncio.Event()]  # then nothing, ever
    upstream.then(Step(events=events))
    client = await gateway(f'routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, streamIdleTimeout: 0.2}}}}')
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match=r"no stream event for 0\.2s"):
        async with asyncio.timeout(10):  # a relay without its deadline would wait forever
            async for _ in stream:
                pass


async def test_a_speech_body_silent_past_the_idle_timeout_is_cut_off(gateway: Gateway, upstream: FakeUpstream) -> None:
    """A binary answer has no in-band error: silence drops the client's connection before the body's end."""
    upstream.default = Step(events=[b"ID3-first-frames", 0.1, b"-more", asyncio.Event()], events_type="audio/mpeg")
    client = await gateway(
        f'routes: {{tts: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k, streamIdleTimeout: 0.3}}}}'
    )
    with pytest.raises(httpx.HTTPError):
        async with asyncio.timeout(10):  # a relay without its deadline would wait forever
            async with client.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as response:
                await response.read()
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="tts", status_code="504", stream="false") == 1
