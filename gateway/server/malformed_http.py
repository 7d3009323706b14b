"""Requests aiohttp cannot parse (a request line past 8190 bytes, a broken header): one warning each, no traceback.

aiohttp answers them before any gateway code runs (in the API's error shape where
gateway.server.aiohttp_internals can have it so, else in plain text), and logs each at ERROR with
a traceback on its `aiohttp.server` logger: a client sending garbage would fill the log with
stacks that say nothing about the gateway. `quiet_malformed_requests` turns those records into
one WARNING line naming the client's mistake, by the reason the client is told
(`parse_error_reason`): never the bytes aiohttp quotes, which may hold the client's key.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp.http_exceptions import HttpProcessingError

from gateway.server.aiohttp_internals import parse_error_reason

SERVER_LOGGER: Final = "aiohttp.server"


class MalformedRequestFilter(logging.Filter):
    """Rewrites aiohttp's record of a request it could not parse as a WARNING without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.msg, record.args = "malformed HTTP request refused with %d: %s", (exc.code, parse_error_reason(exc))
            record.exc_info, record.exc_text = None, None
        return True


_FILTER: Final = MalformedRequestFilter()


def quiet_malformed_requests() -> None:
    """Install the filter on aiohttp's server logger (once, however often called)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
