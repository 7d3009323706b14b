"""Checks that an error is OpenAI-shaped: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Any

import openai


def assert_error(body: Any, *, param: str | None = None, code: str | None = None) -> None:
    """Assert `body` is an OpenAI error with a message (and this `param` and `code`, when given)."""
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    if param is not None:
        assert body["error"]["param"] == param
    if code is not None:
        assert body["error"]["code"] == code


def error_object(error: openai.APIStatusError) -> dict[str, Any]:
    """The error object of the OpenAI-shaped error body the SDK raised on (asserting the shape)."""
    body = error.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    found: dict[str, Any] = body["error"]
    return found
