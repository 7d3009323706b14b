"""An upstream's whole answer judged as the route judges it: usable, the upstream's error, or malformed.

No I/O: the answer is in hand. A 2xx answer must be what its endpoint promises (JSON that is not
an error in disguise, not nested past what orjson may write again); an error answer's message,
type, code and Retry-After are read for the failure the route may end with.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Final, NamedTuple

import orjson

from gateway.core.chunks import replay
from gateway.core.errors import Attempt
from gateway.core.failures import Failure
from gateway.core.nesting import MAX_JSON_DEPTH, too_deep
from gateway.core.routing import Outcome, answered
from gateway.core.tree import Target
from gateway.observe.trace import INVALID_RESPONSE
from gateway.upstream.providers.base import Call, ReplayedStream, Reply
from gateway.upstream.results import OK, Failed, Replied, Result, replied, streamed

TIMED_OUT: Final = Outcome(504, transport=True)
BROKEN: Final = Outcome(502, transport=True)  # no usable answer: unreachable, cut off or malformed

# Endpoints whose 2xx answer is relayed as it comes (audio, or text such as srt), never parsed.
OPAQUE_ANSWERS: Final = frozenset({"audio/speech", "audio/transcriptions", "audio/translations"})

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


class ErrorFields(NamedTuple):
    """An upstream error body's message, type, code and param, as far as it has them."""

    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None


def error_fields(body: bytes) -> ErrorFields:
    """The message, type, code and param of an upstream error body, OpenAI-shaped or not."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ErrorFields(body[:200].decode(errors="replace").strip())
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message, kind, code, param = (error.get(k) for k in ("message", "type", "code", "param"))
        return ErrorFields(
            str(message)[:300] if message is not None else "",
            type=kind if isinstance(kind, str) else None,
            code=str(code) if code is not None else None,
            param=param if isinstance(param, str) else None,
        )
    if isinstance(error, str):
        return ErrorFields(error[:300])
    return ErrorFields(body[:200].decode(errors="replace").strip())


def broken(target: Target, attempts: list[Attempt], *, detail: str, kind: Failure, started: float) -> Failed:
    """An attempt whose answer could not be used (a 502), `kind` saying how."""
    return Failed(target=target, attempts=attempts, outcome=BROKEN, detail=detail, kind=kind, started=started)


def judge_reply(call: Call, reply: Reply, attempts: list[Attempt], *, started: float) -> Replied | Failed:
    """`call`'s answer as the route judges it: a 2xx that is what it should be, or a failure."""
    target, status = call.target, reply.status
    if not 200 <= status < 300:
        if 300 <= status < 400:  # redirects are never followed: the upstream is misconfigured or hostile
            detail = f"upstream answered {status} (a redirect, which the gateway does not follow)"
            return broken(target, attempts, detail=detail, kind=INVALID_RESPONSE, started=started)
        if status < 200:  # no final answer (101 switches protocols): relayed, it would break the client's connection
            detail = f"upstream answered {status} (not a final answer)"
            return broken(target, attempts, detail=detail, kind=INVALID_RESPONSE, started=started)
        return replied(
            target=target, attempts=attempts, outcome=answered(status), detail=error_fields(reply.body).message,
            started=started, reply=reply, retry_after=retry_after_seconds(reply.headers),
        )  # fmt: skip
    if call.endpoint in OPAQUE_ANSWERS:
        return replied(target=target, attempts=attempts, outcome=answered(status), detail=OK, started=started, reply=reply)
    try:
        data = reply.data = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        detail = f"malformed upstream response (status {status}, not JSON)"
        return broken(target, attempts, detail=detail, kind=INVALID_RESPONSE, started=started)
    if too_deep(reply.body, data):  # reshaped, stored or translated, it would be written again by orjson
        detail = f"malformed upstream response (JSON nested deeper than {MAX_JSON_DEPTH} levels)"
        return broken(target, attempts, detail=detail, kind=INVALID_RESPONSE, started=started)
    if isinstance(data, dict) and (error := data.get("error")) and "object" not in data and "choices" not in data:
        # an error where the answer should be: the SDK would hand the caller an answer without choices
        code = error.get("status") or error.get("code") if isinstance(error, dict) else None
        failure = Outcome(code if isinstance(code, int) and 400 <= code <= 599 else 502, transport=True)
        detail = f"error in a {status} answer: {error_fields(reply.body).message}"[:300]
        return Failed(target=target, attempts=attempts, outcome=failure, detail=detail, kind=INVALID_RESPONSE, started=started)
    return replied(target=target, attempts=attempts, outcome=answered(status), detail=OK, started=started, reply=reply)


def replay_reply(call: Call, reply: Reply, attempts: list[Attempt], *, started: float) -> Result:
    """A stream request answered with one JSON body: judged, then replayed as a stream."""
    tried = judge_reply(call, reply, attempts, started=started)
    if not tried.outcome.ok:
        return tried
    options = call.payload.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    events = replay(reply.data, endpoint=call.endpoint, include_usage=include_usage)
    if events is None:
        detail = "malformed upstream response (a stream was asked for; the JSON is not a completion)"
        return broken(call.target, attempts, detail=detail, kind=INVALID_RESPONSE, started=started)
    return streamed(
        target=call.target, attempts=attempts, outcome=answered(200), detail=OK, started=started,
        stream=ReplayedStream([], reply.headers), first_event=events[0], first_chunk=None, rest=events[1:],
    )  # fmt: skip
