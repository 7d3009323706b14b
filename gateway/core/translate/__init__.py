"""Translations between the APIs clients speak and the OpenAI Chat Completions API, without I/O."""

from __future__ import annotations

from gateway.core.errors import InvalidRequestError


class TranslationError(InvalidRequestError):
    """A request that is malformed or cannot be translated (a 400); `param` is the culprit's dotted path."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value") -> None:
        super().__init__(message, param=param, code=code)


class MalformedAnswer(Exception):
    """An upstream chat answer or chunk that cannot be translated back (the client's 502)."""
