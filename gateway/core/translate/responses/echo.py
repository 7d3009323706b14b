"""The request fields a Responses `response` object repeats, as the translation read them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gateway.core.json_shape import optional
from gateway.core.translate import TranslationError
from gateway.core.translate.responses.checks import (
    as_bool,
    as_number,
    as_object,
    as_string,
    effort,
    metadata,
    positive,
    verbosity,
)
from gateway.core.translate.responses.state import conversation_id
from gateway.core.translate.responses.tools import response_format, tool_choice_to_chat, tools_to_chat

T = TypeVar("T")


def _lenient(body: Mapping[str, Any], key: str, read: Callable[[Any, str], T]) -> T | None:
    """What to_chat read from body[key], or None where it would have refused it."""
    try:
        return optional(body, key, read)
    except TranslationError:
        return None


def _conversation(request: Mapping[str, Any]) -> dict[str, str] | None:
    """The conversation the response belongs to, as OpenAI shows it (`{"id": ...}`), when the request named a valid one."""
    try:
        found = conversation_id(request)
    except TranslationError:
        return None
    return None if found is None else {"id": found}


def echo(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields a Responses object repeats, as to_chat read them (defaults where it refused)."""
    text = _lenient(request, "text", as_object) or {}
    reasoning = _lenient(request, "reasoning", as_object)
    parallel = _lenient(request, "parallel_tool_calls", as_bool)
    has_choice = _lenient(request, "tool_choice", tool_choice_to_chat) is not None
    tools = _lenient(request, "tools", tools_to_chat) or []
    return {
        "instructions": _lenient(request, "instructions", as_string),
        "metadata": _lenient(request, "metadata", metadata),
        "max_output_tokens": _lenient(request, "max_output_tokens", positive),
        "parallel_tool_calls": True if parallel is None else parallel,
        "temperature": _lenient(request, "temperature", as_number),
        "top_p": _lenient(request, "top_p", as_number),
        "tool_choice": request["tool_choice"] if has_choice else "auto",
        "tools": [{"type": "function", **tool["function"]} for tool in tools],
        "text": {
            "format": text["format"] if _lenient(text, "format", response_format) else {"type": "text"},
            "verbosity": _lenient(text, "verbosity", verbosity),
        },
        "reasoning": None if reasoning is None else {"effort": _lenient(reasoning, "effort", effort)},
        "user": _lenient(request, "user", as_string),
        "previous_response_id": _lenient(request, "previous_response_id", as_string) or None,
        "conversation": _conversation(request),
        "error": None,
    }
