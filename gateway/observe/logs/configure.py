"""`configure_logging`: one stderr handler on the root logger, lines in one format, the request id on each."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from typing import Final, TextIO

from gateway.observe import trace as observe
from gateway.observe.logs import handler as gateway_handler
from gateway.observe.logs.handler import ACCESS_FLUSH_SECONDS, GatewayHandler
from gateway.observe.logs.lines import JsonFormatter, TextFormatter


class LogFormat(StrEnum):
    """How a line is written."""

    JSON = "json"  # one object per line, for whatever collects the output
    TEXT = "text"  # `time LEVEL logger [request_id] message key=value ...`, for a person


class LogLevel(StrEnum):
    """The lowest level written, as `--log-level` names it."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


# As plain strings: the command line offers and quotes them as such.
FORMATS = tuple(fmt.value for fmt in LogFormat)
LEVELS = tuple(level.value for level in LogLevel)

# The HTTP clients' own loggers, kept at INFO or above even at --log-level debug (litellm's own
# are set to WARNING by its provider, which imports it).
CLIENT_LOGGERS: Final = ("openai", "anthropic", "httpx", "httpcore", "urllib3", "botocore")


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (the current trace's, or None) to records that do not carry one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            trace = observe.current.get()
            record.request_id = trace.request_id if trace is not None else None
        return True


def default_log_format(stream: TextIO) -> str:
    """Text for a person at a terminal, JSON for whatever collects the output otherwise."""
    try:
        return LogFormat.TEXT.value if stream.isatty() else LogFormat.JSON.value
    except (AttributeError, ValueError):  # no stream, or a closed one
        return LogFormat.JSON.value


def configure_logging(
    fmt: str, level: str, *, stream: TextIO | None = None, flush_seconds: float = ACCESS_FLUSH_SECONDS
) -> logging.Handler:
    """Send every log record to `stream` (stderr) as `fmt` ("json" or "text") lines, from `level` up.

    Access lines wait up to `flush_seconds` to be written in batches (0: each at once).
    Replaces a handler an earlier call installed (writing what it still holds), so calling it
    twice leaves one; other handlers on the root logger are left alone. Returns the handler.
    """
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if not flush_seconds >= 0:  # also rejects nan
        raise ValueError(f"access log flush interval must be >= 0 seconds, got {flush_seconds!r}")
    formatter = JsonFormatter() if fmt == LogFormat.JSON else TextFormatter()
    handler = GatewayHandler(sys.stderr if stream is None else stream, formatter, flush_seconds=flush_seconds)
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, GatewayHandler)]:
        root.removeHandler(old)
        old.flush()
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in CLIENT_LOGGERS:  # their debug lines carry request URLs and headers, secrets among them
        logging.getLogger(name).setLevel(max(logging.INFO, root.level))
    logging.captureWarnings(True)  # a warnings.warn() becomes a line in the same format
    gateway_handler.installed = handler
    return handler
