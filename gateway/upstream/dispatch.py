"""Runs the attempts the strategy tree asks for: retries, timeouts and the stream commit point.

`routing.walk` decides which target comes next; this module does the I/O for each attempt and
reports its Outcome back. A target's own retries happen before the parent node judges: a plain
loop, entered only once a call failed. With circuit breakers, the walk is told which targets it
may call, and every attempt's outcome goes to the target's breaker; a target skipped for its open
circuit is listed among the attempts (status 503, "skipped") without a call. A route of one
target whose circuit is closed (the common case) takes no walk at all.

A call that fails for the gateway's own shortage (OverloadedError: out of file descriptors, ...)
ends the request at once as the client's 503: it is no attempt of the target, tells its breaker
nothing, and moves on to no other target, whose call would need the same resource.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import orjson

from gateway.core.breaker import FORCED, ORDINARY, PROBE, REFUSED, SKIPPED
from gateway.core.chunks import MalformedEvent, read_chunk, replay
from gateway.core.errors import Attempt, OverloadedError, UpstreamError
from gateway.core.nesting import MAX_JSON_DEPTH, too_deep
from gateway.core.routing import CIRCUIT_OPEN, Force, Health, Outcome, Random, Skip, Step, answered, walk
from gateway.core.sse import Event
from gateway.core.tree import RetryPolicy, Route, Target
from gateway.observe.trace import CLIENT_CLOSED, INVALID_RESPONSE, STREAM_ERROR, TIMEOUT, Trace
from gateway.upstream.breakers.board import Breakers
from gateway.upstream.deadline import Deadline, Deadlines
from gateway.upstream.providers.base import (
    JSON,
    Call,
    EventStream,
    Provider,
    ReplayedStream,
    Reply,
    TransportError,
)
from gateway.upstream.redaction import redact


@dataclass(slots=True)
class Request:
    """What the client asked for, parsed once, and the trace its events go to.

    `hidden_usage`: the gateway, not the client, asked the stream for its final usage chunk,
    which the relay must then keep from the client. A body that is not JSON (a multipart form)
    comes with its `content_type` and `encode`, which gives its bytes with a target's
    overrideParams applied.
    """

    endpoint: str
    payload: dict[str, Any]
    raw: bytes | None
    stream: bool = False
    trace: Trace = field(default_factory=Trace)
    hidden_usage: bool = False
    content_type: str = JSON
    encode: Callable[[Mapping[str, Any]], bytes] | None = None
    client_headers: Mapping[str, str] = field(default_factory=dict)  # the few a provider passes on


@dataclass(slots=True)
class Result:
    """One attempt, judged: a complete Reply, or a stream committed at `first_event`, or a failure.

    `dispatch` returns the attempt its route settled on when that is a success. `attempts` lists
    every attempt of the request so far; `detail` is OK or says what went wrong; `kind` names a
    failure that brought no usable answer (TIMEOUT, CONNECT_ERROR, STREAM_ERROR, ...).
    """

    target: Target
    attempts: list[Attempt]
    outcome: Outcome
    detail: str = ""
    reply: Reply | None = None
    stream: EventStream | None = None
    first_event: Event | None = None
    first_chunk: Any = None  # the first event's payload, as the commit read it (None: not read)
    # the events that came after the first in its read (the stream holds those of later reads)
    rest: Sequence[Event] = ()
    retry_after: float | None = None  # what the upstream asked us to wait, in seconds
    kind: str | None = None
    started: float = 0.0  # when the attempt began (time.monotonic)

    @property
    def headers(self) -> Mapping[str, str]:
        source = self.reply if self.reply is not None else self.stream
        return source.headers if source is not None else {}

    @property
    def label(self) -> str:
        """The attempt's outcome as metrics name it: the kind of failure, else the status code."""
        return self.kind or str(self.outcome.status)


OK: Final = "ok"  # a usable answer's detail: the gateway's word, never an upstream's text

