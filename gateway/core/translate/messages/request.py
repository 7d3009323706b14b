"""An Anthropic Messages request as a Chat Completions payload: its options, tools and tool choice."""

from __future__ import annotations

import re
from typing import Any

from gateway.core.json_shape import index_path, is_int, key_path
from gateway.core.translate import TranslationError
from gateway.core.translate.dropped import DROPS
from gateway.core.translate.messages.checks import (
    CHECK,
    JSON,
    as_bool,
    as_list,
    as_number,
    as_object,
    as_string,
    as_strings,
    body_object,
    listed,
    required,
)
from gateway.core.translate.messages.conversation import BILLING_HEADER, messages_to_chat, system_to_chat

# Top-level keys to_chat reads; any other is left out (and told to the log).
_READ = frozenset({
    "model", "max_tokens", "system", "messages", "tools", "tool_choice", "stop_sequences", "temperature",
    "top_p", "top_k", "metadata", "output_config", "stream",
})
# OpenAI refuses a longer `user` (OpenRouter one past 128); Claude Code's user_id, a JSON object
# of device and session ids, is about 150 characters: sent on, it would fail every request.
_MAX_USER = 64
# Anthropic's server tools a request may offer and the model do without (its `type`, dated).
_OFFERED_ONLY = re.compile(r"(web_search|web_fetch|code_execution)_\d{8}")
_CHOICES = ("auto", "any", "tool", "none")


def to_chat(body: Any) -> JSON:
    """The Chat Completions payload for an Anthropic Messages request; TranslationError when malformed."""
    request = body_object(body)
    model = as_string(required(request, "model", ""), "model")
    max_tokens = required(request, "max_tokens", "")
    if not is_int(max_tokens) or max_tokens < 1:
        raise CHECK.fail("max_tokens", "an integer >= 1", max_tokens)
    sent = required(request, "messages", "")
    tools = _tools_to_chat(request.get("tools"), "tools", loaded=_referenced(sent))
    messages = system_to_chat(request.get("system"))
    messages += messages_to_chat(sent, "messages", {tool["function"]["name"]: tool["function"] for tool in tools})
    payload: JSON = {"model": model, "messages": messages, "max_tokens": max_tokens}
    choice, parallel = _tool_choice_to_chat(request.get("tool_choice"), "tool_choice")
    if isinstance(choice, dict) and (forced := choice["function"]["name"]) in _offered_only(request.get("tools")):
        raise TranslationError(f"tool_choice.name: the server tool {forced[:40]!r} needs an Anthropic target "
                               "(a chat completions target has no such tool)", "tool_choice.name")
    if tools:  # OpenAI refuses an empty tools list, and tool_choice without tools
        payload["tools"] = tools
        if choice is not None:
            payload["tool_choice"] = choice
        if parallel is not None:
            payload["parallel_tool_calls"] = parallel
    if (stop := as_strings(request.get("stop_sequences"), "stop_sequences")):
        payload["stop"] = stop
    for name in ("temperature", "top_p"):
        if (value := request.get(name)) is not None:
            payload[name] = as_number(value, name, finite=True)
    if (top_k := request.get("top_k")) is not None:
        if not is_int(top_k) or top_k < 0:
            raise CHECK.fail("top_k", "an integer >= 0", top_k)
        payload["top_k"] = top_k
    if (user := _metadata_user(request.get("metadata"))) is not None and len(user) <= _MAX_USER:
        payload["user"] = user
    if (response_format := _output_format(request.get("output_config"))) is not None:
        payload["response_format"] = response_format
    if (stream := request.get("stream")) is not None:
        payload["stream"] = as_bool(stream, "stream")
        if stream:  # the final usage chunk carries what message_delta reports as output_tokens
            payload["stream_options"] = {"include_usage": True}
    if dropped := _dropped(request):
        DROPS.dropped("messages", dropped)
    return payload


def _dropped(request: JSON) -> list[str]:
    """What to_chat left out of a request it translated: options, cache marks, thinking, deferred tools."""
    dropped = [key for key, value in request.items() if key not in _READ and value is not None]
    metadata = request.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str) and len(metadata["user_id"]) > _MAX_USER:
        dropped.append(f"metadata.user_id longer than {_MAX_USER} characters")
    config = request.get("output_config")
    if isinstance(config, dict):
        dropped += [f"output_config.{key}" for key in config if key != "format"]
    referenced = _referenced(request.get("messages"))
    system = list(listed(request.get("system")))  # copies: the request's own lists stay as they are
    blocks = list(listed(request.get("tools")))
    for message in listed(request.get("messages")):
        if isinstance(message, dict):
            (system if message.get("role") == "system" else blocks).extend(listed(message.get("content")))
    if any(isinstance(block, dict) and str(block.get("text")).startswith(BILLING_HEADER) for block in system):
        dropped.append("the x-anthropic-billing-header system block")
    for block in system + blocks:
        if isinstance(block, dict):
            if "cache_control" in block:
                dropped.append("cache_control")
            if block.get("type") in ("thinking", "redacted_thinking"):
                dropped.append("thinking blocks")
            if block.get("defer_loading") is True and not _loaded(block, referenced):
                dropped.append("tools with defer_loading")
    dropped += [f"the {kind} tool" for kind in _offered_only(request.get("tools")).values()]
    return dropped


