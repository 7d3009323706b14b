"""Summary windows end to end: the openai SDK against the gateway, a main and a summary upstream on loopback, SQLite and Redis."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from gateway.core.memory.summary import NOTE_PREFIX
from gateway.server.keys import MEMORY
from gateway.tokens import count_text, get_encoding
from tests.support.fakes import FakeUpstream, Step, chat_completion, error_body, stream_of
from tests.support.gateway import app_of
from tests.support.memory_turns import SYSTEM, a, received, u
from tests.support.metrics import scrape, value
from tests.support.servers import free_port
from tests.support.summary_windows import (
    ENCODING,
    note,
    padded,
    summaries_done,
    summaries_from,
    summary_config,
    summary_prompt_of,
)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The memory section of a config: a SQLite file, or the session's real redis-server."""
    if request.param == "sqlite":
        return f'store: sqlite, path: "{tmp_path / "memory.db"}"'
    redis_url: str = request.getfixturevalue("redis_url")
    return f'store: redis, url: "{redis_url}"'


async def turn(client: openai.AsyncOpenAI, memory_id: str, messages: list[dict[str, Any]]) -> Any:
    """One chat turn of conversation `memory_id` with the summary window; the response's headers."""
    raw = await client.chat.completions.with_raw_response.create(
        model="chat", messages=messages, extra_headers={"memoryId": memory_id}  # type: ignore[arg-type]
    )
    return raw.headers


def replies(main: FakeUpstream, count: int) -> None:
    main.then(*(Step(body=chat_completion(padded(f"r{i}"))) for i in range(1, count + 1)))


def q(i: int) -> dict[str, Any]:
    return u(padded(f"q{i}"))


def r(i: int) -> dict[str, Any]:
    return a(padded(f"r{i}"))


async def test_evicted_messages_are_summarized_and_forwarded_as_a_note(
    gateway: Any, make_upstream: Any, store: str
) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=store))
    replies(main, 5)
    summaries_from(summarizer, "S1: q1 asked", "S2: q1 and q2 asked")
    memory_id = f"sum-{uuid.uuid4().hex}"
    first = await turn(client, memory_id, [SYSTEM, q(1)])
    await turn(client, memory_id, [q(2)])
    assert first["x-memory-summary"] == "0" and summarizer.calls == 0  # nothing evicted yet
    third = await turn(client, memory_id, [q(3)])  # the window keeps q2, r2: q1, r1 leave it
    assert (third["x-memory-evicted"], third["x-memory-summary"]) == ("2", "0")  # none was ready
    await summaries_done(client)
    assert summarizer.calls == 1
    prompt = summary_prompt_of(summarizer, 0)
    assert "Current summary:\n(none yet)" in prompt
    assert f"user: {padded('q1')}\nassistant: {padded('r1')}\n\nNew summary:" in prompt and "q2" not in prompt
    assert summarizer.requests[0].body["max_tokens"] == 100

    fourth = await turn(client, memory_id, [q(4)])
    assert fourth["x-memory-summary"] == "2"
    assert received(main)[3] == [SYSTEM, note("S1: q1 asked"), q(3), r(3), q(4)]
    await summaries_done(client)
    # The update folds only what left the window since (q2, r2) into the previous summary
    prompt = summary_prompt_of(summarizer, 1)
    assert "Current summary:\nS1: q1 asked\n\n" in prompt
    assert f"New lines of conversation:\nuser: {padded('q2')}\nassistant: {padded('r2')}\n\nNew summary:" in prompt
    assert "q1" not in prompt.split("New lines")[1]

    fifth = await turn(client, memory_id, [q(5)])
    assert fifth["x-memory-summary"] == "4"
    assert received(main)[4] == [SYSTEM, note("S2: q1 and q2 asked"), q(4), r(4), q(5)]
    await summaries_done(client)
    samples = await scrape(client)
    assert value(samples, "gateway_memory_summaries_total", outcome="ok") == 3
    # the summary calls count under the summary route, like any of its requests
    assert value(samples, "gateway_tokens_total", route="cheap", target="cheap", provider="openai", kind="prompt") == 15
    assert value(samples, "gateway_requests_total", route="cheap", status_code="200", stream="false") == 3


