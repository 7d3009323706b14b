"""Log output: one access line per request, JSON or text lines, the request id on every record.

`configure_logging` installs one stderr handler on the root logger. Its filter stamps each
record with the request id of the trace in `gateway.observe.current`, so any log call made while
serving a request carries that request's id without being passed it. Structured fields travel as
`extra={"fields": {...}}` and become JSON keys or `key=value` pairs.

`RequestLog` is the observer that writes the access line when a request ends. It reads only the
Trace's summary: names, counts, timings and statuses, never bodies, headers or keys.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Collection
from typing import Any, TextIO

import orjson

from gateway import observe

FORMATS = ("json", "text")
LEVELS = ("debug", "info", "warning", "error")
ACCESS_LOGGER = "gateway.access"

access_log = logging.getLogger(ACCESS_LOGGER)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (the current trace's, or None) to records that do not carry one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            trace = observe.current.get()
            record.request_id = trace.request_id if trace is not None else None
        return True


class _UtcClock:
    """ISO-8601 UTC times with milliseconds; the whole-second part is formatted once a second."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def iso(self, created: float) -> str:
        second = int(created)
        cached, prefix = self._second
        if cached != second:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)  # one assignment: threads see the old or the new pair
        return f"{prefix}.{int((created - second) * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, then the record's fields."""

    def __init__(self) -> None:
        super().__init__()
        self._clock = _UtcClock()

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self._clock.iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            line["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class TextFormatter(logging.Formatter):
    """`time LEVEL logger [request_id] message key=value ...`, the traceback on the lines after."""

    def __init__(self) -> None:
        super().__init__()
        self._clock = _UtcClock()

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        parts = [self._clock.iso(record.created), record.levelname, record.name]
        if request_id is not None:
            parts.append(f"[{request_id}]")
        parts.append(record.getMessage())
        fields = getattr(record, "fields", None)
        if fields:
            parts.extend(f"{key}={_text_value(value)}" for key, value in fields.items() if value is not None)
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


_PLAIN = re.compile(r'[^\s"=]+')  # a text value that needs no quotes


def _text_value(value: Any) -> str:
    """A field value as one `key=value` token: quoted (JSON-style) when empty or with spaces, quotes or `=`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value)
    return text if _PLAIN.fullmatch(text) else orjson.dumps(text).decode()


class _GatewayHandler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` installs (a type of its own, so a second call finds it)."""


def default_log_format(stream: TextIO) -> str:
    """Text for a person at a terminal, JSON for whatever collects the output otherwise."""
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no stream, or a closed one
        return "json"


def configure_logging(fmt: str, level: str, *, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record to `stream` (stderr) as `fmt` ("json" or "text") lines, from `level` up.

    Replaces a handler an earlier call installed, so calling it twice leaves one; other handlers
    on the root logger are left alone. Returns the handler.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    handler = _GatewayHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _GatewayHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # a warnings.warn() becomes a line in the same format
    return handler


class RequestLog(observe.Observer):
    """Writes one INFO line on `gateway.access` per request, when it has ended.

    Requests to `quiet_paths` (health checks, the metrics scrape: one every few seconds from
    machines) are logged at DEBUG.
    """

    def __init__(self, logger: logging.Logger = access_log, *, quiet_paths: Collection[str] = ()) -> None:
        self.logger = logger
        self.quiet_paths = frozenset(quiet_paths)

    def request_ended(self, trace: observe.Trace) -> None:
        logger = self.logger
        level = logging.DEBUG if trace.path in self.quiet_paths else logging.INFO
        if not logger.isEnabledFor(level):
            return
        # Built here rather than by logger.info(): skipping the caller lookup and the `extra`
        # merge halves the cost of a line that every request pays.
        record = logging.LogRecord(logger.name, level, __file__, 0, "request", None, None)
        record.request_id = trace.request_id
        record.fields = access_fields(trace)
        logger.handle(record)


def access_fields(trace: observe.Trace) -> dict[str, Any]:
    """What the access line says about `trace`: names, counts, statuses and timings only."""
    ttft = trace.ttft
    return {
        "tenant": trace.tenant,
        "method": trace.method,
        "path": trace.path,
        "route": trace.route.name if trace.route is not None else None,
        "target": trace.target.name if trace.target is not None else None,
        "attempts": trace.attempts,
        "status": trace.status,
        "error_code": trace.error_code,
        "stream": trace.stream,
        "duration_ms": round(trace.duration * 1000, 1),
        "ttft_ms": round(ttft * 1000, 1) if ttft is not None else None,
        "prompt_tokens": trace.prompt_tokens,
        "completion_tokens": trace.completion_tokens,
        "memory_type": trace.memory_type,
        "evicted": trace.evicted,
    }
