"""What one attempt came to, judged: an answer read whole, a stream committed at its first event, or a failure.

`Result` is the union of the three. Each names the attempt's target, every attempt of the request
so far, the Outcome the route judges by, a `detail` (OK, or what went wrong) and when the attempt
`started`. What a variant does not hold reads as None (a committed stream's `rest` as no events),
so any Result reads alike: `result.reply`, `result.stream`, `result.kind`.

Nothing changes a Result once it is made. The classes are not frozen all the same: a frozen
dataclass sets each field through object.__setattr__, which every request would pay for, several
times what the whole Result costs to make otherwise. For the same reason a usable answer's
Result is made by `replied` and `streamed`: they take every field by keyword, as a call site
should name them, and make the class from them in field order (calling a class with keywords
builds a dict of them first, on every answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from gateway.core.errors import Attempt
from gateway.core.failures import Failure
from gateway.core.routing import Outcome
from gateway.core.sse import Event
from gateway.core.tree import Target
from gateway.upstream.providers.base import EventStream, Reply

OK: Final = "ok"  # a usable answer's detail: the gateway's word, never an upstream's text


@dataclass(slots=True)
class _Judged:
    """What every variant holds."""

    target: Target
    attempts: list[Attempt]  # the request's, shared by its every attempt
    outcome: Outcome
    detail: str
    started: float  # when the attempt began (time.monotonic)


@dataclass(slots=True)
class Replied(_Judged):
    """An answer read whole, of any status: a usable one, or the upstream's error answer."""

    reply: Reply
    retry_after: float | None = None  # what an error answer asked us to wait, in seconds

    kind: ClassVar[None] = None
    stream: ClassVar[None] = None
    first_event: ClassVar[None] = None
    first_chunk: ClassVar[None] = None
    rest: ClassVar[Sequence[Event]] = ()

    @property
    def headers(self) -> Mapping[str, str]:
        """The upstream's headers worth relaying."""
        return self.reply.headers

    @property
    def label(self) -> str:
        """The attempt's outcome as metrics name it: the status code."""
        return str(self.outcome.status)


@dataclass(slots=True)
class Streamed(_Judged):
    """A stream committed at its first event that carries data, which the dispatcher read (and parsed)."""

    stream: EventStream
    first_event: Event
    first_chunk: Any  # the first event's payload, as the commit read it (None: not read)
    rest: Sequence[Event] = ()  # the events of the first event's read after it (the stream holds later ones)

    kind: ClassVar[None] = None
    reply: ClassVar[None] = None
    retry_after: ClassVar[None] = None

    @property
    def headers(self) -> Mapping[str, str]:
        """The upstream's headers worth relaying."""
        return self.stream.headers

    @property
    def label(self) -> str:
        """The attempt's outcome as metrics name it: the status code."""
        return str(self.outcome.status)


@dataclass(slots=True)
class Failed(_Judged):
    """An attempt that brought no usable answer: `kind` says how (a timeout, a broken stream, ...)."""

    kind: Failure

    reply: ClassVar[None] = None
    stream: ClassVar[None] = None
    first_event: ClassVar[None] = None
    first_chunk: ClassVar[None] = None
    rest: ClassVar[Sequence[Event]] = ()
    retry_after: ClassVar[None] = None

    @property
    def headers(self) -> Mapping[str, str]:
        """None to relay: no answer came."""
        return {}

    @property
    def label(self) -> str:
        """The attempt's outcome as metrics name it: the kind of failure."""
        return self.kind


Result = Replied | Streamed | Failed


def replied(
    *, target: Target, attempts: list[Attempt], outcome: Outcome, detail: str, started: float, reply: Reply,
    retry_after: float | None = None,
) -> Replied:
    """An answer read whole (see the module's docstring for why not Replied(...) by keywords)."""
    return Replied(target, attempts, outcome, detail, started, reply, retry_after)


def streamed(
    *, target: Target, attempts: list[Attempt], outcome: Outcome, detail: str, started: float, stream: EventStream,
    first_event: Event, first_chunk: Any, rest: Sequence[Event] = (),
) -> Streamed:
    """A stream committed at its first event (see the module's docstring for why not Streamed(...) by keywords)."""
    return Streamed(target, attempts, outcome, detail, started, stream, first_event, first_chunk, rest)
