"""Anthropic's error shapes: the error type for an HTTP status, and back, and the error body."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from gateway.core.translate.messages.checks import JSON


class ErrorType(StrEnum):
    """The `error.type` values of Anthropic's API."""

    INVALID_REQUEST = "invalid_request_error"
    AUTHENTICATION = "authentication_error"
    BILLING = "billing_error"
    PERMISSION = "permission_error"
    NOT_FOUND = "not_found_error"
    REQUEST_TOO_LARGE = "request_too_large"
    RATE_LIMIT = "rate_limit_error"
    TIMEOUT = "timeout_error"
    API = "api_error"
    OVERLOADED = "overloaded_error"


_BY_STATUS = {
    400: ErrorType.INVALID_REQUEST,
    401: ErrorType.AUTHENTICATION,
    402: ErrorType.BILLING,
    403: ErrorType.PERMISSION,
    404: ErrorType.NOT_FOUND,
    413: ErrorType.REQUEST_TOO_LARGE,
    429: ErrorType.RATE_LIMIT,
    504: ErrorType.TIMEOUT,
    529: ErrorType.OVERLOADED,
}
_STATUSES = {kind.value: status for status, kind in _BY_STATUS.items()} | {ErrorType.API.value: 500}


def error_type(status: int) -> ErrorType:
    """Anthropic's error type for an HTTP status."""
    return _BY_STATUS.get(status) or (ErrorType.API if status >= 500 else ErrorType.INVALID_REQUEST)


def status_of(kind: Any) -> int:
    """The HTTP status an Anthropic error type stands for (an unknown one: 502)."""
    return _STATUSES.get(kind, 502) if isinstance(kind, str) else 502


def error_body(status: int, message: str) -> JSON:
    """Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}
