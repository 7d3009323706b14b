"""How an upstream attempt came to nothing usable: the closed set of failure kinds.

A kind's value is the word metrics (the `outcome` and `reason` labels), logs, fallback reasons
and error codes carry; a StrEnum member is that string, so each reads and compares as before.
"""

from __future__ import annotations

from enum import StrEnum


class Failure(StrEnum):
    """What an attempt without an answer worth its status ended with (an answered one: its status code)."""

    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    STREAM_ERROR = "stream_error"
    INVALID_RESPONSE = "invalid_response"  # a 2xx answer that is not what was asked for (not JSON, ...)
    CIRCUIT_OPEN = "circuit_open"  # never made: the target's breaker is open, so the route moved on
