"""Log output: one access line per request, JSON or text lines, the request id on every record.

`configure_logging` (configure) installs one stderr handler on the root logger. Its filter
stamps each record with the request id of the trace in `gateway.observe.trace.current`, so any
log call made while serving a request carries that request's id without being passed it.
Structured fields travel as `extra={"fields": {...}}` and become JSON keys or `key=value` pairs
(lines).

`RequestLog` (request_log) is the observer that writes the access line (access) when a request
ends. Access lines skip the logging module's per-record work and are written in batches, within
half a second (handler): a request leaves its line's values (an entry) in the buffer, and they
are formatted when written.
"""

from gateway.observe.logs.access import ACCESS_LOGGER, access_entry, access_fields, access_log
from gateway.observe.logs.configure import (
    CLIENT_LOGGERS,
    FORMATS,
    LEVELS,
    LogFormat,
    LogLevel,
    RequestIdFilter,
    configure_logging,
    default_log_format,
)
from gateway.observe.logs.handler import ACCESS_BUFFER_LINES, ACCESS_FLUSH_SECONDS
from gateway.observe.logs.lines import JsonFormatter, TextFormatter
from gateway.observe.logs.request_log import RequestLog

__all__ = [
    "ACCESS_BUFFER_LINES",
    "ACCESS_FLUSH_SECONDS",
    "ACCESS_LOGGER",
    "CLIENT_LOGGERS",
    "FORMATS",
    "LEVELS",
    "JsonFormatter",
    "LogFormat",
    "LogLevel",
    "RequestIdFilter",
    "RequestLog",
    "TextFormatter",
    "access_entry",
    "access_fields",
    "access_log",
    "configure_logging",
    "default_log_format",
]