MAX_RETRY_AFTER_SECONDS = 86_400.0  # a day; a longer or non-finite value is nonsense, taken as absent


def _seconds(value: float) -> float | None:
    return value if 0.0 <= value <= MAX_RETRY_AFTER_SECONDS else None  # NaN fails both comparisons


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the upstream asked us to wait (`retry-after-ms`, then `retry-after`), if any.

    Values that are not finite, negative or beyond a day are treated as absent.
    """
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            if (seconds := _seconds(float(ms) / 1000)) is not None:
                return seconds
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return _seconds(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return _seconds(max(when - (time.time() if now is None else now), 0.0))


class _ErrorFields(NamedTuple):
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None


def _error_fields(body: bytes) -> _ErrorFields:
    """The message, type, code and param of an upstream error body, OpenAI-shaped or not."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _ErrorFields(body[:200].decode(errors="replace").strip())
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message, kind, code, param = (error.get(k) for k in ("message", "type", "code", "param"))
        return _ErrorFields(
            str(message)[:300] if message is not None else "",
            kind if isinstance(kind, str) else None,
            str(code) if code is not None else None,
            param if isinstance(param, str) else None,
        )
    if isinstance(error, str):
        return _ErrorFields(error[:300])
    return _ErrorFields(body[:200].decode(errors="replace").strip())


