"""Where a request reports what happened: one Trace per request, events fanned out to observers.

The dispatcher, the relay and the memory flow call the Trace's event methods; the Trace keeps
the request's summary (target, attempts, tokens, time to first token) and passes each event on
to the process's Observer. Metrics and logs are observers; nothing that reports an event knows
which consumers exist, and nothing here imports prometheus-client or formats a log line.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import Any, Final

from gateway.core.failures import Failure
from gateway.core.memory.settings import MemoryType
from gateway.core.tree import Route, Target

# Upstream attempt outcomes that are not an HTTP status (the status code's text otherwise), by
# the names their reporters import
TIMEOUT: Final = Failure.TIMEOUT
CONNECT_ERROR: Final = Failure.CONNECT_ERROR
STREAM_ERROR: Final = Failure.STREAM_ERROR
INVALID_RESPONSE: Final = Failure.INVALID_RESPONSE
CLIENT_CLOSED: Final = 499  # nginx's convention: the client left before the answer was complete


class Observer:
    """A consumer of request events. Every method is a no-op here; consumers override what they use.

    Methods run on the event loop inside the request: they must be quick and must not raise.
    An event's arguments past the third come by keyword (`attempt_ended`'s `outcome=` and
    `seconds=`, `usage`'s `prompt=` and `completion=`, `memory_turn`'s `waited=`, `loaded=`,
    `appended=` and `stored=`): an observer's parameter names are part of the contract.
    """

    def route_resolved(self, trace: Trace) -> None: ...

    def attempt_ended(self, trace: Trace, target: Target, *, outcome: str, seconds: float) -> None:
        """One call to `target` ended: `outcome` is its status code as text, or TIMEOUT etc."""

    def retried(self, trace: Trace, target: Target, reason: str) -> None:
        """`target` is called again after an attempt that ended with `reason`."""

    def fell_back(self, trace: Trace, source: Target, reason: str) -> None:
        """The route moved on from `source`, whose last attempt ended with `reason`."""

    def overloaded(self, trace: Trace, target: Target, reason: str) -> None:
        """A call to `target` could not be made for the gateway's own shortage (`reason`: emfile, ...)."""

    def first_token(self, trace: Trace, target: Target, seconds: float) -> None:
        """A stream from `target` committed: its first event goes to the client `seconds` in."""

    def usage(self, trace: Trace, target: Target, *, prompt: int, completion: int) -> None: ...

    def memory_planned(self, trace: Trace, memory_type: str, evicted: int) -> None: ...

    def memory_stored(self, trace: Trace, messages: int) -> None:
        """The turn (`messages` of it, the reply included) is stored."""

    def store_timed(self, store: str, operation: str, seconds: float) -> None:
        """One memory store operation (`load`, `append`) took `seconds`."""

    def lock_waited(self, store: str, seconds: float) -> None:
        """A turn waited `seconds` for its conversation's lock in `store` (the store's `lock` operation)."""

    def memory_turn(
        self, trace: Trace, store: str, *, waited: float, loaded: float, appended: float | None, stored: int
    ) -> None:
        """A planned memory turn lets its conversation go: what it did, told once.

        It waited `waited` seconds for the conversation's lock in `store` and read the
        conversation in `loaded` (its first read; a wider one is a `store_timed` of its own),
        planned what `trace.memory_type` and `trace.evicted` say, tried to write its turn in
        `appended` seconds (None: it did not try) and stored `stored` messages (0: none). By
        default, the events it stands for: `lock_waited`, `store_timed`, `memory_planned`,
        `store_timed` and `memory_stored`. A turn that never planned tells `lock_waited` alone.
        """
        self.lock_waited(store, waited)
        self.store_timed(store, "load", loaded)
        self.memory_planned(trace, trace.memory_type or "", trace.evicted or 0)
        if appended is not None:
            self.store_timed(store, "append", appended)
        if stored:
            self.memory_stored(trace, stored)

    def request_ended(self, trace: Trace) -> None: ...


_NOBODY = Observer()  # the observer of a Trace made without one

_EVENTS = tuple(name for name, value in vars(Observer).items() if callable(value) and not name.startswith("_"))


class Observers(Observer):
    """Several observers as one, each told every event it takes, in order.

    The fan-out is settled here, once: each event is bound to the methods of the observers that
    override it. An event no observer takes costs a call to a no-op; one that a single observer
    takes goes straight to it; no per-event loop over observers that would ignore it.
    """

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = tuple(observers)
        for event in _EVENTS:
            takers = [getattr(observer, event) for observer in self.observers if _takes(observer, event)]
            setattr(self, event, _fan_out(takers, _arity(event)))  # an instance attribute, found before the class's no-op


# An event that stands for others (by default it tells them): an observer takes it when it takes any of them.
_FOLDED = {"memory_turn": ("lock_waited", "store_timed", "memory_planned", "memory_stored")}


def _takes(observer: Observer, event: str) -> bool:
    """Whether `observer` does something on `event` (it does not just inherit Observer's no-op)."""
    return any(
        getattr(getattr(observer, name), "__func__", None) is not getattr(Observer, name)
        for name in (event, *_FOLDED.get(event, ()))
    )


def _ignore(*args: Any, **kwargs: Any) -> None:
    """An event nobody takes."""


def _arity(event: str) -> int:
    """How many arguments `event` takes (its self aside)."""
    code = getattr(Observer, event).__code__
    return int(code.co_argcount) - 1


