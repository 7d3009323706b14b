"""`conversation` on a route whose target serves the Responses API: the history goes as input items.

The client is the official openai SDK, the upstream a scripted OpenAI Responses API
(tests/support/fakes_responses.py). The upstream never sees the gateway's conversation id: it
gets the conversation's history as input items before the request's own input. The turn is
stored (as chat messages: one conversation with Chat Completions' memoryId) once complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.fakes_responses import (
    Answer,
    FakeResponses,
    event,
    response,
    response_events,
    start_responses,
)
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import SYSTEM, a, stored, u
from tests.support.summary_windows import (
    note,
    padded,
    summaries_done,
    summaries_from,
    summary_prompt_of,
    window_of,
)

TWO_KEYS = f"auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: other-key}}]}}"


@pytest.fixture
async def native(aiohttp_server: Any) -> FakeResponses:
    return await start_responses(aiohttp_server)


def config(fake: FakeResponses, tmp_path: Path, *, window: str = "") -> str:
    route_memory = f", memory: {{{window}}}" if window else ""
    return (f'{TWO_KEYS}\nmemory: {{store: sqlite, path: "{tmp_path / "m.db"}"}}\n'
            f'routes: {{chat: {{provider: openai, baseUrl: "{fake.url}", apiKey: k{route_memory}}}}}')  # fmt: skip


def calling(response_id: str) -> dict[str, Any]:
    """A response whose output is a function call."""
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
            "arguments": '{"city":"Paris"}', "status": "completed"}  # fmt: skip
    return {**response("", response_id), "output": [call]}


async def test_the_history_goes_as_input_items_and_never_the_conversation_id(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    native.then(Answer(body=response("A1", "resp_1")), Answer(body=response("A2", "resp_2")))
    client = await gateway(config(native, tmp_path))
    await client.responses.create(model="chat", input="Q1", conversation="conv_secret", instructions="Be terse.")
    raw = await client.responses.with_raw_response.create(model="chat", input=[u("Q2")], conversation={"id": "conv_secret"})
    assert raw.parse().output_text == "A2"
    assert [r.path for r in native.requests] == ["/v1/responses"] * 2
    assert all(b"conv_secret" not in r.raw and "conversation" not in r.body for r in native.requests)
    assert native.requests[0].body["input"] == [u("Q1")]
    assert native.requests[0].body["instructions"] == "Be terse."
    # the stored instructions lead the history when the request has none of its own
    assert native.requests[1].body["input"] == [{"role": "system", "content": "Be terse."}, u("Q1"), a("A1"), u("Q2")]
    assert (raw.headers["x-memory-id"], raw.headers["x-memory-history"]) == ("conv_secret", "2")
    _, kept = await stored(client, "conv_secret")
    assert kept["messages"] == [u("Q1"), a("A1"), u("Q2"), a("A2")]


async def test_a_function_call_and_its_output_round_trip_as_items(gateway: Gateway, native: FakeResponses, tmp_path: Path) -> None:
    native.then(Answer(body=calling("resp_1")), Answer(body=response("Sunny.", "resp_2")))
    client = await gateway(config(native, tmp_path))
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    await client.responses.create(model="chat", input="Weather?", conversation="c", tools=[tool])  # type: ignore[list-item]
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    await client.responses.create(model="chat", input=[output], conversation="c", tools=[tool])  # type: ignore[list-item]
    assert native.requests[1].body["input"] == [
        u("Weather?"),
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        output,
    ]


async def test_a_stream_stores_its_turn_once_complete_and_a_cut_off_one_nothing(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    native.then(
        Answer(events=list(response_events("Hel", "lo", response_id="resp_1"))),
        Answer(events=list(response_events("Bro", "ken", response_id="resp_2", complete=False)), cut=True),
    )
    client = await gateway(config(native, tmp_path))
    async with client.responses.stream(model="chat", input="Q1", conversation="c") as events:
        assert (await events.get_final_response()).output_text == "Hello"
    cut = await client.responses.create(model="chat", input="Q2", conversation="c", stream=True)
    assert [event.type async for event in cut][-1] == "error"
    _, kept = await stored(client, "c")
    assert kept["messages"] == [u("Q1"), a("Hello")]


async def test_a_failed_answer_stores_nothing(gateway: Gateway, native: FakeResponses, tmp_path: Path) -> None:
    native.then(Answer(status=400, body={"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}))
    client = await gateway(config(native, tmp_path))
    with pytest.raises(openai.BadRequestError):
        await client.responses.create(model="chat", input="Q1", conversation="c")
    status, _ = await stored(client, "c")
    assert status == 404


async def test_a_chat_memoryid_turn_is_in_the_conversation_and_the_window_trims_it(
    gateway: Gateway, native: FakeResponses, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A turn through chat completions (a chat route on the same store) is history of the Responses turn."""
    upstream.then(Step(body=chat_completion("From chat")))
    chat_route = f'chatty: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}'
    text = config(native, tmp_path, window="maxMessages: 3").replace("routes: {", f"routes: {{{chat_route}, ")
    client = await gateway(text)
    await client.chat.completions.create(model="chatty", messages=[u("Q0")], extra_headers={"memoryId": "x"})  # type: ignore[list-item]
    await client.chat.completions.create(model="chatty", messages=[u("Q1")], extra_headers={"memoryId": "x"})  # type: ignore[list-item]
    await client.responses.create(model="chat", input="Q2", conversation="x")
    assert native.requests[0].body["input"] == [u("Q1"), a("Hello from upstream"), u("Q2")]


