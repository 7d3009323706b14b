"""openai-node (the official JavaScript SDK) as a client: chat, streams, memory, errors, Responses, embeddings.

Each test runs one scenario of tests/clients/node/client.mjs in a `node` process against a real
gateway on loopback, over real scripted upstreams.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.fakes import FakeUpstream, Step, chat_completion, chunk, stream_of, usage_chunk
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import a, received, stored, u
from tests.support.node import run_node
from tests.support.routes import memory_routes


async def test_chat_with_memory_and_no_gateway_key_upstream(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(body=chat_completion("first answer")), Step(body=chat_completion("second answer")))
    first = await run_node(node_client, client, "chat", "chat", MEMORY_ID="node-conv")
    second = await run_node(node_client, client, "chat", "chat", MEMORY_ID="node-conv")
    assert (first["content"], second["content"]) == ("first answer", "second answer")
    assert first["usage"]["total_tokens"] == 8
    assert first["requestId"].startswith("req_")
    # the second turn went up with the first turn and its answer before it
    assert received(upstream) == [[u("Hello?")], [u("Hello?"), a("first answer"), u("Hello?")]]
    for request in upstream.requests:
        assert request.headers["Authorization"] == "Bearer upstream-key"
        assert not any(GATEWAY_KEY in value for value in request.headers.values())
    assert (await stored(client, "node-conv"))[0] == 200


async def test_stream_hides_the_usage_the_gateway_asked_for(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(events=[*stream_of("Hel", "lo")[:-1], usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    outcome = await run_node(node_client, client, "stream", "chat")
    assert outcome == {"content": "Hello", "usage": None, "chunks": 4}


async def test_stream_with_usage_asked_for_gets_it(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(events=[*stream_of("Hel", "lo")[:-1], usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    outcome = await run_node(node_client, client, "streamUsage", "chat")
    assert outcome["content"] == "Hello"
    assert outcome["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


async def test_stream_cut_upstream_throws_in_node_and_stores_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    upstream.then(Step(events=stream_of("Hel", "lo", done=False)[:-1], reset=True))
    outcome = await run_node(node_client, client, "stream", "chat", MEMORY_ID="node-cut")
    # the stream had begun: the failure arrives in-band, and the SDK throws rather than end quietly
    assert outcome["thrown"]["name"] == "APIError", outcome
    assert "cut off" in outcome["thrown"]["message"] or "closed" in outcome["thrown"]["message"], outcome
    assert (await stored(client, "node-cut"))[0] == 404


async def test_client_abort_mid_stream_stores_nothing(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    never = asyncio.Event()
    upstream.then(Step(events=[chunk({"role": "assistant", "content": "Hel"}), never, chunk({}, "stop")]))
    outcome = await run_node(node_client, client, "abort", "chat", MEMORY_ID="node-abort")
    assert outcome == {"first": {"role": "assistant", "content": "Hel"}}
    await asyncio.wait_for(upstream.disconnected.wait(), 10)  # the gateway let go of the upstream too
    assert (await stored(client, "node-abort"))[0] == 404


async def test_unknown_model_throws_not_found_with_the_openai_error(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    outcome = await run_node(node_client, client, "chat", "no-such-model")
    thrown = outcome["thrown"]
    assert (thrown["name"], thrown["status"]) == ("NotFoundError", 404)
    assert set(thrown["error"]) == {"message", "type", "param", "code"}
    assert (thrown["error"]["code"], thrown["error"]["param"]) == ("model_not_found", "model")
    assert upstream.calls == 0


async def test_bad_key_throws_authentication_error(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    outcome = await run_node(node_client, client, "chat", "chat", GATEWAY_KEY="sk-wrong")
    assert (outcome["thrown"]["name"], outcome["thrown"]["status"]) == ("AuthenticationError", 401)
    assert upstream.calls == 0


async def test_responses_api_translated_onto_chat(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path
) -> None:
    client = await gateway(memory_routes(upstream, tmp_path, target=", responsesApi: translate"))
    upstream.then(Step(body=chat_completion("a response")), Step(events=stream_of("a ", "stream")))
    answer = await run_node(node_client, client, "responses", "chat")
    assert answer == {"text": "a response", "status": "completed"}
    streamed = await run_node(node_client, client, "responsesStream", "chat")
    assert streamed["text"] == "a stream"
    assert streamed["types"][0] == "response.created" and streamed["types"][-1] == "response.completed"
    assert [request.path for request in upstream.requests] == ["/v1/chat/completions"] * 2


async def test_embeddings_as_base64_decode_in_node(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    outcome = await run_node(node_client, client, "embeddings", "mock")
    floats = await client.embeddings.create(model="mock", input=["one", "two"], encoding_format="float")
    assert outcome["count"] == 2
    assert outcome["dimensions"] == len(floats.data[0].embedding)
    assert outcome["first"] == floats.data[0].embedding[:3]


async def test_models_list_pages_in_node(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, node_client: Path) -> None:
    client = await gateway(memory_routes(upstream, tmp_path))
    outcome = await run_node(node_client, client, "models", "chat")
    assert sorted(outcome["names"]) == ["chat", "mock"]
