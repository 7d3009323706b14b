"""litellm as a client (its `openai/` provider pointed at the gateway): chat, streams, memory, errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of, usage_chunk
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import a, received, stored, u
from tests.support.routes import memory_routes

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price list on import
litellm = pytest.importorskip("litellm")

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")


def options(client: Any, **extra: Any) -> dict[str, Any]:
    """What a litellm user passes to reach a route of the gateway."""
    return {"api_base": str(client.base_url).rstrip("/"), "api_key": GATEWAY_KEY, "num_retries": 0, **extra}


async def test_chat_turns_with_memory(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(body=chat_completion("first answer")), Step(body=chat_completion("second answer")))
    ask = options(client, extra_headers={"memoryId": "litellm-conv"})
    first = await litellm.acompletion(model="openai/chat", messages=[u("Hello?")], **ask)
    second = await litellm.acompletion(model="openai/chat", messages=[u("Again?")], **ask)
    assert (first.choices[0].message.content, second.choices[0].message.content) == ("first answer", "second answer")
    assert first.usage.total_tokens == 8
    assert received(upstream) == [[u("Hello?")], [u("Hello?"), a("first answer"), u("Again?")]]
    assert (await stored(client, "litellm-conv"))[0] == 200


async def test_stream_reads_to_the_end_without_gateway_usage(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(events=[*stream_of("Hel", "lo")[:-1], usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    stream = await litellm.acompletion(model="openai/chat", messages=[u("Hello?")], stream=True, **options(client))
    parts = [part async for part in stream]
    assert "".join(part.choices[0].delta.content or "" for part in parts if part.choices) == "Hello"
    assert parts[-1].choices[0].finish_reason == "stop"


async def test_stream_cut_upstream_raises_and_stores_nothing(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(events=stream_of("Hel", "lo", done=False)[:-1], reset=True))
    ask = options(client, extra_headers={"memoryId": "litellm-cut"})
    stream = await litellm.acompletion(model="openai/chat", messages=[u("Hello?")], stream=True, **ask)
    with pytest.raises(litellm.ServiceUnavailableError) as caught:  # litellm's MidStreamFallbackError
        async for _ in stream:
            pass
    assert "cut off" in str(caught.value) or "closed" in str(caught.value)
    assert (await stored(client, "litellm-cut"))[0] == 404


async def test_unknown_route_is_not_found(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    with pytest.raises(litellm.NotFoundError) as caught:
        await litellm.acompletion(model="openai/no-such-model", messages=[u("Hello?")], **options(client))
    assert caught.value.status_code == 404
    assert "no-such-model" in str(caught.value)
    assert upstream.calls == 0