async def test_another_keys_conversation_of_that_id_is_its_own(gateway: Gateway, native: FakeResponses, tmp_path: Path) -> None:
    client = await gateway(config(native, tmp_path))
    await client.responses.create(model="chat", input="secret of team-a", conversation="shared")
    await client.with_options(api_key="other-key").responses.create(model="chat", input="Q", conversation="shared")
    assert native.requests[1].body["input"] == [u("Q")]


async def test_an_answer_memory_cannot_keep_is_refused_and_a_stream_ends_with_an_error_instead_of_completed(
    gateway: Gateway, native: FakeResponses, tmp_path: Path
) -> None:
    unkeepable = {**calling("resp_1"), "output": [{**calling("resp_1")["output"][0], "call_id": None}]}
    opening = response("", "resp_2", status="in_progress")
    native.then(
        Answer(body=unkeepable),
        Answer(events=[event("response.created", 0, response=opening),
                       event("response.completed", 1, response={**unkeepable, "id": "resp_2"})]),
    )  # fmt: skip
    client = await gateway(config(native, tmp_path))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.responses.create(model="chat", input="Q1", conversation="c")
    assert (caught.value.status_code, caught.value.code) == (502, "unstorable_reply")
    stream = await client.responses.create(model="chat", input="Q1", conversation="c", stream=True)
    kinds = [item.type async for item in stream]
    assert kinds == ["response.created", "error"]
    status, _ = await stored(client, "c")
    assert status == 404


async def test_a_client_that_resends_the_history_is_not_doubled(gateway: Gateway, native: FakeResponses, tmp_path: Path) -> None:
    native.then(Answer(body=response("A1", "resp_1")), Answer(body=response("A2", "resp_2")))
    client = await gateway(config(native, tmp_path))
    await client.responses.create(model="chat", input="Q1", conversation="c")
    await client.responses.create(model="chat", input=[u("Q1"), a("A1"), u("Q2")], conversation="c")  # type: ignore[list-item]
    assert native.requests[1].body["input"] == [u("Q1"), a("A1"), u("Q2")]
    _, kept = await stored(client, "c")
    assert kept["messages"] == [u("Q1"), a("A1"), u("Q2"), a("A2")]


async def test_an_incomplete_answer_is_kept_and_a_failed_one_is_not(gateway: Gateway, native: FakeResponses, tmp_path: Path) -> None:
    native.then(Answer(body=response("A", "resp_1", status="incomplete")), Answer(body={**response("", "resp_2"), "status": "failed"}))
    client = await gateway(config(native, tmp_path))
    await client.responses.create(model="chat", input="Q1", conversation="c")
    await client.responses.create(model="chat", input="Q2", conversation="c")
    _, kept = await stored(client, "c")
    assert kept["messages"] == [u("Q1"), a("A")]


async def test_a_summary_window_forwards_its_note_before_the_kept_history_and_summarizes_what_it_evicts(
    gateway: Gateway, native: FakeResponses, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """As on the chat path: the note after the (stored) instructions, x-memory-summary, a summary made after eviction."""
    native.then(*(Answer(body=response(padded(f"r{i}"), f"resp_{i}")) for i in range(1, 6)))
    summaries_from(upstream, "S1", "S2")
    window = f"memoryType: summary_window, maxTokens: {window_of(2)}, summaryRoute: cheap, summaryMaxTokens: 100"
    cheap = f'cheap: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}'
    client = await gateway(config(native, tmp_path, window=window).replace("routes: {", f"routes: {{{cheap}, "))
    headers = []
    for i in (1, 2, 3, 4):
        instructions = {"instructions": SYSTEM["content"]} if i == 1 else {}
        raw = await client.responses.with_raw_response.create(model="chat", input=padded(f"q{i}"), conversation="c", **instructions)
        headers.append((raw.headers["x-memory-evicted"], raw.headers["x-memory-summary"]))
        await summaries_done(client)
    assert headers == [("0", "0"), ("0", "0"), ("2", "0"), ("4", "2")]
    assert upstream.calls == 2  # after the third turn and the fourth: each evicted two messages
    assert f"New lines of conversation:\nuser: {padded('q1')}\nassistant: {padded('r1')}\n\n" in summary_prompt_of(upstream, 0)
    q3, r3, q4 = u(padded("q3")), a(padded("r3")), u(padded("q4"))
    assert native.requests[3].body["input"] == [SYSTEM, note("S1"), q3, r3, q4]
    # Instructions of its own go as they came: the note still leads the history
    await client.responses.create(model="chat", input=padded("q5"), conversation="c", instructions="Be brief.")
    assert native.requests[4].body["input"] == [note("S2"), q4, a(padded("r4")), u(padded("q5"))]
    assert native.requests[4].body["instructions"] == "Be brief."