def _offered_only(tools: Any) -> dict[str, str]:
    """The server tools of `tools` that a translation leaves out, by name: their types."""
    return {str(tool.get("name")): tool["type"] for tool in listed(tools)
            if isinstance(tool, dict) and isinstance(tool.get("type"), str) and _OFFERED_ONLY.fullmatch(tool["type"])}


def _loaded(tool: JSON, loaded: set[str]) -> bool:
    """Whether `tool` is one a tool_reference loaded (`loaded`: their names)."""
    name = tool.get("name")
    return isinstance(name, str) and name in loaded


def _referenced(messages: Any) -> set[str]:
    """The names of the tools the tool_reference blocks of `messages` load (a tool search's results)."""
    names: set[str] = set()
    for message in listed(messages):
        for block in listed(message.get("content")) if isinstance(message, dict) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                names |= {inner["tool_name"] for inner in listed(block.get("content"))
                          if isinstance(inner, dict) and inner.get("type") == "tool_reference"
                          and isinstance(inner.get("tool_name"), str)}
    return names


def _tools_to_chat(value: Any, path: str, *, loaded: set[str]) -> list[JSON]:
    """Chat functions for the request's tools; one whose loading is deferred only once a tool_reference loaded it."""
    if value is None:
        return []
    tools: list[JSON] = []
    for i, item in enumerate(as_list(value, path)):
        tool_path = index_path(path, i)
        tool = as_object(item, tool_path)
        if tool.get("defer_loading") is True and not _loaded(tool, loaded):  # hidden from the model till then
            continue
        kind = tool.get("type")
        if isinstance(kind, str) and _OFFERED_ONLY.fullmatch(kind):
            continue  # an offer the model can do without: it answers from what it knows
        if kind is not None and kind != "custom":
            raise CHECK.fail(key_path(tool_path, "type"), "'custom' (or a server tool the model can do without, "
                             "as web_search_20250305): Anthropic's other typed tools need an Anthropic target", kind)
        function: JSON = {
            "name": as_string(required(tool, "name", tool_path), key_path(tool_path, "name")),
            "parameters": as_object(required(tool, "input_schema", tool_path),
                                       key_path(tool_path, "input_schema")),
        }
        if (description := tool.get("description")) is not None:
            function["description"] = as_string(description, key_path(tool_path, "description"))
        if (strict := tool.get("strict")) is not None:
            function["strict"] = as_bool(strict, key_path(tool_path, "strict"))
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice_to_chat(value: Any, path: str) -> tuple[Any, bool | None]:
    """(OpenAI's tool_choice, parallel_tool_calls), each None when the request leaves it to the default."""
    if value is None:
        return None, None
    choice = as_object(value, path)
    chosen: Any
    match choice.get("type"):
        case "auto":
            chosen = "auto"
        case "any":
            chosen = "required"
        case "none":
            chosen = "none"
        case "tool":
            name = as_string(required(choice, "name", path), key_path(path, "name"))
            chosen = {"type": "function", "function": {"name": name}}
        case other:
            raise CHECK.choice_error(key_path(path, "type"), _CHOICES, other)
    disable = choice.get("disable_parallel_tool_use")
    if disable is None:
        return chosen, None
    return chosen, False if as_bool(disable, key_path(path, "disable_parallel_tool_use")) else None


def _metadata_user(value: Any) -> str | None:
    if value is None:
        return None
    user = as_object(value, "metadata").get("user_id")
    return None if user is None else as_string(user, "metadata.user_id")


def _output_format(value: Any) -> JSON | None:
    """OpenAI's response_format for `output_config.format` (a JSON schema), without strict mode."""
    if value is None:
        return None
    output_format = as_object(value, "output_config").get("format")
    if output_format is None:
        return None
    path = "output_config.format"
    output_format = as_object(output_format, path)
    if output_format.get("type") != "json_schema":
        raise CHECK.fail(key_path(path, "type"), "'json_schema'", output_format.get("type"))
    schema = as_object(required(output_format, "schema", path), key_path(path, "schema"))
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
