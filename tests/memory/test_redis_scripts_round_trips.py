"""A memory turn on a real redis-server: two round trips, and rows read only when another wrote since.

Round trips are counted by MONITOR (tests/support/redis_monitor.py): each command a client sent
is one, each command a script ran is not.
"""

from __future__ import annotations

import openai

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.gateway import Gateway
from tests.support.memory_turns import stored
from tests.support.redis_monitor import watched
from tests.support.servers import flush_redis

TURNS = 5


def route(upstream: FakeUpstream, redis_url: str) -> str:
    return f"""
memory: {{store: redis, url: '{redis_url}', maxStoredMessages: 40}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k, memory: {{memoryType: token_window, maxTokens: 300}}}}
"""


def tag(memory_id: str) -> str:
    """What names the conversation's keys, whichever the tenant: the end of their hash tag."""
    return f":{memory_id}}}"


async def turn(client: openai.AsyncOpenAI, memory_id: str, text: str) -> None:
    answer = await client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": text}], extra_headers={"memoryId": memory_id}
    )
    assert answer.choices[0].message.content


async def test_a_turn_is_two_round_trips_and_reads_no_rows_it_cached(
    gateway: Gateway, upstream: FakeUpstream, redis_url: str
) -> None:
    await flush_redis(redis_url)
    upstream.default = Step(body=chat_completion("noted"))
    client = await gateway(route(upstream, redis_url))
    for index in range(3):  # the first turns load the scripts and set the replica's liveness record
        await turn(client, "rt", f"warm {index}")
    async with watched(redis_url) as seen:
        for index in range(TURNS):
            await turn(client, "rt", f"question {index}")
    assert len(seen.sent_naming(tag("rt"))) == 2 * TURNS, seen.sent
    assert not seen.scripted_naming("LRANGE"), seen.scripted  # the window was this process's, still current
    status, body = await stored(client, "rt")
    assert status == 200 and len(body["messages"]) == 2 * (3 + TURNS)


async def test_another_writer_makes_the_next_turn_read_the_window_again(
    gateway: Gateway, upstream: FakeUpstream, redis_url: str
) -> None:
    """Two gateways on one Redis take turns on a conversation: each turn reads the tail the other wrote."""
    await flush_redis(redis_url)
    upstream.default = Step(body=chat_completion("noted"))
    first = await gateway(route(upstream, redis_url))
    second = await gateway(route(upstream, redis_url))
    for index in range(3):
        await turn(first, "shared", f"first {index}")
        await turn(second, "shared", f"second {index}")
    async with watched(redis_url) as seen:
        await turn(first, "shared", "last")
    assert len(seen.sent_naming(tag("shared"))) == 2, seen.sent
    reads = seen.scripted_naming("LRANGE")
    assert reads and all(" 0 -1" not in read for read in reads), reads  # the tail, not the whole list
    history = [message["content"] for message in upstream.requests[-1].body["messages"]]
    assert history[-3:] == ["second 2", "noted", "last"]
    status, body = await stored(first, "shared")
    assert status == 200 and len(body["messages"]) == 14
