"""`RequestLog`: the observer that writes one access line per request, when it has ended."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

from gateway.observe.logs import handler as gateway_handler
from gateway.observe.logs.access import access_entry, access_fields, access_log, blank_entry
from gateway.observe.trace import Observer, Trace

_root = logging.getLogger()


class RequestLog(Observer):
    """Writes one INFO line on `gateway.access` per request, when it has ended.

    Requests to `quiet_paths` (health checks, the metrics scrape: one every few seconds from
    machines) are logged at DEBUG. The logger's level decides whether a line is written; the
    line itself goes straight to the handler `configure_logging` installed, formatted there:
    a LogRecord and the handler chain would cost more than the rest of the line. Without that
    handler on the root logger, lines go through `logger` as any record does.
    """

    def __init__(self, logger: logging.Logger = access_log, *, quiet_paths: Collection[str] = ()) -> None:
        self.logger = logger
        self.quiet_paths = frozenset(quiet_paths)
        # Each level's entry, head filled in, that every line of that level starts as a copy of
        self._quiet = (logging.DEBUG, blank_entry("debug", logger.name))
        self._loud = (logging.INFO, blank_entry("info", logger.name))

    def request_ended(self, trace: Trace) -> None:
        logger = self.logger
        level, blank = self._quiet if trace.path in self.quiet_paths else self._loud
        if not logger.isEnabledFor(level):
            return
        handler = gateway_handler.installed
        if handler is not None and handler in _root.handlers:
            handler.write_access(access_entry(trace, time.time(), blank))
            return
        record = logging.LogRecord(logger.name, level, __file__, 0, "request", None, None)
        record.request_id = trace.request_id
        record.fields = access_fields(trace)
        logger.handle(record)