class Dispatcher:
    """Walks a route's strategy tree, one attempt at a time."""

    def __init__(
        self,
        providers: Mapping[str, Provider],
        *,
        rng: Random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        breakers: Breakers | None = None,
    ) -> None:
        self._providers = providers
        self._rng = rng
        self._sleep = sleep
        self._breakers = breakers
        # The deadlines of the loop its providers' session runs on, the loop looked up once: on 3.11
        # each lookup is a getpid() syscall. Built outside a loop (in tests), it looks the loop up
        # per attempt.
        try:
            self._deadlines: Deadlines | None = Deadlines(asyncio.get_running_loop())
        except RuntimeError:
            self._deadlines = None

    @property
    def breakers(self) -> Breakers | None:
        return self._breakers

    def dispatch(self, route: Route, request: Request) -> Coroutine[Any, Any, Result]:
        """Try targets until the tree settles; raise UpstreamError when it settles on a failure.

        A route of one target whose circuit is closed gets that target's coroutine back: its
        attempt decides the route, and the request awaits it through no coroutine more.
        """
        health = self._breakers.health(route) if self._breakers is not None else None
        root = route.root
        if health is None and isinstance(root, Target):  # nothing to walk
            return self._try_target(root, request, [], settles=route)
        return self._walk(route, request, health)

    async def _walk(self, route: Route, request: Request, health: Health | None) -> Result:
        """The route's strategy tree, walked one step at a time until it settles."""
        attempts: list[Attempt] = []
        walker = walk(route.root, self._rng, health)
        step = next(walker)
        while True:
            if health is None and isinstance(step, Target):  # every breaker closed: nothing to ask
                result = await self._try_target(step, request, attempts)
            else:
                result = await self._take(step, request, attempts)
            try:
                step = walker.send(result.outcome)
            except StopIteration:
                break
            request.trace.fell_back(result.target, result.label)
        if result.outcome.ok:
            return result
        raise self._failure(route, result)

    async def _take(self, step: Step, request: Request, attempts: list[Attempt]) -> Result:
        """One step of a walk that knows of open circuits: a call, a probe, or a skip."""
        assert self._breakers is not None
        match step:
            case Skip(target=target):
                return _skip(target, attempts)
            case Force(target=target):  # every target is open: this one is tried anyway
                return await self._try_target(target, request, attempts, admitted=FORCED)
            case Target():
                admitted = await self._breakers.admit(step)
                if admitted == REFUSED:  # another request has its trial
                    return _skip(step, attempts)
                return await self._try_target(step, request, attempts, admitted=admitted)
        raise TypeError(f"not a walk step: {step!r}")

    def _failure(self, route: Route, last: Result) -> UpstreamError:
        target, attempts = last.target, last.attempts
        fields = _ErrorFields("")
        headers = {"x-gateway-route": route.name, "x-gateway-target": target.name, "x-gateway-attempts": str(len(attempts))}
        if last.reply is not None:
            fields = _error_fields(last.reply.body)
            headers.update(last.reply.headers)
        elif last.outcome.skipped:
            fields = fields._replace(code=SKIPPED)
        elif last.outcome.transport:
            fields = fields._replace(code="upstream_timeout" if last.outcome.status == 504 else "upstream_unavailable")
        if len(attempts) > 1:
            headers["x-should-retry"] = "false"
        code, param = (redact(v, target) if v else v for v in (fields.code, fields.param))
        return UpstreamError(attempts, type=fields.type, code=code, param=param, headers=headers)

    def _try_target(
        self, target: Target, request: Request, attempts: list[Attempt], *, admitted: int = ORDINARY,
        settles: Route | None = None,
    ) -> Coroutine[Any, Any, Result]:  # fmt: skip
        """Call `target`, retrying as its policy says.

        `admitted` PROBE (the half-open trial) or FORCED (every target was open): the first call
        decides the target's open breaker. `settles`: the route this target alone decides, whose
        failure the last attempt raises. A target without retries gets its one attempt's own
        coroutine back: no frame more on the common path.
        """
        call = self._call_for(target, request)
        if not target.retry.attempts:
            return self._attempt(call, request, attempts, admitted, settles)
        return self._retrying(call, request, attempts, admitted, settles)

    async def _retrying(
        self, call: Call, request: Request, attempts: list[Attempt], admitted: int, settles: Route | None
    ) -> Result:
        """The first attempt, then more while the retry policy and the target's breaker allow."""
        tried = await self._attempt(call, request, attempts, admitted)
        target = call.target
        policy, breakers = target.retry, self._breakers
        for number in range(1, policy.attempts + 1):  # `number`: the attempt that just failed
            if not _retryable(policy, tried):
                break
            if breakers is not None and not breakers.available(target):  # a retry would call an open circuit
                break
            await self._sleep(_backoff(policy, number, tried, self._rng))
            request.trace.retried(target, tried.label)
            tried = await self._attempt(call, request, attempts, ORDINARY)
        if settles is not None and not tried.outcome.ok:
            raise self._failure(settles, tried)
        return tried

    async def _attempt(
        self, call: Call, request: Request, attempts: list[Attempt], admitted: int, settles: Route | None = None
    ) -> Result:
        """One call: told to the trace, listed among the attempts, reported to the target's breaker.

        `settles`: the route this one attempt decides; its failure is raised as the route's.
        """
        target, trace, breakers = call.target, request.trace, self._breakers
        started = time.monotonic()
        try:
            if request.stream:
                tried = await self._open_stream(call, attempts)  # judges its own failures: it closes what it opened
            else:  # here, not in a coroutine of its own: the common call costs a frame less
                with Deadline(self._deadlines or Deadlines(asyncio.get_running_loop()), target.timeout):
                    reply = await self._providers[target.provider].complete(call)
                tried = _judge_reply(call, reply, attempts)
        except TransportError as exc:
            tried = Result(target, attempts, Outcome(exc.status, transport=True), exc.detail, kind=exc.kind)
        except TimeoutError:
            tried = Result(target, attempts, TIMED_OUT, f"timed out after {target.timeout:g}s", kind=TIMEOUT)
        except BaseException as exc:
            if admitted == PROBE and breakers is not None:  # no verdict: the next request may take the trial
                breakers.release(target)
            if isinstance(exc, asyncio.CancelledError):  # the client left: the attempt ends here, unanswered
                trace.attempt_ended(target, str(CLIENT_CLOSED), time.monotonic() - started)
            elif isinstance(exc, OverloadedError):  # the gateway's own shortage: no attempt, no fallback
                trace.overloaded(target, exc.reason)
            raise
        tried.started = started
        outcome = tried.outcome
        detail = tried.detail if tried.detail == OK else redact(tried.detail, target)  # OK is ours, no upstream text
        # tuple.__new__, as Attempt._make does inside: a NamedTuple's own constructor is a Python
        # function called from C (~3k instructions), _make a Python classmethod (~2k)
        attempts.append(tuple.__new__(Attempt, (target.name, outcome.status, detail)))
        if tried.stream is None:  # a committed stream's attempt ends when the relay ends it
            trace.attempt_ended(target, tried.kind or str(outcome.status), time.monotonic() - started)  # tried.label, inline
        # a stream is judged at its first event, like the route judges it
        if breakers is not None and (told := breakers.record(target, outcome, admitted != ORDINARY, tried.retry_after)):
            await told
        if settles is not None and not outcome.ok:
            raise self._failure(settles, tried)
        return tried

    @staticmethod
    def _call_for(target: Target, request: Request) -> Call:
        overrides, kind = target.override_params, request.content_type
        if not overrides:
            # by position: keywords to a class cost ~1.4k instructions more (a dict for its __init__)
            return Call(target, request.endpoint, request.payload, request.raw, kind, request.client_headers)
        raw = request.encode(overrides) if request.encode is not None else None
        call = Call(target, request.endpoint, {**request.payload, **overrides}, raw, content_type=kind)
        call.client_headers = request.client_headers
        return call

    async def _open_stream(self, call: Call, attempts: list[Attempt]) -> Result:
        target = call.target
        opened: Reply | EventStream | None = None
        try:
            with Deadline(self._deadlines or Deadlines(asyncio.get_running_loop()), target.timeout):
                opened = await self._providers[target.provider].stream(call)
                if isinstance(opened, Reply):
                    return _replay_reply(call, opened, attempts)
                # the first event that carries data (comments and keep-alives before it are dropped)
                first: Event | None = None
                rest: Sequence[Event] = ()
                while first is None and (batch := await opened.next_batch()):
                    for index, event in enumerate(batch):
                        if event.data is not None:
                            first, rest = event, batch[index + 1 :]
                            break
        except TransportError as exc:
            await _close(opened)
            return Result(target, attempts, Outcome(exc.status, transport=True), exc.detail, kind=exc.kind)
        except TimeoutError:
            await _close(opened)
            return Result(target, attempts, TIMED_OUT, f"no stream event within {target.timeout:g}s", kind=TIMEOUT)
        except BaseException:
            await _close(opened)
            raise
        if first is None:
            await opened.close()
            return _broken(target, attempts, "upstream stream ended before its first event", STREAM_ERROR)
        try:
            chunk, error = read_chunk(first)
        except MalformedEvent as exc:
            await opened.close()
            return _broken(target, attempts, str(exc), STREAM_ERROR)
        if error is not None:
            await opened.close()
            status = error.get("status") or error.get("code")
            status = status if isinstance(status, int) and 400 <= status <= 599 else 502
            detail = f"error event: {error.get('message', '')}"[:300]
            return Result(target, attempts, Outcome(status, transport=True), detail, kind=STREAM_ERROR)
        # by position: keywords to a class cost ~1.4k instructions more (a dict for its __init__)
        return Result(target, attempts, answered(opened.status), OK, None, opened, first, chunk, rest)


