"""The state a Responses request refers to: a `conversation`, or the response it continues (`previous_response_id`).

Read here, checked in OpenAI's words (a 400 naming the parameter), and taken out of the body the
gateway translates once it keeps that state itself (see gateway.server.responses_api).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from gateway.core.translate import TranslationError
from gateway.core.translate.responses.checks import CHECK, as_string

# What a memoryId may hold: a conversation is a memory conversation, its id works as one.
CONVERSATION_ID: Final = re.compile(r"[A-Za-z0-9._:@-]{1,256}")
STATE_KEYS: Final = ("conversation", "previous_response_id")


def conversation_id(body: Mapping[str, Any]) -> str | None:
    """The conversation `body` continues (`"conv_..."` or `{"id": "conv_..."}`), or None."""
    value = body.get("conversation")
    if value is None:
        return None
    if isinstance(value, dict):
        value = as_string(value.get("id"), "conversation.id")
        path = "conversation.id"
    else:
        path = "conversation"
        if not isinstance(value, str):
            raise CHECK.fail(path, "a string or an object with an id", value)
    if not CONVERSATION_ID.fullmatch(value):
        raise TranslationError(
            f"{path} must be 1-256 characters of letters, digits and ._:@- (a memoryId), got {value[:40]!r}.",
            path,
            code="invalid_value",
        )
    return value


def previous_response_id(body: Mapping[str, Any]) -> str | None:
    """The response `body` continues, or None (absent, null or empty)."""
    value = body.get("previous_response_id")
    if value is None:
        return None
    return as_string(value, "previous_response_id") or None


def one_state(conversation: str | None, previous: str | None, *, memory_id: str | None) -> None:
    """Refuse a request that names two histories: a conversation, a response to continue, a memoryId header."""
    if conversation is not None and previous is not None:
        raise TranslationError(
            "previous_response_id and conversation cannot be used together: each names the whole history.",
            "previous_response_id",
            code="invalid_value",
        )
    if memory_id is None:
        return
    if previous is not None:
        raise TranslationError(
            "previous_response_id cannot be used with a memoryId header: the memory conversation is the history.",
            "previous_response_id",
            code="invalid_value",
        )
    if conversation is not None and conversation != memory_id:
        raise TranslationError(
            f"conversation '{conversation[:60]}' and the memoryId header '{memory_id[:60]}' name two histories; send one.",
            "conversation",
            code="invalid_value",
        )


def stateless(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` without the state the gateway resolves itself (the history it names is forwarded instead)."""
    return {key: value for key, value in body.items() if key not in STATE_KEYS}
