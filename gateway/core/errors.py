"""The gateway's errors, each one rendered as an OpenAI-shaped JSON body.

    GatewayError                      500 server_error
    ├── InvalidRequestError           400 invalid_request_error (param names the culprit)
    │   ├── RequestTimeoutError       408 (the body arrived too slowly; the connection is closed)
    │   ├── PayloadTooLargeError      413
    │   └── UnsupportedEncodingError  415 (a Content-Encoding the gateway cannot decode)
    ├── AuthenticationError           401 invalid_api_key
    ├── PermissionDeniedError         403 (route_not_allowed, admin_key_required)
    ├── NotFoundError                 404 (model_not_found, memory_not_found, not_found)
    ├── MethodNotAllowedError         405
    ├── ConflictError                 409 (memory busy)
    ├── RateLimitedError              429 rate_limit_exceeded / insufficient_quota (a key's or a route's limit)
    ├── OverloadedError               503 gateway_overloaded (the gateway's own shortage; Retry-After)
    └── UpstreamError                 the last attempt's status; keeps every attempt
"""

from __future__ import annotations

import errno
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import orjson


class GatewayError(Exception):
    """An error the client sees as `{"error": {"message", "type", "param", "code"}}`."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if type is not None:
            self.type = type
        self.headers: dict[str, str] = dict(headers or {})

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def to_json(self) -> bytes:
        try:
            return orjson.dumps(self.to_dict())
        except TypeError:  # text quoting undecodable header bytes (lone surrogates) is not UTF-8
            error = {k: v.encode(errors="replace").decode() if isinstance(v, str) else v
                     for k, v in self.to_dict()["error"].items()}
            return orjson.dumps({"error": error})


class InvalidRequestError(GatewayError):
    status = 400
    type = "invalid_request_error"


class PayloadTooLargeError(InvalidRequestError):
    status = 413
    code = "request_too_large"


class RequestTimeoutError(InvalidRequestError):
    status = 408
    code = "request_timeout"


class UnsupportedEncodingError(InvalidRequestError):
    status = 415
    code = "unsupported_content_encoding"


class AuthenticationError(GatewayError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class PermissionDeniedError(GatewayError):
    status = 403
    type = "invalid_request_error"
    code = "permission_denied"


class NotFoundError(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class MethodNotAllowedError(GatewayError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class ConflictError(GatewayError):
    status = 409
    type = "invalid_request_error"
    code = "conflict"


class RateLimitedError(GatewayError):
    """A key or a route is at one of its limits: 429 as OpenAI answers, with when to come back.

    `code` is rate_limit_exceeded (requests, tokens, concurrency) or insufficient_quota (a
    budget); the type is OpenAI's for each ("requests"/"tokens" and "insufficient_quota").
    """

    status = 429
    type = "requests"
    code = "rate_limit_exceeded"


# The OS errors that are the gateway's own shortage, not an upstream's failure, by the reason metrics name.
SHORTAGES: Final[Mapping[int, str]] = {
    errno.EMFILE: "emfile",  # this process is out of file descriptors
    errno.ENFILE: "enfile",  # the system is
    errno.ENOBUFS: "enobufs",  # out of socket buffers
    errno.ENOMEM: "enomem",  # out of kernel memory
}
OVERLOADED_RETRY_AFTER_SECONDS: Final = 1


class OverloadedError(GatewayError):
    """The gateway itself ran short (file descriptors, buffers, memory) while calling an upstream.

    Not the upstream's failure: no attempt is counted against the target, its breaker, or the
    upstream metrics, and the route does not move on to another target, whose call would need
    the same resource. The client is asked to come back shortly (`Retry-After`).
    """

    status = 503
    type = "gateway_overloaded"
    code = "gateway_overloaded"

    def __init__(self, reason: str, message: str | None = None, *, headers: Mapping[str, str] | None = None) -> None:
        """`reason` is what metrics count it by (emfile, ...); `headers` are added to Retry-After."""
        super().__init__(
            message or f"The gateway is out of a resource of its own ({reason}) and cannot call an upstream now; retry shortly.",
            headers={"Retry-After": str(OVERLOADED_RETRY_AFTER_SECONDS), **(headers or {})},
        )
        self.reason = reason


class Attempt(NamedTuple):
    """One upstream call as the client's error message reports it."""

    target: str
    status: int
    detail: str

    def describe(self) -> str:
        return f"{self.target}: {self.status} {self.detail}".rstrip()


class UpstreamError(GatewayError):
    """Every attempt failed; the status and error type are the last attempt's."""

    type = "upstream_error"

    def __init__(
        self,
        attempts: Sequence[Attempt],
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.attempts = tuple(attempts)
        last = self.attempts[-1]
        listed = "; ".join(a.describe() for a in self.attempts)
        summary = "Upstream request failed" if len(self.attempts) == 1 else f"All {len(self.attempts)} upstream attempts failed"
        super().__init__(
            f"{summary}: {listed}",
            status=last.status,
            type=type,
            code=code,
            param=param,
            headers=headers,
        )
