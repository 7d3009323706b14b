"""A `conversation` stream on a native Responses target when the store or the upstream fails: the client learns the turn's fate.

The client is the official openai SDK, the upstream a scripted OpenAI Responses API
(tests/support/fakes_responses.py), the store a real SQLite file or a real redis-server. The
turn is stored at the stream's end, before `response.completed` goes on, as a chat turn is at
`[DONE]`: under the store's own timeout, not the upstream's `streamIdleTimeout` (storing is not
the upstream being idle). A turn that cannot be stored ends the stream with the gateway's memory
error; an upstream event that is not JSON ends it with the gateway's own error, storing nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.fakes_responses import Answer, FakeResponses, response_events, start_responses
from tests.support.gateway import Gateway
from tests.support.memory_turns import a, stored, u
from tests.support.servers import redis_server
from tests.support.waiting import eventually

IDLE = 0.5  # the route's streamIdleTimeout: the test of a commit that outlasts it waits a few of them


@pytest.fixture
async def native(aiohttp_server: Any) -> FakeResponses:
    return await start_responses(aiohttp_server)


def config(fake: FakeResponses, memory: str) -> str:
    return (f"memory: {{{memory}}}\n"
            f'routes: {{chat: {{provider: openai, baseUrl: "{fake.url}", apiKey: k, streamIdleTimeout: {IDLE}}}}}')  # fmt: skip


async def streamed(client: openai.AsyncOpenAI, conversation: str) -> list[Any]:
    """The events of a streamed turn of `conversation`, as the SDK reads them.

    `store: false`: no response id is recorded for `previous_response_id`, so the store's only
    write after the turn's read is the turn itself, at the stream's end.
    """
    stream = await client.responses.create(model="chat", input="Q1", conversation=conversation, stream=True, store=False)
    return [event async for event in stream]


async def test_a_commit_slower_than_the_idle_timeout_stores_the_turn_and_completes_the_stream(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    """Another connection holds the SQLite file while the stream ends: the turn waits for it (busy timeout), not for the upstream."""
    path = tmp_path / "m.db"
    gate = asyncio.Event()
    native.then(Answer(events=[gate, *response_events("Hel", "lo", response_id="resp_1")]))
    client = await gateway(config(native, f"store: sqlite, path: '{path}'"))
    turn = asyncio.create_task(streamed(client, "c"))
    await eventually(lambda: native.calls == 1, what="the turn's history read, its request upstream")
    competitor = sqlite3.connect(path, isolation_level=None)
    competitor.execute("BEGIN EXCLUSIVE")
    try:
        gate.set()
        await asyncio.sleep(IDLE * 4)  # the stream's whole answer is in; the turn's write waits past the idle timeout
    finally:
        competitor.rollback()
        competitor.close()
    events = await turn
    assert [event.type for event in events][-1] == "response.completed"
    _, kept = await stored(client, "c")
    assert kept["messages"] == [u("Q1"), a("Hello")]


async def test_a_lock_lost_mid_stream_ends_it_with_memory_lock_lost_and_stores_nothing(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    """Redis comes back empty while the upstream answers: the gateway's memory error, not the upstream's."""
    gate = asyncio.Event()
    native.then(Answer(events=[gate, *response_events("Hel", "lo", response_id="resp_1")]))
    with redis_server(tmp_path, durable=False) as redis:
        client = await gateway(config(native, f"store: redis, url: '{redis.url}'"))
        turn = asyncio.create_task(streamed(client, "lost"))
        await eventually(lambda: native.calls == 1, what="the turn's lock taken, its request upstream")
        redis.kill()
        redis.start()
        gate.set()
        error = (await turn)[-1]
        assert (error.type, error.code) == ("error", "memory_lock_lost")
        assert error.message.startswith("The conversation's lock was lost")  # the gateway's own, no route named
        assert (await stored(client, "lost"))[0] == 404


async def test_an_event_that_is_not_json_ends_the_stream_with_the_gateways_error_and_stores_nothing(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    events = response_events("Hel", "lo", response_id="resp_1")
    corrupted = b"event: response.output_text.delta\ndata: {not json\n\n"
    native.then(Answer(events=[*events[:-4], corrupted, *events[-4:]]))
    client = await gateway(config(native, f"store: sqlite, path: '{tmp_path / 'm.db'}'"))
    seen = await streamed(client, "c")
    assert [event.type for event in seen][-2:] == ["response.output_text.delta", "error"]  # nothing after it relayed
    assert seen[-1].code == "upstream_stream_error" and "not JSON" in seen[-1].message
    assert (await stored(client, "c"))[0] == 404
