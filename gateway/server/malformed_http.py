"""Requests aiohttp cannot parse (a request line past 8190 bytes, a broken header): one warning each, no traceback.

aiohttp answers them itself, 400 with a plain-text reason, before any gateway code runs, and logs
each at ERROR with a traceback on its `aiohttp.server` logger: a client sending garbage would
fill the log with stacks that say nothing about the gateway. `quiet_malformed_requests` turns
those records into one WARNING line naming the client's mistake.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER: Final = "aiohttp.server"
REASON_CHARS: Final = 200  # aiohttp's reason quotes the client's bytes: a long line is cut


class MalformedRequestFilter(logging.Filter):
    """Rewrites aiohttp's record of a request it could not parse as a WARNING without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            reason = exc.message if len(exc.message) <= REASON_CHARS else exc.message[:REASON_CHARS] + "..."
            record.msg, record.args = "malformed HTTP request refused with %d: %s", (exc.code, reason)
            record.exc_info, record.exc_text = None, None
        return True


_FILTER: Final = MalformedRequestFilter()


def quiet_malformed_requests() -> None:
    """Install the filter on aiohttp's server logger (once, however often called)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
