"""Runs the attempts the strategy tree asks for: retries, timeouts and the stream commit point.

`routing.walk` decides which target comes next; this module does the I/O for each attempt and
reports its Outcome back. A target's own retries happen before the parent node judges: a plain
loop, entered only once a call failed. With circuit breakers, the walk is told which targets it
may call, and every attempt's outcome goes to the target's breaker; a target skipped for its open
circuit is listed among the attempts (status 503, "skipped") without a call. A route of one
target whose circuit is closed (the common case) takes no walk at all.

A call whose provider is still loading (litellm's import, seconds: `deferred.Loading`) is no
attempt: it is waited for before the attempt's deadline starts, and tells the breaker nothing.

A call that fails for the gateway's own shortage (OverloadedError: out of file descriptors, ...)
ends the request at once as the client's 503: it is no attempt of the target, tells its breaker
nothing, and moves on to no other target, whose call would need the same resource.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.core.breaker import FORCED, ORDINARY, PROBE, REFUSED, SKIPPED, Admission
from gateway.core.chunks import MalformedEvent, read_chunk
from gateway.core.errors import Attempt, OverloadedError, UpstreamError
from gateway.core.routing import CIRCUIT_OPEN, Force, Health, Outcome, Random, Skip, Step, answered, walk
from gateway.core.sse import Event
from gateway.core.tree import RetryPolicy, Route, Target
from gateway.observe.trace import CLIENT_CLOSED, STREAM_ERROR, TIMEOUT, Trace
from gateway.upstream.breakers.board import Breakers
from gateway.upstream.deadline import Deadline, Deadlines
from gateway.upstream.providers.base import JSON, Call, EventStream, Provider, Reply, TransportError
from gateway.upstream.providers.deferred import Loading
from gateway.upstream.redaction import redact
from gateway.upstream.results import OK, Failed, Replied, Result, streamed
from gateway.upstream.verdict import TIMED_OUT, ErrorFields, broken, error_fields, judge_reply, replay_reply

__all__ = ["Dispatcher", "Request", "Result"]  # Result: what the server reads (gateway.upstream.results)


LOAD_SECONDS = 30.0  # the longest a call waits for its provider to load (litellm's import takes seconds)


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
                if admitted is REFUSED:  # another request has its trial
                    return _skip(step, attempts)
                return await self._try_target(step, request, attempts, admitted=admitted)
        raise TypeError(f"not a walk step: {step!r}")

    def _failure(self, route: Route, last: Result) -> UpstreamError:
        """The error the route settled on with `last`, every attempt listed."""
        target, attempts = last.target, last.attempts
        headers = {"x-gateway-route": route.name, "x-gateway-target": target.name, "x-gateway-attempts": str(len(attempts))}
        match last:
            case Replied(reply=reply):
                fields = error_fields(reply.body)
                headers.update(reply.headers)
            case Failed(outcome=outcome) if outcome.skipped:
                fields = ErrorFields("", code=SKIPPED)
            case _ if last.outcome.transport:  # no usable answer: unreachable, timed out, cut off, malformed
                fields = ErrorFields("", code="upstream_timeout" if last.outcome.status == 504 else "upstream_unavailable")
            case _:
                fields = ErrorFields("")
        if len(attempts) > 1:
            headers["x-should-retry"] = "false"
        code, param = (redact(v, target) if v else v for v in (fields.code, fields.param))
        return UpstreamError(attempts, type=fields.type, code=code, param=param, headers=headers)

    def _try_target(
        self, target: Target, request: Request, attempts: list[Attempt], *, admitted: Admission = ORDINARY,
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
            return self._attempt(call, request, attempts, admitted=admitted, settles=settles)
        return self._retrying(call, request, attempts, admitted=admitted, settles=settles)

    async def _retrying(
        self, call: Call, request: Request, attempts: list[Attempt], *, admitted: Admission, settles: Route | None
    ) -> Result:
        """The first attempt, then more while the retry policy and the target's breaker allow."""
        tried = await self._attempt(call, request, attempts, admitted=admitted)
        target = call.target
        policy, breakers = target.retry, self._breakers
        for number in range(1, policy.attempts + 1):  # `number`: the attempt that just failed
            if not _retryable(policy, tried):
                break
            if breakers is not None and not breakers.available(target):  # a retry would call an open circuit
                break
            await self._sleep(_backoff(policy, number, tried, rng=self._rng))
            request.trace.retried(target, tried.label)
            tried = await self._attempt(call, request, attempts, admitted=ORDINARY)
        if settles is not None and not tried.outcome.ok:
            raise self._failure(settles, tried)
        return tried

    async def _attempt(
        self, call: Call, request: Request, attempts: list[Attempt], *, admitted: Admission, settles: Route | None = None
    ) -> Result:
        """One call: told to the trace, listed among the attempts, reported to the target's breaker.

        `settles`: the route this one attempt decides; its failure is raised as the route's.
        """
        target, trace, breakers = call.target, request.trace, self._breakers
        started = time.monotonic()
        tried: Result
        try:
            if request.stream:  # judges its own failures: it closes what it opened
                tried = await self._open_stream(call, attempts, started)
            else:  # here, not in a coroutine of its own: the common call awaits no coroutine more
                with Deadline(self._deadlines or Deadlines(asyncio.get_running_loop()), target.timeout):
                    reply = await self._providers[target.provider].complete(call)
                tried = judge_reply(call, reply, attempts, started=started)
        except TransportError as exc:
            tried = _transport_failed(target, attempts, exc, started=started)
        except TimeoutError:
            detail = f"timed out after {target.timeout:g}s"
            tried = Failed(target=target, attempts=attempts, outcome=TIMED_OUT, detail=detail, kind=TIMEOUT, started=started)
        except Loading as loading:  # before the call: no attempt yet
            return await self._loaded(loading, call, request, attempts=attempts, admitted=admitted, settles=settles)
        except BaseException as exc:
            if admitted is PROBE and breakers is not None:  # no verdict: the next request may take the trial
                breakers.release(target)
            if isinstance(exc, asyncio.CancelledError):  # the client left: the attempt ends here, unanswered
                trace.attempt_ended(target, str(CLIENT_CLOSED), time.monotonic() - started)
            elif isinstance(exc, OverloadedError):  # the gateway's own shortage: no attempt, no fallback
                trace.overloaded(target, exc.reason)
            raise
        outcome = tried.outcome
        detail = tried.detail if tried.detail == OK else redact(tried.detail, target)  # OK is ours, no upstream text
        attempts.append(Attempt(target.name, outcome.status, detail))
        if tried.stream is None:  # a committed stream's attempt ends when the relay ends it
            trace.attempt_ended(target, tried.label, time.monotonic() - started)
        # a stream is judged at its first event, like the route judges it
        probe = admitted is not ORDINARY
        if breakers is not None and (told := breakers.record(target, outcome, probe=probe, retry_after=tried.retry_after)):
            await told
        if settles is not None and not outcome.ok:
            raise self._failure(settles, tried)
        return tried

    async def _loaded(
        self, loading: Loading, call: Call, request: Request, *, attempts: list[Attempt], admitted: Admission,
        settles: Route | None,
    ) -> Result:  # fmt: skip
        """The attempt, once its provider has loaded: the wait is no attempt's and is told to no breaker.

        The wait has a bound of its own (LOAD_SECONDS, or the target's timeout when longer): a
        provider that has not loaded by then (an import that hangs) fails the target as a timeout
        the route moves on from, still unknown to its breaker (the upstream was never called).
        """
        target = call.target
        started = time.monotonic()
        patience = max(LOAD_SECONDS, target.timeout)
        try:
            async with asyncio.timeout(patience):
                await loading.wait()
        except BaseException as exc:
            if admitted is PROBE and self._breakers is not None:  # no verdict: the next request may take the trial
                self._breakers.release(target)
            if not isinstance(exc, TimeoutError):
                raise
            detail = f"its provider did not load within {patience:g}s"
            attempts.append(Attempt(target.name, TIMED_OUT.status, detail))
            request.trace.attempt_ended(target, TIMEOUT, time.monotonic() - started)
            tried = Failed(target=target, attempts=attempts, outcome=TIMED_OUT, detail=detail, kind=TIMEOUT, started=started)
            if settles is not None:
                raise self._failure(settles, tried) from None
            return tried
        return await self._attempt(call, request, attempts, admitted=admitted, settles=settles)

    @staticmethod
    def _call_for(target: Target, request: Request) -> Call:
        overrides, kind = target.override_params, request.content_type
        if not overrides:
            return Call(target, request.endpoint, request.payload, raw=request.raw, content_type=kind, client_headers=request.client_headers)
        raw = request.encode(overrides) if request.encode is not None else None
        call = Call(target, request.endpoint, {**request.payload, **overrides}, raw=raw, content_type=kind)
        call.client_headers = request.client_headers
        return call

    async def _open_stream(self, call: Call, attempts: list[Attempt], started: float) -> Result:
        """Open the stream and read up to its first event that carries data, where the attempt commits."""
        target = call.target
        opened: Reply | EventStream | None = None
        try:
            with Deadline(self._deadlines or Deadlines(asyncio.get_running_loop()), target.timeout):
                opened = await self._providers[target.provider].stream(call)
                if isinstance(opened, Reply):
                    return replay_reply(call, opened, attempts, started=started)
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
            return _transport_failed(target, attempts, exc, started=started)
        except TimeoutError:
            await _close(opened)
            detail = f"no stream event within {target.timeout:g}s"
            return Failed(target=target, attempts=attempts, outcome=TIMED_OUT, detail=detail, kind=TIMEOUT, started=started)
        except BaseException:
            await _close(opened)
            raise
        if first is None:
            await opened.close()
            detail = "upstream stream ended before its first event"
            return broken(target, attempts, detail=detail, kind=STREAM_ERROR, started=started)
        try:
            chunk, error = read_chunk(first)
        except MalformedEvent as exc:
            await opened.close()
            return broken(target, attempts, detail=str(exc), kind=STREAM_ERROR, started=started)
        if error is not None:
            await opened.close()
            status = error.get("status") or error.get("code")
            outcome = Outcome(status if isinstance(status, int) and 400 <= status <= 599 else 502, transport=True)
            detail = f"error event: {error.get('message', '')}"[:300]
            return Failed(target=target, attempts=attempts, outcome=outcome, detail=detail, kind=STREAM_ERROR, started=started)
        return streamed(
            target=target, attempts=attempts, outcome=answered(opened.status), detail=OK, started=started,
            stream=opened, first_event=first, first_chunk=chunk, rest=rest,
        )  # fmt: skip


