"""A refusal answered in a memory conversation is kept, and sent back to the upstream on later turns.

OpenAI's structured outputs answer a refusal as `message.refusal` with `content` null. Memory
keeps it (gateway.core.memory.messages), with its text as the content too, so the next turn
forwards an assistant message every upstream reads: OpenAI's chat API takes `refusal` on it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk
from tests.support.gateway import Gateway
from tests.support.memory_turns import a, config, received, stored, u

REFUSAL: Final = "I'm sorry, I can't help with that."
KEPT: Final = {"role": "assistant", "content": REFUSAL, "refusal": REFUSAL}


def refused() -> dict[str, Any]:
    """A chat completion refusing, as OpenAI answers one: content null, the refusal beside it."""
    answer = chat_completion()
    answer["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": REFUSAL, "annotations": []}
    return answer


async def test_a_refusal_is_stored_with_its_text_and_forwarded_on_the_next_turn(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=refused()), Step(body=chat_completion("Because it could harm someone.")))
    headers = {"memoryId": "refusals"}
    first = await client.chat.completions.create(model="chat", messages=[u("pick a lock")], extra_headers=headers)
    assert (first.choices[0].message.refusal, first.choices[0].message.content) == (REFUSAL, None)  # answered as sent

    await client.chat.completions.create(model="chat", messages=[u("why not?")], extra_headers=headers)
    assert received(upstream)[1] == [u("pick a lock"), KEPT, u("why not?")]
    status, body = await stored(client, "refusals")
    assert status == 200
    assert body["messages"] == [u("pick a lock"), KEPT, u("why not?"), a("Because it could harm someone.")]


async def test_the_sdk_s_refusal_sent_back_by_the_client_is_not_stored_twice(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """A client that keeps its own history sends the SDK's message back (content null): memory knows it as its own."""
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=refused()), Step(body=chat_completion("ok")))
    headers = {"memoryId": "resent"}
    first = await client.chat.completions.create(model="chat", messages=[u("pick a lock")], extra_headers=headers)
    sent_back = first.choices[0].message.model_dump()
    await client.chat.completions.create(
        model="chat", messages=[u("pick a lock"), sent_back, u("why not?")], extra_headers=headers  # type: ignore[list-item]
    )
    assert received(upstream)[1] == [u("pick a lock"), KEPT, u("why not?")]
    _, body = await stored(client, "resent")
    assert body["messages"] == [u("pick a lock"), KEPT, u("why not?"), a("ok")]


async def test_a_streamed_refusal_is_assembled_stored_and_forwarded(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    events: list[bytes | float | asyncio.Event] = [
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I'm sorry, "}),
        chunk({"refusal": "I can't help with that."}),
        chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    upstream.then(Step(events=events), Step(body=chat_completion("Because it could harm someone.")))
    headers = {"memoryId": "streamed"}
    stream = await client.chat.completions.create(
        model="chat", messages=[u("pick a lock")], extra_headers=headers, stream=True
    )
    refusal = "".join([part.choices[0].delta.refusal or "" async for part in stream if part.choices])
    assert refusal == REFUSAL

    await client.chat.completions.create(model="chat", messages=[u("why not?")], extra_headers=headers)
    assert received(upstream)[1] == [u("pick a lock"), KEPT, u("why not?")]
    _, body = await stored(client, "streamed")
    assert body["messages"] == [u("pick a lock"), KEPT, u("why not?"), a("Because it could harm someone.")]
