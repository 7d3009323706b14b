"""A Responses API request as a chat completions payload, or a TranslationError naming what cannot be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.json_shape import optional
from gateway.core.translate import TranslationError
from gateway.core.translate.dropped import DROPS
from gateway.core.translate.responses.checks import (
    CHECK,
    as_bool,
    as_number,
    as_object,
    as_string,
    effort,
    metadata,
    positive,
    verbosity,
)
from gateway.core.translate.responses.items import messages_to_chat
from gateway.core.translate.responses.names import offered
from gateway.core.translate.responses.tools import (
    OFFERED_ONLY,
    added_tools,
    response_format,
    tool_choice_to_chat,
    tools_to_chat,
)

# State a Responses upstream keeps between requests; a chat upstream has nothing to resolve it with.
_NATIVE_ONLY: dict[str, str] = {
    "previous_response_id": "continues a response stored by an upstream that serves the Responses API",
    "conversation": "refers to a conversation stored by an upstream that serves the Responses API",
    "prompt": "refers to a prompt template stored at OpenAI",
    "background": "asks the upstream to run the response in the background, to be polled later",
    "context_management": "asks the upstream to compact the context it keeps",
    "moderation": "asks the upstream to moderate the response",
}
# Read here (translated, or dropped), never forwarded as they are.
_RESPONSES_KEYS = frozenset(_NATIVE_ONLY) | {
    "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
    "text", "reasoning", "stream", "stream_options", "metadata", "store", "include", "truncation",
    "max_tool_calls", "top_logprobs", "prompt_cache_options", "client_metadata",
}
# Of those, what only OpenAI's own service acts on: left out, and told to the log.
_DROPPED_KEYS = ("include", "truncation", "max_tool_calls", "top_logprobs", "prompt_cache_options",
                 "client_metadata")


def to_chat(body: Any) -> dict[str, Any]:
    """The chat completions payload for a Responses API request; TranslationError names what cannot be."""
    if not isinstance(body, dict):
        raise TranslationError("The request body must be a JSON object.", None, code="invalid_type")
    for key, reason in _NATIVE_ONLY.items():
        if body.get(key) not in (None, False):
            raise TranslationError(
                f"'{key}' {reason}; this model's target speaks chat completions, where it cannot be "
                "translated.",
                key,
                code="unsupported_parameter",
            )
    payload = {key: value for key, value in body.items() if key not in _RESPONSES_KEYS}
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise CHECK.fail("model", "a non-empty string", body.get("model"))
    for key in ("temperature", "top_p"):
        optional(body, key, as_number)
    for key in ("user", "safety_identifier", "prompt_cache_key", "service_tier"):
        optional(body, key, as_string)
    optional(body, "metadata", metadata)
    payload["messages"] = messages_to_chat(body)

    tools = (optional(body, "tools", tools_to_chat) or []) + added_tools(body.get("input"))
    choice = optional(body, "tool_choice", tool_choice_to_chat)
    parallel = optional(body, "parallel_tool_calls", as_bool)
    if tools:  # chat refuses tool_choice and parallel_tool_calls without tools
        payload["tools"] = tools
        if choice is not None:
            payload["tool_choice"] = choice
        if parallel is not None:
            payload["parallel_tool_calls"] = parallel
    if (limit := optional(body, "max_output_tokens", positive)) is not None:
        payload["max_completion_tokens"] = limit
    if (text := optional(body, "text", as_object)) is not None:
        if (chat_format := optional(text, "format", response_format, path="text.format")) is not None:
            payload["response_format"] = chat_format
        if (chosen := optional(text, "verbosity", verbosity, path="text.verbosity")) is not None:
            payload["verbosity"] = chosen
    reasoning = optional(body, "reasoning", as_object) or {}
    if (chosen := optional(reasoning, "effort", effort, path="reasoning.effort")) is not None:
        payload["reasoning_effort"] = chosen
    if (stream := optional(body, "stream", as_bool)) is not None:
        payload["stream"] = stream
        if stream:  # the usage of response.completed comes in the last chunk, only when asked for
            payload["stream_options"] = {"include_usage": True}
    if dropped := _dropped(body, reasoning):
        DROPS.dropped("responses", dropped)
    return payload


def _dropped(body: Mapping[str, Any], reasoning: Mapping[str, Any]) -> list[str]:
    """What to_chat left out of a request it translated (besides what it never forwards: store, metadata)."""
    dropped = [key for key in _DROPPED_KEYS if body.get(key) is not None]
    dropped += [f"reasoning.{key}" for key in reasoning if key != "effort"]
    for group in offered(body):
        dropped += [f"the {tool['type']} tool" for tool in group if isinstance(tool, dict) and tool.get("type") in OFFERED_ONLY]
    items = body.get("input")
    if isinstance(items, list) and any(isinstance(item, dict) and item.get("type") == "reasoning" for item in items):
        dropped.append("reasoning items")
    return dropped
