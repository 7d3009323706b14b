"""Log output: one access line per request, JSON or text lines, the request id on every record.

`configure_logging` installs one stderr handler on the root logger. Its filter stamps each
record with the request id of the trace in `gateway.observe.current`, so any log call made while
serving a request carries that request's id without being passed it. Structured fields travel as
`extra={"fields": {...}}` and become JSON keys or `key=value` pairs.

`RequestLog` is the observer that writes the access line when a request ends. It reads only the
Trace's summary: names, counts, timings and statuses, never bodies, headers or keys. Access lines
skip the logging module's per-record work and are written in batches, within half a second: a
request leaves its line's values (an entry) in the buffer, and they are formatted when written.
"""

from __future__ import annotations

import asyncio
import bisect
import codecs
import itertools
import logging
import re
import select
import sys
import time
from collections.abc import Collection, Iterator, Mapping
from math import floor
from typing import Any, BinaryIO, Final, TextIO, cast

import orjson

from gateway.observe import trace as observe

FORMATS = ("json", "text")
LEVELS = ("debug", "info", "warning", "error")
ACCESS_LOGGER = "gateway.access"
ACCESS_FLUSH_SECONDS = 0.5  # the longest an access line waits in the buffer
ACCESS_BUFFER_LINES = 128  # written at once when this many wait (~50 kB of JSON)