def _fan_out(calls: Sequence[Callable[..., None]], arity: int = -1) -> Callable[..., None]:
    """One callable that makes each of `calls` in turn with the same arguments (`arity` of them, if known)."""
    if not calls:
        return _ignore
    if len(calls) == 1:
        return calls[0]
    if len(calls) == 2 and arity == 1:  # request_ended, to metrics and the access log: every request's end
        first, second = calls

        # The one argument by name: a call that spreads *args goes through C, a named one stays
        # on the interpreter's fast path for calls between Python functions; every request ends here
        def both_of_one(arg: Any) -> None:
            first(arg)
            second(arg)

        return both_of_one
    if len(calls) == 2:
        first, second = calls

        def both(*args: Any, **kwargs: Any) -> None:
            first(*args, **kwargs)
            second(*args, **kwargs)

        return both

    def fan_out(*args: Any, **kwargs: Any) -> None:
        for call in calls:
            call(*args, **kwargs)

    return fan_out


def combine(observers: Sequence[Observer]) -> Observer:
    """One observer for `observers`: the only one itself, a no-op when there are none."""
    if not observers:
        return Observer()
    if len(observers) == 1:
        return observers[0]
    return Observers(observers)


@dataclass(eq=False, init=False)
class Trace:
    """One request's record: filled in by the layers it passes through, read by observers.

    The constructor sets every field that each request's end and access line read, set or not:
    an attribute found on the instance is read without the look past it to the class that a
    default needs. The rest (retries, fallbacks, ...) are read from the class's defaults.
    """

    observer: Observer
    request_id: str
    method: str
    path: str
    tenant: str | None
    started: float
    endpoint: str | None = None  # chat/completions, completions, embeddings; None for other paths
    route: Route | None = None
    model: str | None = None  # the model the request named (the client's `model`), once its route is resolved
    stream: bool = False
    target: Target | None = None
    attempts: int = 0
    status: int = 0
    error_code: str | None = None
    ttft: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    memory_type: MemoryType | None = None
    evicted: int | None = None
    ended: float | None = None
    elapsed: float = 0.0  # seconds from the start to end(), set there: what observers of the end read
    failed_status: int | None = None  # an answer that started well and ended in an in-band error

    def __init__(
        self,
        observer: Observer | None = None,
        request_id: str = "",
        *,
        method: str = "",
        path: str = "",
        tenant: str | None = None,
    ) -> None:
        self.observer = observer or _NOBODY
        self.request_id, self.method, self.path, self.tenant = request_id, method, path, tenant
        self.started = monotonic()
        # Read by every request's end and access line, mostly unset: found on the instance, they
        # are read without looking past it to the class's defaults.
        self.ended = self.failed_status = self.error_code = self.ttft = None
        self.prompt_tokens = self.completion_tokens = self.memory_type = self.evicted = None

    @property
    def duration(self) -> float:
        """Seconds since the start, or from the start to the end once the request has ended."""
        return self.elapsed if self.ended is not None else monotonic() - self.started

    def resolved(self, route: Route, *, stream: bool, model: str | None = None) -> None:
        """The request goes to `route`; `model`: the one it named, sent upstream to a target that names none."""
        self.route, self.stream, self.model = route, stream, model
        self.observer.route_resolved(self)

    def model_sent(self, target: Target | None) -> str:
        """The model `target` is asked for: its overrideParams model, else the request's (else the route's name).

        What an answer is priced by: a target without a model of its own gets the request's as it came.
        """
        if target is not None:
            model = target.model
            if model is not None:
                return model
        if self.model is not None:
            return self.model
        return self.route.name if self.route is not None else ""

    def attempt_ended(self, target: Target, outcome: str, seconds: float) -> None:
        self.target = target
        self.attempts += 1
        self.observer.attempt_ended(self, target, outcome=outcome, seconds=seconds)

    def retried(self, target: Target, reason: str) -> None:
        self.observer.retried(self, target, reason)

    def fell_back(self, source: Target, reason: str) -> None:
        self.observer.fell_back(self, source, reason)

    def overloaded(self, target: Target, reason: str) -> None:
        self.target = target
        self.observer.overloaded(self, target, reason)

    def first_token(self, target: Target) -> None:
        self.ttft = monotonic() - self.started
        self.observer.first_token(self, target, self.ttft)

    def usage(self, target: Target, usage: Any) -> None:
        """Take the upstream's `usage` object, if it is one; anything else is ignored."""
        if not isinstance(usage, dict):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens", 0)
        if not isinstance(prompt, int) or not isinstance(completion, int) or prompt < 0 or completion < 0:
            return
        if self.prompt_tokens is None:  # the first usage of the request: nearly always the only one
            self.prompt_tokens, self.completion_tokens = prompt, completion
        else:
            self.prompt_tokens += prompt
            self.completion_tokens = (self.completion_tokens or 0) + completion
        self.observer.usage(self, target, prompt=prompt, completion=completion)

    def memory_planned(self, memory_type: MemoryType, evicted: int) -> None:
        self.memory_type, self.evicted = memory_type, evicted
        self.observer.memory_planned(self, memory_type, evicted)

    def memory_stored(self, messages: int) -> None:
        self.observer.memory_stored(self, messages)

    def failed(self, status: int, error_code: str) -> None:
        """The answer under way (a stream's 200 is out) ended with an in-band error worth `status`."""
        self.failed_status, self.error_code = status, error_code

    def end(self, status: int, error_code: str | None = None) -> None:
        """The request is over (for a stream: its last byte is written). Reported once.

        A stream that ended in an in-band error counts with that error's status, not its 200.
        """
        if self.ended is not None:
            return
        self.ended = ended = monotonic()
        self.elapsed = ended - self.started
        self.status = self.failed_status or status
        if error_code is not None:
            self.error_code = error_code
        self.observer.request_ended(self)


current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("gateway_trace", default=None)
"""The trace of the request this task serves; log records take their request id from it."""
