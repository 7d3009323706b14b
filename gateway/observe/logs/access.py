"""What the access line says about a request: names, counts, timings and statuses, from its Trace.

It reads only the Trace's summary, never bodies, headers or keys. An entry is the JSON line's
object but for its time, which stays a number until the line is written.
"""

from __future__ import annotations

import itertools
import logging
from math import floor
from typing import Any

from gateway.observe.trace import Trace

ACCESS_LOGGER = "gateway.access"

access_log = logging.getLogger(ACCESS_LOGGER)

HEAD = ("time", "level", "logger", "message", "request_id")  # the keys every JSON line starts with

_ACCESS_KEYS = (  # the access line's keys, in order
    *HEAD, "tenant", "method", "path", "route", "target", "attempts", "status", "error_code", "stream",
    "duration_ms", "ttft_ms", "prompt_tokens", "completion_tokens", "memory_type", "evicted",
)  # fmt: skip
_BLANK_ENTRY: dict[str, Any] = {**dict.fromkeys(_ACCESS_KEYS), "message": "request"}


def blank_entry(level: str, logger: str) -> dict[str, Any]:
    """An access entry with its head filled in (`level` in lower case) and None for every value."""
    return {**_BLANK_ENTRY, "level": level, "logger": logger}


_HEADLESS = blank_entry("", "")  # for the fields alone


def access_entry(trace: Trace, created: float = 0.0, blank: dict[str, Any] = _HEADLESS) -> dict[str, Any]:
    """The access line of `trace` (ended) as a JSON line's object, but for its time: `created`, unformatted.

    The head (from `blank`, a `blank_entry`), then `access_fields`. A copy of the blank entry
    (every key in order, None where a request often has nothing), then its values: cheaper than
    a dict display, which past fifteen keys is built a key at a time, growing as it goes. Every
    request pays for it.
    """
    line = blank.copy()
    line["time"] = created
    line["request_id"] = trace.request_id
    line["tenant"] = trace.tenant
    line["method"] = trace.method
    line["path"] = trace.path
    route = trace.route
    if route is not None:
        line["route"] = route.name
    target = trace.target
    if target is not None:
        line["target"] = target.name
    line["attempts"] = trace.attempts
    line["status"] = trace.status
    line["error_code"] = trace.error_code
    line["stream"] = trace.stream
    # Milliseconds to a tenth, half up, by floor(): cheaper than round(), and every request pays for it
    line["duration_ms"] = floor(trace.elapsed * 10_000 + 0.5) / 10
    ttft = trace.ttft
    if ttft is not None:
        line["ttft_ms"] = floor(ttft * 10_000 + 0.5) / 10
    line["prompt_tokens"] = trace.prompt_tokens
    line["completion_tokens"] = trace.completion_tokens
    line["memory_type"] = trace.memory_type
    line["evicted"] = trace.evicted
    return line


def access_fields(trace: Trace) -> dict[str, Any]:
    """What the access line says about `trace` (ended): names, counts, statuses and timings only."""
    return dict(itertools.islice(access_entry(trace).items(), len(HEAD), None))
