"""A long streamed reply of tiny deltas through a real memory turn: held in memory proportional to its size."""

from __future__ import annotations

import tracemalloc

import aiohttp
import orjson

from tests.support.fakes import FakeUpstream, Step, chunk
from tests.support.gateway import GATEWAY_KEY, Gateway

DELTAS = 400_000  # of two characters: a reply of 800 kB in ~60 MB of events
PER_WRITE = 1000  # events the upstream sends in one write


async def test_a_streamed_memory_turn_of_tiny_deltas_holds_memory_proportional_to_the_reply(
    gateway: Gateway, upstream: FakeUpstream
) -> None:
    """On the in-process store: orjson, writing a SQLite row, reserves 8x its size (address space it mostly never
    touches, which tracemalloc counts all the same)."""
    client = await gateway(f"""
memory: {{store: memory}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
""")
    batch = chunk({"content": "ab"}) * PER_WRITE
    events: list[bytes | float] = [chunk({"role": "assistant", "content": ""})]
    events += [batch] * (DELTAS // PER_WRITE)
    events += [chunk({}, "stop"), b"data: [DONE]\n\n"]
    answer = Step(body={"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
    upstream.then(answer, Step(events=events), answer)
    url = f"{client.base_url}chat/completions"
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "memoryId": "long-reply"}
    body = {"model": "chat", "messages": [{"role": "user", "content": "talk"}], "stream": True}
    async with aiohttp.ClientSession() as session:
        # a first turn, outside the measure: loading the token encoding is the process's, not the request's
        async with session.post(url, json={**body, "stream": False}, headers=headers) as response:
            assert response.status == 200
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            async with session.post(url, json=body, headers=headers) as response:
                assert response.status == 200
                tail = b""
                async for piece in response.content.iter_any():  # read, not kept
                    tail = (tail + piece)[-64:]
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert tail.endswith(b"data: [DONE]\n\n")
        body["messages"] = [{"role": "user", "content": "and?"}]
        del body["stream"]
        async with session.post(url, json=body, headers=headers) as response:
            assert response.status == 200
    sent = orjson.loads(upstream.requests[2].raw)["messages"]
    assert sent[3] == {"role": "assistant", "content": "ab" * DELTAS}  # the reply was stored whole
    size = 2 * DELTAS
    # the reply and its copies at most, plus what a stream costs whatever its length (a network read's events)
    assert peak <= 3 * size + 2 * 1024 * 1024, f"{peak / size:.1f} bytes held a byte of reply"
