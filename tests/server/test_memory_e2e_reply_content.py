"""Server-side memory end to end: a reply whose content OpenAI would refuse to be sent back is never stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import config, received, stored, u

TEXT_PARTS = [{"type": "text", "text": "Sun"}, {"type": "text", "text": "ny."}]


def answer_with(content: Any) -> dict[str, Any]:
    answer = chat_completion()
    answer["choices"][0]["message"]["content"] = content
    return answer


@pytest.mark.parametrize(
    "content", [5, {"text": "x"}, [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]],
    ids=["number", "object", "image-part"],
)
async def test_json_reply_with_content_openai_refuses_back_is_a_502_and_stores_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, content: Any
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=answer_with(content)))
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="chat", messages=[u("q")], extra_headers={"memoryId": "odd"})
    assert caught.value.status_code == 502 and caught.value.code == "unstorable_reply"
    assert "content" in caught.value.message
    assert (await stored(client, "odd"))[0] == 404


async def test_json_reply_of_text_parts_is_stored_and_sent_back_as_it_came(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=answer_with(TEXT_PARTS)), Step(body=chat_completion("ok")))
    headers = {"memoryId": "parts"}
    await client.chat.completions.create(model="chat", messages=[u("q1")], extra_headers=headers)
    await client.chat.completions.create(model="chat", messages=[u("q2")], extra_headers=headers)
    reply = {"role": "assistant", "content": TEXT_PARTS}
    assert received(upstream)[1] == [u("q1"), reply, u("q2")]
    assert (await stored(client, "parts"))[1]["messages"] == [u("q1"), reply, u("q2"), {"role": "assistant", "content": "ok"}]


@pytest.mark.parametrize(
    "step",
    [Step(body=answer_with(5)), Step(events=[chunk({"role": "assistant", "content": "a"}), chunk({"content": 5}),
                                              chunk({}, "stop"), b"data: [DONE]\n\n"])],
    ids=["json-answer-replayed", "streamed-delta"],
)
async def test_stream_whose_content_memory_cannot_keep_ends_with_an_error_and_stores_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, step: Step
) -> None:
    """A JSON answer to a stream request is replayed as chunks: its content reaches memory as a delta's."""
    client = await gateway(config(upstream, tmp_path))
    upstream.then(step)
    base = str(client.base_url).rstrip("/")
    body = {"model": "chat", "stream": True, "messages": [u("q")]}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {GATEWAY_KEY}"}) as session, session.post(
        f"{base}/chat/completions", json=body, headers={"memoryId": "odd"}
    ) as response:
        text = await response.read()
    assert response.status == 200 and b"[DONE]" not in text
    assert text.rsplit(b"\n\n", 2)[-2].startswith(b'data: {"error"') and b'"unstorable_reply"' in text
    assert (await stored(client, "odd"))[0] == 404


THINKING = {"type": "thinking", "thinking": [{"type": "text", "text": "The user greets me."}]}  # Mistral's Magistral


async def test_json_reply_with_reasoning_parts_is_stored_without_them(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The reasoning is not the answer: kept out of memory, as OpenAI's own is, so no upstream is sent parts it refuses."""
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(body=answer_with([THINKING, *TEXT_PARTS])), Step(body=chat_completion("ok")))
    headers = {"memoryId": "magistral"}
    first = await client.chat.completions.create(model="chat", messages=[u("q1")], extra_headers=headers)
    assert first.choices[0].message.content == [THINKING, *TEXT_PARTS]  # type: ignore[comparison-overlap]  # the client's, whole
    await client.chat.completions.create(model="chat", messages=[u("q2")], extra_headers=headers)
    assert received(upstream)[1] == [u("q1"), {"role": "assistant", "content": TEXT_PARTS}, u("q2")]


async def test_streamed_reasoning_parts_are_left_out_of_the_stored_reply(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    client = await gateway(config(upstream, tmp_path))
    upstream.then(Step(events=[chunk({"role": "assistant", "content": [THINKING]}), chunk({"content": [TEXT_PARTS[0]]}),
                               chunk({"content": "ny."}), chunk({}, "stop"), b"data: [DONE]\n\n"]))  # fmt: skip
    stream = await client.chat.completions.create(model="chat", messages=[u("q")], stream=True, extra_headers={"memoryId": "m"})
    async for _ in stream:
        pass
    assert (await stored(client, "m"))[1]["messages"] == [u("q"), {"role": "assistant", "content": "Sunny."}]