async def test_a_failing_summary_route_never_fails_a_turn_and_is_tried_again(
    gateway: Any, make_upstream: Any, store: str
) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=store))
    replies(main, 5)
    summarizer.then(Step(status=500, body=error_body(500)), Step(body=chat_completion("S")))
    memory_id = f"sum-{uuid.uuid4().hex}"
    for i in (1, 2, 3):
        await turn(client, memory_id, [SYSTEM, q(i)] if i == 1 else [q(i)])
    await summaries_done(client)
    assert summarizer.calls == 1
    fourth = await turn(client, memory_id, [q(4)])  # answered, without a summary
    assert fourth["x-memory-summary"] == "0" and received(main)[3] == [SYSTEM, q(3), r(3), q(4)]
    await summaries_done(client)
    # tried again after the next turn: with everything evicted so far
    prompt = summary_prompt_of(summarizer, 1)
    assert all(padded(text) in prompt for text in ("q1", "r1", "q2", "r2"))
    assert (await turn(client, memory_id, [q(5)]))["x-memory-summary"] == "4"
    await summaries_done(client)  # the fifth turn's own summary (q3, r3 folded in)
    samples = await scrape(client)
    assert value(samples, "gateway_memory_summaries_total", outcome="failed") == 1
    assert value(samples, "gateway_memory_summaries_total", outcome="ok") == 2


async def test_a_hanging_summary_route_never_delays_a_turn(gateway: Any, make_upstream: Any, tmp_path: Path) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    replies(main, 6)
    hang = asyncio.Event()
    summarizer.then(Step(body=chat_completion("late"), gate=hang))
    memory_id = "hanging"
    for i in (1, 2, 3):
        await turn(client, memory_id, [SYSTEM, q(i)] if i == 1 else [q(i)])
    await asyncio.wait_for(summarizer.arrived.wait(), 10)
    # The summary call hangs: the turns go on, each answered without waiting for it
    for i in (4, 5, 6):
        assert (await turn(client, memory_id, [q(i)]))["x-memory-summary"] == "0"
    assert summarizer.calls == 1  # the later turns' jobs wait behind the one that runs (only the newest)
    hang.set()
    await summaries_done(client)
    # the late summary is stored, then the newest job waiting folds in what was evicted since
    assert summarizer.calls == 2
    assert "Current summary:\nlate\n\n" in summary_prompt_of(summarizer, 1)


async def test_a_streamed_turn_forwards_the_note_and_hands_its_summary_over(
    gateway: Any, make_upstream: Any, tmp_path: Path
) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    main.then(*(Step(events=stream_of(padded(f"r{i}"))) for i in range(1, 5)))
    summaries_from(summarizer, "S1")
    memory_id, headers = "streamed", {"memoryId": "streamed"}
    for i in (1, 2, 3, 4):
        raw = await client.chat.completions.with_raw_response.create(
            model="chat", messages=[SYSTEM, q(i)] if i == 1 else [q(i)], extra_headers=headers, stream=True  # type: ignore[arg-type]
        )
        text = "".join([part.choices[0].delta.content or "" async for part in raw.parse() if part.choices])
        assert text == padded(f"r{i}")
        await summaries_done(client)
    assert raw.headers["x-memory-summary"] == "2"
    assert received(main)[3] == [SYSTEM, note("S1"), q(3), r(3), q(4)]
    assert summarizer.calls == 2 and memory_id not in str(summarizer.requests[0].body)