def _transport_failed(target: Target, attempts: list[Attempt], exc: TransportError, *, started: float) -> Failed:
    """An attempt the transport failed (no answer, a cut-off one, a timeout): `exc` says how."""
    outcome = Outcome(exc.status, transport=True)
    return Failed(target=target, attempts=attempts, outcome=outcome, detail=exc.detail, kind=exc.kind, started=started)


def _skip(target: Target, attempts: list[Attempt]) -> Failed:
    """A target passed over for its open circuit: listed among the attempts, never called."""
    attempts.append(Attempt(target.name, CIRCUIT_OPEN.status, "skipped: its circuit is open"))
    return Failed(
        target=target, attempts=attempts, outcome=CIRCUIT_OPEN, detail="circuit open", kind=SKIPPED, started=time.monotonic()
    )


async def _close(opened: Reply | EventStream | None) -> None:
    if opened is not None and not isinstance(opened, Reply):
        await opened.close()


def _retryable(policy: RetryPolicy, tried: Result) -> bool:
    """Whether the policy calls the target again after `tried` (not when asked to wait too long)."""
    outcome = tried.outcome
    if outcome.ok or not (outcome.transport or outcome.status in policy.on_status_codes):
        return False
    return tried.retry_after is None or tried.retry_after <= policy.max_retry_after_seconds


def _backoff(policy: RetryPolicy, number: int, tried: Result, *, rng: Random) -> float:
    """Seconds to wait after failed attempt `number` (the first is 1): the upstream's Retry-After, else full jitter."""
    if tried.retry_after is not None:
        return float(tried.retry_after)
    ceiling = min(policy.max_backoff_seconds, policy.backoff_seconds * 2.0 ** (number - 1))
    return rng.random() * ceiling
