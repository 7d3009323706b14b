"""gateway.server.api_events: a Responses or Anthropic Messages stream relayed as the upstream's bytes, each event checked as JSON.

The events are parsed from bytes by the gateway's own SSE parser; the streams end to end are in
test_messages_api_native_e2e.py and test_responses_api_native_e2e.py.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.config.loader import parse_config
from gateway.core.errors import GatewayError
from gateway.core.sse import Event, EventParser
from gateway.core.tree import Target
from gateway.server.api_events import ApiEvents
from gateway.server.stream_reader import StreamFailure
from gateway.upstream.providers.apis import MESSAGES_API, RESPONSES_API

SECRET = "sk-upstream-0042"


@pytest.fixture
def target() -> Target:
    config = parse_config(f"routes: {{r: {{name: up, provider: openai, apiKey: {SECRET}}}}}", env={})
    root = config.routes["r"].root
    assert isinstance(root, Target)
    return root


def events(*typed: dict[str, Any]) -> list[Event]:
    """Events as an upstream writes them: an `event:` line naming the data's type, then the data."""
    text = b"".join(b"event: %s\ndata: %s\n\n" % (data["type"].encode(), orjson.dumps(data)) for data in typed)
    return EventParser().feed(text)


def data(event: bytes) -> Any:
    """The JSON of an event's (last) data line."""
    return orjson.loads(event.rstrip(b"\n").rsplit(b"data: ", 1)[1])


async def test_a_messages_stream_is_relayed_as_its_bytes_and_its_usage_added_up(target: Target) -> None:
    reader = ApiEvents(target, MESSAGES_API)
    stream = events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    )
    out: list[bytes] = []
    end = reader.relay(stream, out)
    assert end is stream[-1] and out == [event.raw for event in stream[:-1]]
    assert await reader.finish(end) == end.raw
    assert reader.usage == {"prompt_tokens": 14, "completion_tokens": 5} and reader.failed is None


async def test_a_failed_response_is_relayed_as_its_end_and_noted_as_the_upstreams_failure(target: Target) -> None:
    reader = ApiEvents(target, RESPONSES_API)
    failed = {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"},
              "usage": {"input_tokens": 3, "output_tokens": 2}}  # fmt: skip
    created, end = events({"type": "response.created", "response": {"id": "r1"}}, {"type": "response.failed", "response": failed})
    out: list[bytes] = []
    assert reader.opening(created, None, [end], out=out) is end and out == [created.raw]
    assert await reader.finish(end) == end.raw
    assert reader.failed == (429, "upstream_stream_error")
    assert reader.usage == {"prompt_tokens": 3, "completion_tokens": 2}


@pytest.mark.parametrize("api", [MESSAGES_API, RESPONSES_API], ids=["messages", "responses"])
def test_an_error_event_is_a_stream_failure_naming_the_target_with_its_secrets_masked(target: Target, api: Any) -> None:
    reader = ApiEvents(target, api)
    message = f"key {SECRET} refused"
    error = {"type": "error", "error": {"type": "overloaded_error", "message": message}} if api is MESSAGES_API else {
        "type": "error", "code": "server_error", "message": message}  # fmt: skip
    with pytest.raises(StreamFailure) as caught:
        reader.relay(events(error), [])
    assert caught.value.message == "up: key *** refused" and caught.value.code == "upstream_stream_error"


def test_an_event_without_data_is_relayed_as_it_came(target: Target) -> None:
    reader = ApiEvents(target, MESSAGES_API)
    [comment] = EventParser().feed(b": keep-alive\n\n")
    out: list[bytes] = []
    assert reader.relay([comment], out) is None and out == [comment.raw]


def test_the_responses_error_event_follows_the_last_relayed_sequence_number(target: Target) -> None:
    reader = ApiEvents(target, RESPONSES_API)
    failure = StreamFailure("up: cut off", "upstream_stream_error")
    assert data(reader.error(failure))["sequence_number"] == 0  # nothing relayed yet
    reader.relay(events({"type": "response.output_text.delta", "delta": "a", "sequence_number": 6}), [])
    event = reader.error(failure)
    assert event.startswith(b"event: error\n")
    assert data(event) == {"type": "error", "code": "upstream_stream_error", "message": "up: cut off", "param": None,
                           "sequence_number": 7}  # fmt: skip


