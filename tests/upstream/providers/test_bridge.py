"""The Bridge picks pass-through or translation per call, and streams commit at their first output (no sockets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from gateway.config.loader import parse_config
from gateway.core.sse import Event, parse_event
from gateway.core.tree import Target, iter_targets
from gateway.upstream.providers.apis import (
    COUNT_TOKENS,
    MESSAGES,
    MESSAGES_API,
    RESPONSES,
    RESPONSES_API,
    RETRIEVE,
)
from gateway.upstream.providers.base import Call, EventStream, Reply, TransportError
from gateway.upstream.providers.bridge import Bridge
from gateway.upstream.providers.commit import CommitPoint
from tests.support.fakes import chat_completion, chunk


def events(*raw: bytes) -> list[Event]:
    return [parse_event(item.rstrip(b"\n")) for item in raw]


def named(kind: str, **fields: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"


class Batches(EventStream):
    """An EventStream of the given reads."""

    def __init__(self, *reads: Sequence[Event], status: int = 200) -> None:
        super().__init__(status, {})
        self._reads = [list(read) for read in reads]
        self.closed = False

    async def _read(self) -> list[Event]:
        return self._reads.pop(0) if self._reads else []

    async def close(self) -> None:
        self.closed = True


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


# ---------------------------------------------------------------- the commit point


async def read_all(stream: EventStream) -> list[bytes | None]:
    """The names of the events, read as the dispatcher and the relay do: by batch."""
    out: list[bytes | None] = []
    while batch := await stream.next_batch():
        out += [event.name for event in batch]
    return out


async def test_opening_events_are_held_until_the_first_output() -> None:
    upstream = Batches(
        events(named("response.created", response={}), named("response.in_progress", response={})),
        events(named("response.output_text.delta", delta="Hi"), named("response.completed", response={})),
    )
    committed = CommitPoint(upstream, RESPONSES_API)
    assert await read_all(committed) == [
        b"response.created", b"response.in_progress", b"response.output_text.delta", b"response.completed",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("api", "opening", "failing", "status"),
    [
        (RESPONSES_API, [named("response.created", response={}), named("response.in_progress", response={})],
         named("error", code="rate_limit_exceeded", message="slow"), 429),
        (RESPONSES_API, [named("response.created", response={})],
         named("response.failed", response={"error": {"code": "server_error", "message": "boom"}}), 500),
        (MESSAGES_API, [named("message_start", message={}), named("ping")],
         named("error", error={"type": "overloaded_error", "message": "o"}), 529),
    ],
)  # fmt: skip
async def test_a_failure_before_the_first_output_fails_the_attempt_with_its_status(
    api: Any, opening: list[bytes], failing: bytes, status: int
) -> None:
    committed = CommitPoint(Batches(events(*opening), events(failing)), api)
    with pytest.raises(TransportError) as caught:
        await committed.next_batch()
    assert caught.value.status == status and caught.value.kind == "stream_error"


async def test_a_stream_that_ends_before_its_first_output_has_no_first_event() -> None:
    committed = CommitPoint(Batches(events(named("message_start", message={}), named("ping"))), MESSAGES_API)
    assert await committed.next_batch() == []


async def test_a_failure_after_the_first_output_is_left_to_the_relay() -> None:
    upstream = Batches(events(named("message_start", message={}), named("content_block_start", index=0),
                              named("error", error={"type": "overloaded_error", "message": "o"})))  # fmt: skip
    committed = CommitPoint(upstream, MESSAGES_API)
    assert await read_all(committed) == [b"message_start", b"content_block_start", b"error"]


# ---------------------------------------------------------------- pass-through or translation, per target


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
