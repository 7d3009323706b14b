"""Anthropic's error shapes (messages.errors): the error type for a status, and the error body."""

from __future__ import annotations

import anthropic
import pytest

from gateway.core.translate.messages.errors import error_body, error_type, status_of


@pytest.mark.parametrize(("status", "kind"), [
    (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"), (403, "permission_error"),
    (404, "not_found_error"), (405, "invalid_request_error"), (408, "invalid_request_error"), (429, "rate_limit_error"),
    (500, "api_error"), (502, "api_error"), (503, "api_error"), (504, "timeout_error"), (529, "overloaded_error"),
])
def test_error_bodies_carry_anthropics_type_for_the_status(status: int, kind: str) -> None:
    body = error_body(status, "nope")
    assert body == {"type": "error", "error": {"type": kind, "message": "nope"}}
    anthropic.types.ErrorResponse.model_validate(body)


def test_a_too_large_request_is_request_too_large() -> None:
    # Anthropic's documented 413 type; this SDK's ErrorResponse does not list it yet.
    assert error_body(413, "too big") == {"type": "error", "error": {"type": "request_too_large", "message": "too big"}}


@pytest.mark.parametrize(("kind", "status"), [
    ("invalid_request_error", 400), ("authentication_error", 401), ("rate_limit_error", 429), ("api_error", 500),
    ("overloaded_error", 529), ("timeout_error", 504), ("some_new_error", 502), (None, 502), (7, 502),
])
def test_an_error_type_from_an_anthropic_upstream_stands_for_its_status(kind: object, status: int) -> None:
    assert status_of(kind) == status


def test_every_status_with_a_type_of_its_own_comes_back_from_that_type() -> None:
    for status in (400, 401, 402, 403, 404, 413, 429, 504, 529):
        assert status_of(error_type(status)) == status