def test_the_messages_error_event_is_anthropics(target: Target) -> None:
    reader = ApiEvents(target, MESSAGES_API)
    event = reader.error(StreamFailure("up: cut off", "upstream_stream_error", status=504))
    assert event.startswith(b"event: error\n")
    assert data(event) == {"type": "error", "error": {"type": "timeout_error", "message": "up: cut off"}}


@pytest.mark.parametrize("api", [MESSAGES_API, RESPONSES_API], ids=["messages", "responses"])
@pytest.mark.parametrize(("corrupted", "said"), [
    (b"event: delta\ndata: {not json\n\n", "not JSON: b'{not json'"),
    (b"event: delta\ndata: [1, 2]\n\n", "not a JSON object: b'[1, 2]'"),
    (b"data: null\n\n", "not a JSON object: b'null'"),
], ids=["not-json", "an-array", "null"])  # fmt: skip
def test_an_event_that_is_not_a_json_object_ends_the_stream_where_it_came(
    target: Target, api: Any, corrupted: bytes, said: str
) -> None:
    reader = ApiEvents(target, api)
    before = events({"type": "ping"})
    after = events({"type": "ping"})
    out: list[bytes] = []
    with pytest.raises(StreamFailure) as caught:
        reader.relay([*before, *EventParser().feed(corrupted), *after], out)
    assert caught.value.message == f"up: upstream sent a stream event that is {said}"
    assert caught.value.code == "upstream_stream_error"
    assert out == [before[0].raw]  # what came before it went on; nothing after it does


def test_chats_done_where_the_answers_end_was_due_is_a_cut_off(target: Target) -> None:
    reader = ApiEvents(target, RESPONSES_API)
    with pytest.raises(StreamFailure) as caught:
        reader.relay(EventParser().feed(b"data: [DONE]\n\n"), [])
    assert caught.value.message == "up: upstream stream ended without response.completed"


def test_an_error_event_whose_data_is_not_json_is_still_the_upstreams_error(target: Target) -> None:
    reader = ApiEvents(target, RESPONSES_API)
    with pytest.raises(StreamFailure) as caught:
        reader.relay(EventParser().feed(b"event: error\ndata: overloaded\n\n"), [])
    assert caught.value.message == "up: the upstream reported a failure"


async def test_keep_gets_the_answers_end_before_the_client_does_and_a_failed_answer_is_not_kept(target: Target) -> None:
    kept: list[dict[str, Any]] = []

    async def keep(end: dict[str, Any]) -> None:
        kept.append(end)

    completed = {"type": "response.completed", "response": {"id": "r1", "status": "completed"}}
    [end] = events(completed)
    reader = ApiEvents(target, RESPONSES_API, keep=keep)
    assert reader.opening(end, completed, [], out=[]) is end  # the commit read it: the end at once
    assert await reader.finish(end) == end.raw and kept == [completed]
    [failed] = events({"type": "response.failed", "response": {"id": "r2", "status": "failed"}})
    reader = ApiEvents(target, RESPONSES_API, keep=keep)
    assert reader.relay([failed], []) is failed
    await reader.finish(failed)
    assert kept == [completed]


async def test_a_turn_keep_cannot_store_ends_the_stream_with_the_gateways_error_naming_no_target(target: Target) -> None:
    async def keep(end: dict[str, Any]) -> None:
        raise GatewayError("The memory store is unavailable", code="memory_unavailable", status=503, type="server_error")

    reader = ApiEvents(target, RESPONSES_API, keep=keep)
    [end] = events({"type": "response.completed", "response": {"id": "r1"}})
    reader.relay([end], [])
    with pytest.raises(StreamFailure) as caught:
        await reader.finish(end)
    failure = caught.value
    assert (failure.message, failure.code, failure.kind, failure.status) == (
        "The memory store is unavailable", "memory_unavailable", "server_error", 503)  # fmt: skip