access_log = logging.getLogger(ACCESS_LOGGER)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (the current trace's, or None) to records that do not carry one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            trace = observe.current.get()
            record.request_id = trace.request_id if trace is not None else None
        return True


_MILLISECONDS = tuple(f".{millisecond:03d}Z" for millisecond in range(1000))  # a time's ending, made once


class _UtcClock:
    """ISO-8601 UTC times with milliseconds; the whole-second part is formatted once a second."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def iso(self, created: float) -> str:
        second = floor(created)  # floor(), not int(): the same for a time, at a third of the cost
        cached, prefix = self._second
        if cached != second:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)  # one assignment: threads see the old or the new pair
        return prefix + _MILLISECONDS[floor((created - second) * 1000)]


class _LineFormatter(logging.Formatter):
    """A formatter that can also build a line from its parts, without a LogRecord."""

    def __init__(self) -> None:
        super().__init__()
        self._clock = _UtcClock()

    def line(
        self, created: float, level: str, logger: str, message: str, request_id: str | None, fields: Mapping[str, Any] | None
    ) -> str:
        """The line a record with these attributes (and no exception) is formatted as."""
        raise NotImplementedError

    def access_line(self, created: float, level: str, logger: str, trace: observe.Trace) -> str:
        """The access line for `trace`: the record `RequestLog` stands for, formatted."""
        return self.access_lines([access_entry(trace, created, level.lower(), logger)])[0][:-1].decode()

    def access_lines(self, entries: list[dict[str, Any]]) -> list[bytes]:
        """The lines (UTF-8, each ending in a newline) for `access_entry`s; may change the entries."""
        lines = []
        for entry in entries:
            created, level, logger, message, request_id = (entry[key] for key in _HEAD)
            fields = dict(itertools.islice(entry.items(), len(_HEAD), None))
            lines.append((self.line(created, level.upper(), logger, message, request_id, fields) + "\n").encode())
        return lines


class JsonFormatter(_LineFormatter):
    """One JSON object per line: time, level, logger, message, request_id, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        more = {}
        if record.exc_info:
            more["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            more["stack"] = self.formatStack(record.stack_info)
        return self.line(
            record.created, record.levelname, record.name, record.getMessage(),
            getattr(record, "request_id", None), getattr(record, "fields", None), more,
        )  # fmt: skip

    def line(
        self,
        created: float,
        level: str,
        logger: str,
        message: str,
        request_id: str | None,
        fields: Mapping[str, Any] | None,
        more: Mapping[str, Any] | None = None,
    ) -> str:
        """The JSON line; `more` (an exception) comes after the fields."""
        line: dict[str, Any] = {"time": self._clock.iso(created), "level": level.lower(), "logger": logger, "message": message}
        if request_id is not None:
            line["request_id"] = request_id
        if fields:
            line.update(fields)
        if more:
            line.update(more)
        return orjson.dumps(line, default=str, option=orjson.OPT_NON_STR_KEYS).decode()

    def access_lines(self, entries: list[dict[str, Any]]) -> list[bytes]:
        # What `line` makes of each, without the fields' own dict: every request pays for a line.
        iso, dumps = self._clock.iso, orjson.dumps
        lines = []
        for entry in entries:
            entry["time"] = iso(entry["time"])
            lines.append(dumps(entry, None, orjson.OPT_APPEND_NEWLINE))
        return lines


class TextFormatter(_LineFormatter):
    """`time LEVEL logger [request_id] message key=value ...`, the traceback on the lines after."""

    def format(self, record: logging.LogRecord) -> str:
        text = self.line(
            record.created, record.levelname, record.name, record.getMessage(),
            getattr(record, "request_id", None), getattr(record, "fields", None),
        )  # fmt: skip
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text

    def line(
        self, created: float, level: str, logger: str, message: str, request_id: str | None, fields: Mapping[str, Any] | None
    ) -> str:
        parts = [self._clock.iso(created), level, logger]
        if request_id is not None:
            parts.append(f"[{request_id}]")
        parts.append(message)
        if fields:
            parts.extend(f"{key}={_text_value(value)}" for key, value in fields.items() if value is not None)
        return " ".join(parts)


_PLAIN = re.compile(r'[^\s"=]+')  # a text value that needs no quotes


def _text_value(value: Any) -> str:
    """A field value as one `key=value` token: quoted (JSON-style) when empty or with spaces, quotes or `=`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value)
    return text if _PLAIN.fullmatch(text) else orjson.dumps(text).decode()


class _GatewayHandler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` installs: log records as lines, access lines in batches.

    Access lines come from `RequestLog` as entries (no LogRecord) and wait in a buffer, as with
    nginx's `access_log ... buffer= flush=`: they are written `flush_seconds` after the first of
    them, when ACCESS_BUFFER_LINES wait, before any other record (so the order holds), and when
    the handler is flushed (logging.shutdown() at exit does that). `flush_seconds` 0 writes each
    line at once. Writes are at most PIPE_BUF bytes, which a pipe takes whole: lines of workers
    sharing one stderr never interleave mid-line.
    """

    def __init__(self, stream: TextIO, formatter: _LineFormatter, *, flush_seconds: float) -> None:
        super().__init__(stream)
        self.setFormatter(formatter)
        self.line_formatter = formatter
        self.flush_seconds = flush_seconds
        self._batch = ACCESS_BUFFER_LINES if flush_seconds else 1  # lines written at once
        self._pending: list[dict[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None

    def write_access(self, entry: dict[str, Any]) -> None:
        """Write the line of one `access_entry` within `flush_seconds` (at once if there is no event loop to wait on)."""
        pending = self._pending
        pending.append(entry)
        if len(pending) >= self._batch:
            self.flush_access()
        elif self._timer is None:
            self._start_timer()

    def _start_timer(self) -> None:
        try:
            loop = asyncio.get_running_loop()  # a syscall on 3.11: paid once a batch, not once a line
        except RuntimeError:
            self.flush_access()
            return
        self._timer = loop.call_later(self.flush_seconds, self.flush_access)

    def flush_access(self) -> None:
        """Write the access lines waiting in the buffer."""
        self.acquire()
        try:
            self._timer = None
            pending = self._pending
            count = len(pending)
            if not count:
                return
            # Two steps, each atomic: a line another thread appends in between stays queued.
            entries = pending[:count]
            del pending[:count]
            lines, stream = self.line_formatter.access_lines(entries), self.stream
            binary = _utf8_bytes(stream)
            if binary is None:
                for piece in _pieces(lines):
                    stream.write(piece.decode())
                stream.flush()
                return
            stream.flush()  # what went to the text layer before goes out first
            for piece in _pieces(lines):
                binary.write(piece)
                binary.flush()  # one write(2) a piece, as the text layer's line buffering does
        except Exception:  # as emit(): a broken stream is reported on stderr, never raised
            self.handleError(logging.makeLogRecord({"name": ACCESS_LOGGER, "msg": "access lines"}))
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        if self._pending:
            self.flush_access()
        super().emit(record)

    def flush(self) -> None:
        self.flush_access()
        super().flush()


def _utf8_bytes(stream: TextIO) -> BinaryIO | None:
    """The byte layer under `stream` when it writes UTF-8 (stderr does): lines go there as they are made."""
    binary = getattr(stream, "buffer", None)
    encoding = getattr(stream, "encoding", None)
    if binary is None or not isinstance(encoding, str) or codecs.lookup(encoding).name != "utf-8":
        return None
    return cast(BinaryIO, binary)


def _pieces(lines: list[bytes], limit: int = select.PIPE_BUF) -> Iterator[bytes]:
    """`lines` (UTF-8, each ending in a newline) joined into pieces of at most `limit` bytes; a longer line is one."""
    ends = list(itertools.accumulate(map(len, lines)))  # in C: no Python step per line
    start, written = 0, 0
    while start < len(lines):
        stop = max(bisect.bisect_right(ends, written + limit, start), start + 1)
        yield b"".join(lines[start:stop])
        start, written = stop, ends[stop - 1]


_installed: _GatewayHandler | None = None  # the handler `configure_logging` put on the root logger


def default_log_format(stream: TextIO) -> str:
    """Text for a person at a terminal, JSON for whatever collects the output otherwise."""
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # no stream, or a closed one
        return "json"


# The HTTP clients' own loggers, kept at INFO or above even at --log-level debug (litellm's own
# are set to WARNING by its provider, which imports it).
CLIENT_LOGGERS: Final = ("openai", "anthropic", "httpx", "httpcore", "urllib3", "botocore")


def configure_logging(
    fmt: str, level: str, *, stream: TextIO | None = None, flush_seconds: float = ACCESS_FLUSH_SECONDS
) -> logging.Handler:
    """Send every log record to `stream` (stderr) as `fmt` ("json" or "text") lines, from `level` up.

    Access lines wait up to `flush_seconds` to be written in batches (0: each at once).
    Replaces a handler an earlier call installed (writing what it still holds), so calling it
    twice leaves one; other handlers on the root logger are left alone. Returns the handler.
    """
    global _installed
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if not flush_seconds >= 0:  # also rejects nan
        raise ValueError(f"access log flush interval must be >= 0 seconds, got {flush_seconds!r}")
    formatter = JsonFormatter() if fmt == "json" else TextFormatter()
    handler = _GatewayHandler(sys.stderr if stream is None else stream, formatter, flush_seconds=flush_seconds)
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _GatewayHandler)]:
        root.removeHandler(old)
        old.flush()
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in CLIENT_LOGGERS:  # their debug lines carry request URLs and headers, secrets among them
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
    logging.captureWarnings(True)  # a warnings.warn() becomes a line in the same format
    _installed = handler
    return handler


class RequestLog(observe.Observer):
    """Writes one INFO line on `gateway.access` per request, when it has ended.

    Requests to `quiet_paths` (health checks, the metrics scrape: one every few seconds from
    machines) are logged at DEBUG. The logger's level decides whether a line is written; the
    line itself goes straight to the handler `configure_logging` installed, formatted here:
    a LogRecord and the handler chain would cost more than the rest of the line. Without that
    handler on the root logger, lines go through `logger` as any record does.
    """

    def __init__(self, logger: logging.Logger = access_log, *, quiet_paths: Collection[str] = ()) -> None:
        self.logger = logger
        self.quiet_paths = frozenset(quiet_paths)

    def request_ended(self, trace: observe.Trace) -> None:
        logger = self.logger
        level, level_name = _QUIET if trace.path in self.quiet_paths else _LOUD
        if not logger.isEnabledFor(level):
            return
        handler = _installed
        if handler is not None and handler in _root.handlers:
            handler.write_access(access_entry(trace, time.time(), level_name, logger.name))
            return
        record = logging.LogRecord(logger.name, level, __file__, 0, "request", None, None)
        record.request_id = trace.request_id
        record.fields = access_fields(trace)
        logger.handle(record)


_QUIET = (logging.DEBUG, "debug")
_LOUD = (logging.INFO, "info")
_root = logging.getLogger()


_HEAD = ("time", "level", "logger", "message", "request_id")  # the keys every JSON line starts with


_ACCESS_KEYS = (  # the access line's keys, in order
    *_HEAD, "tenant", "method", "path", "route", "target", "attempts", "status", "error_code", "stream",
    "duration_ms", "ttft_ms", "prompt_tokens", "completion_tokens", "memory_type", "evicted",
)
_BLANK_ENTRY: dict[str, Any] = {**dict.fromkeys(_ACCESS_KEYS), "message": "request"}


def access_entry(trace: observe.Trace, created: float = 0.0, level: str = "", logger: str = "") -> dict[str, Any]:
    """The access line of `trace` (ended) as a JSON line's object, but for its time: `created`, unformatted.

    The head (`level` in lower case), then `access_fields`. A copy of a blank entry (every key in
    order, None where a request often has nothing), then its values: cheaper than a dict display,
    which past fifteen keys is built a key at a time, growing as it goes. Every request pays for it.
    """
    line = _BLANK_ENTRY.copy()
    line["time"] = created
    line["level"] = level
    line["logger"] = logger
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
    # Milliseconds to a tenth, half up: floor() is a third of round()'s cost, a tenth of round(ms, 1)'s
    line["duration_ms"] = floor(trace.elapsed * 10_000 + 0.5) / 10
    ttft = trace.ttft
    if ttft is not None:
        line["ttft_ms"] = floor(ttft * 10_000 + 0.5) / 10
    line["prompt_tokens"] = trace.prompt_tokens
    line["completion_tokens"] = trace.completion_tokens
    line["memory_type"] = trace.memory_type
    line["evicted"] = trace.evicted
    return line


def access_fields(trace: observe.Trace) -> dict[str, Any]:
    """What the access line says about `trace` (ended): names, counts, statuses and timings only."""
    return dict(itertools.islice(access_entry(trace).items(), len(_HEAD), None))
