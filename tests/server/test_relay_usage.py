"""The usage the gateway asks a stream for (for its metrics) kept from a client that did not ask,
seen on the wire: only the chunk's own top-level `usage` goes, and the rest of its bytes stay as
the upstream wrote them wherever a cut is exact."""

from __future__ import annotations

from typing import Any

import orjson

from tests.support.fakes import FakeUpstream, chunk
from tests.support.gateway import Gateway
from tests.support.sse_wire import raw_stream

FIRST = chunk({"role": "assistant", "content": "Hi"})
DONE = b"data: [DONE]\n\n"


async def wire(gateway: Gateway, upstream: FakeUpstream, events: list[bytes]) -> list[bytes]:
    """The gateway's answer to a chat stream the client asked no usage for, as its SSE events' bytes."""
    answer = await raw_stream(gateway, upstream, events)
    assert upstream.requests[0].body["stream_options"] == {"include_usage": True}  # the gateway's own ask
    return answer


def payload(event: bytes) -> Any:
    assert event.startswith(b"data: ") and event.count(b"\n") == 2, event  # one `data:` line
    return orjson.loads(event[6:])


async def test_a_null_usage_is_cut_from_the_bytes_however_spelled(gateway: Gateway, upstream: FakeUpstream) -> None:
    """OpenAI's spelling, at the end, and others where the cut is exact: the rest is not encoded again."""
    openai = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}}],"usage":null}\n\n'
    first = b'data: {"usage": null, "id": "x", "choices": [{"index": 0, "delta": {"content": "b"}}]}\n\n'
    spaced = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "c"}}], "usage": null}\n\n'
    events = await wire(gateway, upstream, [FIRST, openai, first, spaced, DONE])
    assert events[1:] == [
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n',
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "b"}}]}\n\n',
        b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "c"}}]}\n\n',
        DONE,
    ]


async def test_a_nested_usage_is_the_client_s_and_stays(gateway: Gateway, upstream: FakeUpstream) -> None:
    """Only the top-level usage is the gateway's: a `"usage":null` inside a choice is relayed."""
    nested = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"},"usage":null,"n":1}], "usage": null}\n\n'
    inner_only = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"b"},"usage":null}],"usage":null}\n\n'
    events = await wire(gateway, upstream, [FIRST, nested, inner_only, DONE])
    assert payload(events[1]) == {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}, "usage": None, "n": 1}]}
    assert payload(events[2]) == {"id": "x", "choices": [{"index": 0, "delta": {"content": "b"}, "usage": None}]}


async def test_an_event_of_several_lines_is_rewritten_as_one(gateway: Gateway, upstream: FakeUpstream) -> None:
    """A line break inside the JSON (whitespace between tokens) cannot stay in one `data:` line."""
    lines = b'data: {"id":"x",\ndata: "choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}\n\n'
    events = await wire(gateway, upstream, [FIRST, lines, DONE])
    assert payload(events[1]) == {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}}]}


async def test_a_line_after_the_data_that_ends_alike_is_not_what_is_cut(gateway: Gateway, upstream: FakeUpstream) -> None:
    commented = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}\n: note,"usage":null}\n\n'
    events = await wire(gateway, upstream, [FIRST, commented, DONE])
    assert b"usage" not in b"".join(events)
    assert payload(events[1]) == {"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}}]}


async def test_an_event_s_other_lines_stay_when_its_usage_is_cut(gateway: Gateway, upstream: FakeUpstream) -> None:
    """An upstream that names its events or gives them ids keeps them: only the usage goes."""
    named = b'id: 7\nevent: chunk\ndata: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}\n\n'
    spaced = b'id: 8\ndata: {"id": "x", "choices": [], "usage": null}\n\n'
    events = await wire(gateway, upstream, [FIRST, named, spaced, DONE])
    assert events[1] == b'id: 7\nevent: chunk\ndata: {"id":"x","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    assert events[2].startswith(b"id: 8\ndata: ") and orjson.loads(events[2].split(b"data: ")[1]) == {"id": "x", "choices": []}
    assert events[3] == DONE
