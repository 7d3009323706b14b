"""The Bridge picks pass-through or translation per call; translated streams end and fail as their API does (no sockets)."""

from __future__ import annotations

import time

import orjson
import pytest

from gateway.config.loader import parse_config
from gateway.core.tree import Target, iter_targets
from gateway.upstream.providers.apis import COUNT_TOKENS, MESSAGES, RESPONSES, RETRIEVE
from gateway.upstream.providers.base import Call, EventStream, Reply, TransportError
from gateway.upstream.providers.bridge import Bridge, anthropic_reshape, responses_reshape
from tests.support.event_streams import Batches, events, read_all
from tests.support.fakes import chat_completion, chunk


class Recorder:
    """A provider that records its calls and answers what it was given."""

    def __init__(self, reply: Reply | None = None, stream: EventStream | None = None) -> None:
        self.calls: list[Call] = []
        self.reply = reply or Reply(200, orjson.dumps(chat_completion("translated")))
        self.opened = stream

    async def complete(self, call: Call) -> Reply:
        self.calls.append(call)
        return self.reply

    async def stream(self, call: Call) -> Reply | EventStream:
        self.calls.append(call)
        return self.opened if self.opened is not None else self.reply


def targets() -> dict[str, Target]:
    config = parse_config("""
routes:
  r:
    strategy: {mode: fallback}
    targets:
      - {name: native, provider: openai, apiKey: k}
      - {name: translated, provider: openai, apiKey: k, responsesApi: translate}
      - {name: claude, provider: anthropic, apiKey: k}
""")
    return {target.name: target for target in iter_targets(config.routes["r"].root)}


async def test_each_call_is_passed_through_or_translated_by_its_target() -> None:
    found = targets()
    native, chat = Recorder(Reply(200, b'{"id": "resp_1", "object": "response"}')), Recorder()
    bridge = Bridge(chat, {RESPONSES: native})
    body = {"model": "m", "input": "hi"}
    passed = await bridge.complete(Call(found["native"], RESPONSES, body, b'{"model":"m","input":"hi"}'))
    assert passed.body == b'{"id": "resp_1", "object": "response"}' and native.calls[0].body == b'{"model":"m","input":"hi"}'
    translated = await bridge.complete(Call(found["translated"], RESPONSES, body))
    assert orjson.loads(translated.body)["output"][0]["content"][0]["text"] == "translated"
    assert chat.calls[0].endpoint == "chat/completions" and chat.calls[0].payload["messages"] == [
        {"role": "user", "content": "hi"}
    ]
    assert len(native.calls) == 1


async def test_a_request_the_translation_refuses_is_that_attempts_400() -> None:
    chat = Recorder()
    reply = await Bridge(chat).complete(Call(targets()["claude"], RESPONSES, {"model": "m", "input": "hi",
                                                                               "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}))
    error = orjson.loads(reply.body)["error"]
    assert reply.status == 400 and error["param"] == "tools[0].type" and not chat.calls


async def test_count_tokens_and_stored_responses_without_a_native_upstream() -> None:
    chat = Recorder()
    bridge = Bridge(chat)
    counted = await bridge.complete(Call(targets()["native"], COUNT_TOKENS, {"model": "m", "messages": [{"role": "user", "content": "hello"}]}))
    assert counted.status == 200 and 0 < orjson.loads(counted.body)["input_tokens"] < 20
    stored = await bridge.complete(Call(targets()["translated"], RETRIEVE, {"response_id": "resp_1"}))
    assert stored.status == 404 and orjson.loads(stored.body)["error"]["param"] == "response_id"
    assert not chat.calls


async def test_a_translated_stream_ends_with_the_apis_closing_events_only_after_done() -> None:
    chat_events = events(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hi"}), chunk({}, "stop"))
    for done, last in ((True, b"message_stop"), (False, b"content_block_delta")):
        upstream = Batches(chat_events, events(b"data: [DONE]\n\n") if done else [])
        opened = await Bridge(Recorder(stream=upstream)).stream(
            Call(targets()["native"], MESSAGES, {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stream": True})
        )
        assert not isinstance(opened, Reply)
        names = await read_all(opened)
        assert names[0] == b"message_start" and names[-1] == last


async def test_a_translated_streams_error_event_fails_the_attempt() -> None:
    upstream = Batches(events(b'data: {"error": {"message": "overloaded", "code": 503}}\n\n'))
    opened = await Bridge(Recorder(stream=upstream)).stream(
        Call(targets()["translated"], RESPONSES, {"model": "m", "input": "x", "stream": True})
    )
    assert not isinstance(opened, Reply)
    with pytest.raises(TransportError) as caught:
        await opened.next_batch()
    assert caught.value.status == 503


def test_a_responses_reshape_gets_a_new_response_id_and_the_time_now() -> None:
    """The ids and the clock the pure core's reshape is given: one id per request, never repeated."""
    before = int(time.time())
    first, second = responses_reshape({"model": "m", "input": "hi"}), responses_reshape({"model": "m", "input": "hi"})
    assert first.response_id.startswith("resp_") and len(first.response_id) == 37
    assert first.response_id != second.response_id
    assert before <= first.created_at <= int(time.time())


def test_an_anthropic_reshape_gets_a_new_message_id() -> None:
    first, second = anthropic_reshape("claude-x"), anthropic_reshape("claude-x")
    assert first.message_id.startswith("msg_") and len(first.message_id) == 28 and first.message_id != second.message_id
    assert first.model == "claude-x"
