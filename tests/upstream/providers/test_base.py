"""The provider seam's EventStream: one read method, the events held before a read handed out first."""

from __future__ import annotations

import pytest

from gateway.core.sse import Event, parse_event
from gateway.upstream.providers.base import EventStream, ReplayedStream


def event(n: int) -> Event:
    return parse_event(b"data: %d" % n)


class Reads(EventStream):
    """A stream whose reads give each of `reads` in turn, then the end; counts its reads."""

    def __init__(self, *reads: list[Event]) -> None:
        super().__init__(201, {"x-ratelimit-remaining-requests": "9"})
        self._reads = list(reads)
        self.reads = 0

    async def _read(self) -> list[Event]:
        self.reads += 1
        return self._reads.pop(0) if self._reads else []

    async def close(self) -> None:
        self._reads.clear()


async def batches(stream: EventStream) -> list[list[Event]]:
    out = []
    while batch := await stream.next_batch():
        out.append(batch)
    return out


async def test_a_stream_is_read_a_batch_at_a_time_until_an_empty_one() -> None:
    stream = Reads([event(1), event(2)], [event(3)])
    assert await batches(stream) == [[event(1), event(2)], [event(3)]]
    assert stream.status == 201 and stream.headers == {"x-ratelimit-remaining-requests": "9"}
    assert await stream.next_batch() == []


async def test_held_events_come_out_before_the_next_read_in_one_batch() -> None:
    stream = Reads([event(3)])
    stream.hold([event(1)])
    stream.hold([event(2)])
    assert await stream.next_batch() == [event(1), event(2)]
    assert stream.reads == 0  # nothing read while events were held
    assert await batches(stream) == [[event(3)]]


async def test_a_replayed_stream_gives_its_events_in_one_batch_then_ends() -> None:
    stream = ReplayedStream([event(1), event(2)], {"retry-after": "1"})
    assert stream.status == 200 and stream.headers == {"retry-after": "1"}
    assert await batches(stream) == [[event(1), event(2)]]
    closed = ReplayedStream([event(1)], {})
    await closed.close()
    assert await closed.next_batch() == []


def test_a_stream_must_say_how_it_reads_and_closes() -> None:
    class Unread(EventStream):
        pass

    with pytest.raises(TypeError):
        Unread()  # type: ignore[abstract]