@pytest.mark.parametrize("summary_target", ["closed port", "not json", "no text"])
async def test_a_summary_route_that_cannot_answer_leaves_every_turn_answered(
    gateway: Any, make_upstream: Any, tmp_path: Path, summary_target: str
) -> None:
    main = await make_upstream()
    broken = await make_upstream(
        Step(body=b"not json") if summary_target == "not json" else Step(body={"choices": [{"message": {"role": "assistant"}}]})
    )
    if summary_target == "closed port":
        broken.url = f"http://127.0.0.1:{free_port()}/v1"
    client = await gateway(summary_config(main, broken, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    replies(main, 4)
    for i in (1, 2, 3, 4):
        headers = await turn(client, "broken", [SYSTEM, q(i)] if i == 1 else [q(i)])
        assert headers["x-memory-summary"] == "0"
        await summaries_done(client)
    assert received(main)[3] == [SYSTEM, q(3), r(3), q(4)]
    samples = await scrape(client)
    assert value(samples, "gateway_memory_summaries_total", outcome="failed") == 2
    assert value(samples, "gateway_memory_summaries_total", outcome="ok") == 0


async def test_a_summary_cut_short_by_the_gateway_stopping_counts_as_a_request_whose_client_left(
    gateway: Any, make_upstream: Any, tmp_path: Path
) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    replies(main, 3)
    summarizer.then(Step(body=chat_completion("never"), gate=asyncio.Event()))
    for i in (1, 2, 3):
        await turn(client, "stopping", [SYSTEM, q(i)] if i == 1 else [q(i)])
    await asyncio.wait_for(summarizer.arrived.wait(), 10)
    await app_of(client)[MEMORY].summaries.close()  # what the memory's close does first when the gateway stops
    samples = await scrape(client)
    assert value(samples, "gateway_requests_total", route="cheap", status_code="499", stream="false") == 1
    assert value(samples, "gateway_requests_total", route="cheap", status_code="500", stream="false") == 0


@pytest.mark.parametrize("path", ["/memory/{}", "/conversations/{}"])
async def test_deleting_a_conversation_deletes_its_summary(gateway: Any, make_upstream: Any, tmp_path: Path, path: str) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    replies(main, 5)
    late = asyncio.Event()
    summarizer.then(Step(body=chat_completion("S")), Step(body=chat_completion("late"), gate=late))
    memory_id = f"sum-{uuid.uuid4().hex}"
    for i in (1, 2, 3):
        await turn(client, memory_id, [SYSTEM, q(i)] if i == 1 else [q(i)])
    await summaries_done(client)
    summarizer.arrived.clear()
    assert (await turn(client, memory_id, [q(4)]))["x-memory-summary"] == "2"  # made, and forwarded
    await asyncio.wait_for(summarizer.arrived.wait(), 10)  # the fourth turn's summary is being made
    base = str(client.base_url).rstrip("/")
    async with aiohttp.ClientSession() as session, session.delete(
        base + path.format(memory_id), headers={"Authorization": f"Bearer {client.api_key}"}
    ) as response:
        assert response.status in (200, 204), await response.text()
    late.set()  # the summary being made when the conversation went is never stored
    await summaries_done(client)
    assert (await turn(client, memory_id, [SYSTEM, q(1)]))["x-memory-summary"] == "0"  # a new conversation: no summary



async def test_a_summary_route_that_ignores_max_tokens_gets_its_summary_cut_to_summary_max_tokens(
    gateway: Any, make_upstream: Any, tmp_path: Path
) -> None:
    main, summarizer = await make_upstream(), await make_upstream()
    client = await gateway(summary_config(main, summarizer, store=f'store: sqlite, path: "{tmp_path / "m.db"}"'))
    replies(main, 5)
    rambling = " ".join(f"fact{i} holds." for i in range(3000))
    summaries_from(summarizer, rambling, rambling + " " + rambling)
    for i in (1, 2, 3, 4, 5):
        await turn(client, "rambling", [SYSTEM, q(i)] if i == 1 else [q(i)])
        await summaries_done(client)
    assert summarizer.requests[0].body["max_tokens"] == 100  # asked for, and not kept to
    encoding = get_encoding(ENCODING)
    for forwarded in received(main)[3:]:
        summary = forwarded[1]["content"].removeprefix(NOTE_PREFIX)
        assert forwarded[1]["role"] == "system" and rambling.startswith(summary)
        assert 90 <= count_text(encoding, summary) <= 100  # the note adds at most summaryMaxTokens to the window's
    # the cut summary is what the next one is made from
    assert "Current summary:\nfact0 holds." in summary_prompt_of(summarizer, 1)
    assert len(summary_prompt_of(summarizer, 1)) < 2000
