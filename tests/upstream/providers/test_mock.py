"""The built-in mock model through the gateway, as clients other than openai-python use it too."""

from __future__ import annotations

import base64
import struct
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.support.gateway import Gateway

CONFIG = "routes: {m: {provider: mock, mock: {chunkSize: 5}}}"


def decode_base64(data: str) -> list[float]:
    """What openai-node does with a base64 embedding: little-endian float32 values."""
    raw = base64.b64decode(data, validate=True)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


async def test_base64_embeddings_decode_to_the_float_answer(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    inputs = ["first text", "second text"]
    floats = await client.embeddings.create(model="m", input=inputs, encoding_format="float")
    raw = await client.embeddings.with_raw_response.create(model="m", input=inputs, encoding_format="base64")
    data = orjson.loads(raw.content)["data"]
    assert [item["index"] for item in data] == [0, 1]
    assert all(isinstance(item["embedding"], str) for item in data)
    assert [decode_base64(item["embedding"]) for item in data] == [item.embedding for item in floats.data]
    assert floats.data[0].embedding != floats.data[1].embedding


async def test_sdk_default_asks_for_base64_and_gets_it(gateway: Gateway) -> None:
    sent: list[Any] = []

    async def record(request: httpx.Request) -> None:
        sent.append(orjson.loads(request.content))

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    client = await gateway(CONFIG, http_client=http)
    floats = await client.embeddings.create(model="m", input="hello", dimensions=8, encoding_format="float")
    raw = await client.embeddings.with_raw_response.create(model="m", input="hello", dimensions=8)
    assert [body.get("encoding_format") for body in sent] == ["float", "base64"]
    assert isinstance(orjson.loads(raw.content)["data"][0]["embedding"], str)
    assert raw.parse().data[0].embedding == floats.data[0].embedding
    assert len(floats.data[0].embedding) == 8
    await http.aclose()


async def test_unknown_encoding_format_is_a_400_naming_it(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.embeddings.create(model="m", input="x", encoding_format="int8")  # type: ignore[arg-type]
    assert caught.value.status_code == 400
    assert caught.value.type == "invalid_request_error"
    assert caught.value.code == "invalid_value"
    assert "'encoding_format'" in caught.value.body["message"]  # type: ignore[index]


async def test_a_rejected_parameter_is_named_in_param(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.embeddings.create(model="m", input="x", encoding_format="int8")  # type: ignore[arg-type]
    assert caught.value.param == "encoding_format"
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="m", prompt=["text", 5])  # type: ignore[list-item]
    assert caught.value.param == "prompt"


async def test_token_id_input_is_one_embedding(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    assert len((await client.embeddings.create(model="m", input=[1, 2, 3])).data) == 1
    assert len((await client.embeddings.create(model="m", input=[[1, 2], [3]])).data) == 2


async def test_completions_stream_yields_the_text_and_ends_cleanly(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    stream = await client.completions.create(
        model="m", prompt="say hi", stream=True, stream_options={"include_usage": True}
    )
    parts = [part async for part in stream]
    texts = [part for part in parts if part.choices]
    assert len(texts) > 2  # chunkSize 5 splits the answer
    assert "".join(part.choices[0].text for part in texts) == 'Mock completion of: "say hi"'
    assert [part.choices[0].finish_reason for part in texts][-2:] == [None, "stop"]
    assert all(part.object == "text_completion" for part in parts)
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens > 0


async def test_completions_stream_on_the_wire(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    async with client.completions.with_streaming_response.create(
        model="m", prompt=["a", "b"], stream=True
    ) as response:
        lines = [line async for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [orjson.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(set(c) == {"id", "object", "created", "model", "choices"} for c in chunks)
    choices = [c["choices"][0] for c in chunks]
    assert all(set(c) == {"index", "text", "logprobs", "finish_reason"} for c in choices)
    for index, prompt in enumerate(["a", "b"]):
        mine = [c for c in choices if c["index"] == index]
        assert "".join(c["text"] for c in mine) == f'Mock completion of: "{prompt}"'
        assert [c["finish_reason"] for c in mine][-1] == "stop"


@pytest.mark.parametrize(
    ("prompt", "texts"),
    [
        ("hi", ['Mock completion of: "hi"']),
        (["hi", "there"], ['Mock completion of: "hi"', 'Mock completion of: "there"']),
        ([15339, 1917], ["Mock completion of 2 token ids: 15339, 1917"]),
        ([[1, 2], [3]], ["Mock completion of 2 token ids: 1, 2", "Mock completion of 1 token ids: 3"]),
        (list(range(10)), ["Mock completion of 10 token ids: 0, 1, 2, 3, 4, 5, 6, 7, …"]),
    ],
)
async def test_each_prompt_gets_its_own_choice(gateway: Gateway, prompt: Any, texts: list[str]) -> None:
    client = await gateway(CONFIG)
    completion = await client.completions.create(model="m", prompt=prompt)
    assert [(c.index, c.text) for c in completion.choices] == list(enumerate(texts))


async def test_a_mixed_prompt_list_is_a_400_naming_it(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.completions.create(model="m", prompt=["text", 5])  # type: ignore[list-item]
    assert caught.value.code == "invalid_value"
    assert "'prompt'" in caught.value.body["message"]  # type: ignore[index]


@pytest.mark.parametrize("options", [3, [1], "yes", None])
async def test_a_stream_whose_override_set_stream_options_to_a_non_object_is_answered(
    gateway: Gateway, options: Any
) -> None:
    """The loader refuses such an override; the mock must still answer when handed one."""
    from types import MappingProxyType

    from gateway.config.loader import parse_config
    from tests.support.configs import with_targets

    config = with_targets(
        parse_config("routes:\n  m: {provider: mock}\n"),
        {"m": {"override_params": MappingProxyType({"stream_options": options})}},
    )
    client = await gateway(config)
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    texts = [chunk.choices[0].delta.content async for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
    assert "".join(texts).startswith("Mock reply")


def test_the_mock_counts_words_as_split_does_at_single_and_double_spaces() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from gateway.upstream.providers.mock import _words

    words = st.text(st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=5)

    @given(st.lists(st.tuples(words, st.sampled_from([" ", "  "])), max_size=20), st.sampled_from(["", " ", "  "]))
    def agrees(pieces: list[tuple[str, str]], edge: str) -> None:
        text = edge + "".join(word + gap for word, gap in pieces)
        assert _words(text) == len(text.split())

    agrees()