TIMED_OUT: Final = Outcome(504, transport=True)
BROKEN: Final = Outcome(502, transport=True)  # no usable answer: unreachable, cut off or malformed


def _broken(target: Target, attempts: list[Attempt], detail: str, kind: str) -> Result:
    """An attempt whose answer could not be used (a 502), `kind` saying how."""
    return Result(target, attempts, BROKEN, detail, kind=kind)


def _skip(target: Target, attempts: list[Attempt]) -> Result:
    """A target passed over for its open circuit: listed among the attempts, never called."""
    attempts.append(Attempt(target.name, CIRCUIT_OPEN.status, "skipped: its circuit is open"))
    return Result(target, attempts, CIRCUIT_OPEN, "circuit open", kind=SKIPPED)


def _replay_reply(call: Call, reply: Reply, attempts: list[Attempt]) -> Result:
    """A stream request answered with one JSON body: judged, then replayed as a stream."""
    tried = _judge_reply(call, reply, attempts)
    if not tried.outcome.ok:
        return tried
    options = call.payload.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    events = replay(reply.data, endpoint=call.endpoint, include_usage=include_usage)
    if events is None:
        detail = "malformed upstream response (a stream was asked for; the JSON is not a completion)"
        return _broken(call.target, attempts, detail, INVALID_RESPONSE)
    return Result(call.target, attempts, answered(200), OK, None, ReplayedStream([], reply.headers), events[0], None, events[1:])


