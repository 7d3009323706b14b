"""A committed upstream stream, scripted, and what the relay tells the observer about it.

For tests that drive relay_stream directly, where no upstream can be made to fail the way they
need (the gateway's own shortage on a read, a translator that cannot end the answer).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config.loader import parse_config
from gateway.core.routing import answered
from gateway.core.sse import Event, parse_event
from gateway.core.tree import Target
from gateway.observe.trace import Observer, Trace
from gateway.upstream.results import OK, Streamed


def a_target() -> Target:
    """Target `a` of route `chat` (a mock: never called here)."""
    return parse_config("routes: {chat: {name: a, provider: mock}}").routes["chat"].first_target


class Recorder(Observer):
    """The attempts (target, outcome) and the shortages (target, reason) the relay reports."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str]] = []
        self.shortages: list[tuple[str, str]] = []

    def attempt_ended(self, trace: Trace, target: Target, *, outcome: str, seconds: float) -> None:
        self.attempts.append((target.name, outcome))

    def overloaded(self, trace: Trace, target: Target, reason: str) -> None:
        self.shortages.append((target.name, reason))


class ScriptedStream:
    """A 200 stream whose reads give each of `reads` in turn: events, or an exception raised; then the end."""

    def __init__(self, reads: Sequence[list[bytes] | BaseException]) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.reads = list(reads)
        self.closed = False

    async def next_batch(self) -> list[Event]:
        if not self.reads:
            return []
        read = self.reads.pop(0)
        if isinstance(read, BaseException):
            raise read
        return [parse_event(raw.removesuffix(b"\n\n")) for raw in read]

    async def close(self) -> None:
        self.closed = True


def committed(target: Target, first: bytes, stream: ScriptedStream) -> Streamed:
    """The dispatcher's result for a stream that committed at the event `first` (its bytes), the rest to come from `stream`."""
    return Streamed(
        target=target,
        attempts=[],
        outcome=answered(200),
        detail=OK,
        started=0.0,
        stream=stream,  # not an EventStream: it answers the calls the relay makes
        first_event=parse_event(first.removesuffix(b"\n\n")),
        first_chunk=None,
    )
