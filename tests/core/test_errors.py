"""The gateway's errors (gateway.core.errors): each rendered as OpenAI's error body, with its status and type."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.errors import (
    OVERLOADED_RETRY_AFTER_SECONDS,
    Attempt,
    AuthenticationError,
    ConflictError,
    GatewayError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    RequestTimeoutError,
    UnsupportedEncodingError,
    UpstreamError,
)


@pytest.mark.parametrize(
    ("error", "status", "type_", "code"),
    [
        (GatewayError, 500, "server_error", None),
        (InvalidRequestError, 400, "invalid_request_error", None),
        (RequestTimeoutError, 408, "invalid_request_error", "request_timeout"),
        (PayloadTooLargeError, 413, "invalid_request_error", "request_too_large"),
        (UnsupportedEncodingError, 415, "invalid_request_error", "unsupported_content_encoding"),
        (AuthenticationError, 401, "invalid_request_error", "invalid_api_key"),
        (NotFoundError, 404, "invalid_request_error", "not_found"),
        (MethodNotAllowedError, 405, "invalid_request_error", "method_not_allowed"),
        (ConflictError, 409, "invalid_request_error", "conflict"),
    ],
)
def test_each_error_has_the_status_type_and_code_its_docstring_draws(
    error: type[GatewayError], status: int, type_: str, code: str | None
) -> None:
    raised = error("why", param="messages")
    assert (raised.status, raised.type, raised.code) == (status, type_, code)
    assert orjson.loads(raised.to_json()) == {"error": {"message": "why", "type": type_, "param": "messages", "code": code}}


def test_an_instance_may_say_its_own_status_type_and_code() -> None:
    raised = NotFoundError("no memory", code="memory_not_found", status=410, type="gone", headers={"x-a": "1"})
    assert (raised.status, raised.type, raised.code, raised.headers) == (410, "gone", "memory_not_found", {"x-a": "1"})
    assert NotFoundError("again").code == "not_found"  # the class keeps its own


def test_text_that_is_not_utf8_is_rendered_with_replacement_characters() -> None:
    raised = InvalidRequestError("bad header \udcff", param="x-\udcfe")
    assert orjson.loads(raised.to_json())["error"] == {
        "message": "bad header ?", "type": "invalid_request_error", "param": "x-?", "code": None,
    }  # fmt: skip


def test_an_upstream_error_keeps_every_attempt_and_takes_the_last_ones_status() -> None:
    attempts = [Attempt("a", 429, "rate limited"), Attempt("b", 502, "")]
    raised = UpstreamError(attempts, code="upstream_failed")
    assert raised.attempts == tuple(attempts) and raised.status == 502 and raised.type == "upstream_error"
    assert raised.message == "All 2 upstream attempts failed: a: 429 rate limited; b: 502"
    assert raised.code == "upstream_failed"
    assert UpstreamError([Attempt("a", 500, "boom")]).message == "Upstream request failed: a: 500 boom"


def test_the_gateways_own_shortage_asks_the_client_to_retry_shortly() -> None:
    raised = OverloadedError("emfile", headers={"x-gateway-route": "r"})
    assert (raised.status, raised.type, raised.code, raised.reason) == (503, "gateway_overloaded", "gateway_overloaded", "emfile")
    assert raised.headers == {"Retry-After": str(OVERLOADED_RETRY_AFTER_SECONDS), "x-gateway-route": "r"}
    assert "(emfile)" in raised.message