async def _close(opened: Reply | EventStream | None) -> None:
    if opened is not None and not isinstance(opened, Reply):
        await opened.close()


# Endpoints whose 2xx answer is relayed as it comes (audio, or text such as srt), never parsed.
OPAQUE_ANSWERS: Final = frozenset({"audio/speech", "audio/transcriptions", "audio/translations"})


def _judge_reply(call: Call, reply: Reply, attempts: list[Attempt]) -> Result:
    """`call`'s answer as the route judges it: a 2xx that is what it should be, or a failure."""
    target, status = call.target, reply.status
    if not 200 <= status < 300:
        if 300 <= status < 400:  # redirects are never followed: the upstream is misconfigured or hostile
            detail = f"upstream answered {status} (a redirect, which the gateway does not follow)"
            return _broken(target, attempts, detail, INVALID_RESPONSE)
        if status < 200:  # no final answer (101 switches protocols): relayed, it would break the client's connection
            return _broken(target, attempts, f"upstream answered {status} (not a final answer)", INVALID_RESPONSE)
        detail = _error_fields(reply.body).message
        return Result(target, attempts, answered(status), detail, reply, retry_after=retry_after_seconds(reply.headers))
    if call.endpoint in OPAQUE_ANSWERS:
        return Result(target, attempts, answered(status), OK, reply)
    try:
        data = reply.data = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        return _broken(target, attempts, f"malformed upstream response (status {status}, not JSON)", INVALID_RESPONSE)
    if too_deep(reply.body, data):  # reshaped, stored or translated, it would be written again by orjson
        detail = f"malformed upstream response (JSON nested deeper than {MAX_JSON_DEPTH} levels)"
        return _broken(target, attempts, detail, INVALID_RESPONSE)
    if isinstance(data, dict) and (error := data.get("error")) and "object" not in data and "choices" not in data:
        # an error where the answer should be: the SDK would hand the caller an answer without choices
        fields = _error_fields(reply.body)
        code = error.get("status") or error.get("code") if isinstance(error, dict) else None
        failure = code if isinstance(code, int) and 400 <= code <= 599 else 502
        detail = f"error in a {status} answer: {fields.message}"[:300]
        return Result(target, attempts, Outcome(failure, transport=True), detail, kind=INVALID_RESPONSE)
    return Result(target, attempts, answered(status), OK, reply)


def _retryable(policy: RetryPolicy, tried: Result) -> bool:
    """Whether the policy calls the target again after `tried` (not when asked to wait too long)."""
    outcome = tried.outcome
    if outcome.ok or not (outcome.transport or outcome.status in policy.on_status_codes):
        return False
    return tried.retry_after is None or tried.retry_after <= policy.max_retry_after_seconds


def _backoff(policy: RetryPolicy, number: int, tried: Result, rng: Random) -> float:
    """Seconds to wait after failed attempt `number` (the first is 1): the upstream's Retry-After, else full jitter."""
    if tried.retry_after is not None:
        return float(tried.retry_after)
    ceiling = min(policy.max_backoff_seconds, policy.backoff_seconds * 2.0 ** (number - 1))
    return rng.random() * ceiling
