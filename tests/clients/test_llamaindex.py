"""LlamaIndex as a client (OpenAILike pointed at the gateway): chat and streams over server-side memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import a, received, stored, u
from tests.support.routes import memory_routes

openai_like = pytest.importorskip("llama_index.llms.openai_like")
ChatMessage = pytest.importorskip("llama_index.core.llms").ChatMessage


def llm(client: object, **headers: str) -> object:
    return openai_like.OpenAILike(
        model="chat",
        api_base=str(client.base_url).rstrip("/"),  # type: ignore[attr-defined]
        api_key=GATEWAY_KEY,
        is_chat_model=True,
        max_retries=0,
        default_headers=headers,
    )


async def test_chat_then_stream_chat_over_memory(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(body=chat_completion("first answer")), Step(events=stream_of("second ", "answer")))
    model = llm(client, memoryId="llama-conv")
    first = await model.achat([ChatMessage(role="user", content="Hello?")])  # type: ignore[attr-defined]
    assert first.message.content == "first answer"
    stream = await model.astream_chat([ChatMessage(role="user", content="Again?")])  # type: ignore[attr-defined]
    pieces = [piece.delta async for piece in stream]
    assert "".join(p or "" for p in pieces) == "second answer"
    assert received(upstream) == [[u("Hello?")], [u("Hello?"), a("first answer"), u("Again?")]]
    status, body = await stored(client, "llama-conv")
    assert status == 200 and body["messages"][-1] == a("second answer")


async def test_complete_prompt_is_sent_as_one_user_message(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(body=chat_completion("done")))
    answer = await llm(client).acomplete("Say done.")  # type: ignore[attr-defined]
    assert answer.text == "done"
    assert received(upstream) == [[u("Say done.")]]
