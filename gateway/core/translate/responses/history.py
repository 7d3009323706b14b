"""A memory conversation for a Responses upstream: its chat messages as input items, and a response's output as the chat message kept.

Memory keeps a conversation as chat messages, whichever API each turn came through. A turn
passed through to a target that serves the Responses API sends that history as input items
(`items_of`), and its answer is kept as the one chat message a chat answer would be
(`output_message`): its text and refusal, and its function and custom tool calls. What only a
Responses upstream produces (reasoning, built-in tool calls) is not kept: the message is what the
model said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.core.translate.responses.names import ToolName, qualified

_SYSTEM_ROLES = ("system", "developer")


def items_of(messages: Sequence[Mapping[str, Any]], tools: Mapping[str, ToolName]) -> list[dict[str, Any]]:
    """Chat messages (as memory keeps them) as Responses input items.

    `tools`: the request's namespaced and custom tools by chat function name (names.tool_names),
    so a kept call of one goes back with its namespace, or as a custom tool call.
    """
    items: list[dict[str, Any]] = []
    custom_calls: set[str] = set()
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            kind = "custom_tool_call_output" if call_id in custom_calls else "function_call_output"
            items.append({"type": kind, "call_id": call_id, "output": _text_of(content)})
        elif role == "assistant":
            calls = message.get("tool_calls") or ()
            refusal = message.get("refusal")
            if content or refusal or not calls:  # a refusal or an empty answer is still the model's turn
                items.append(_assistant_item(_text_of(content), refusal))
            for call in calls:
                item = _call_item(call, tools)
                if item["type"] == "custom_tool_call":
                    custom_calls.add(item["call_id"])
                items.append(item)
        elif role in _SYSTEM_ROLES:
            items.append({"role": role, "content": _text_of(content)})
        else:
            items.append({"role": "user", "content": content if isinstance(content, str) else _input_parts(content)})
    return items


def output_message(response: Any) -> dict[str, Any] | None:
    """The chat assistant message a response's `output` stands for; None when it has no output list."""
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        return None
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusals.append(part["refusal"])
        elif kind in ("function_call", "custom_tool_call"):
            name = qualified(item.get("namespace"), str(item.get("name")))
            custom = kind == "custom_tool_call"
            arguments = orjson.dumps({"input": item.get("input")}).decode() if custom else item.get("arguments")
            calls.append({"id": item.get("call_id"), "type": "function", "function": {"name": name, "arguments": arguments}})
    refusal = "".join(refusals)
    text = "".join(texts) or refusal  # a refusal alone is the text too, as memory keeps it (gateway.core.memory.messages)
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if refusal:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    return message


def _assistant_item(text: str, refusal: Any) -> dict[str, Any]:
    """A kept assistant message's text as a message item; with its refusal, as output_text and refusal parts.

    A text that is the refusal is memory's copy of it (gateway.core.memory.messages): the refusal part alone.
    """
    if not isinstance(refusal, str) or not refusal:
        return {"role": "assistant", "content": text}
    parts: list[dict[str, Any]] = [{"type": "output_text", "text": text, "annotations": []}] if text and text != refusal else []
    parts.append({"type": "refusal", "refusal": refusal})
    return {"type": "message", "role": "assistant", "content": parts}


def _call_item(call: Mapping[str, Any], tools: Mapping[str, ToolName]) -> dict[str, Any]:
    """A kept chat tool call as the Responses call item it was (a namespace's, a custom tool's)."""
    function = call.get("function") or {}
    name = str(function.get("name"))
    arguments = function.get("arguments")
    tool = tools.get(name)
    if tool is None:
        return {"type": "function_call", "call_id": call.get("id"), "name": name, "arguments": arguments}
    item: dict[str, Any] = {"call_id": call.get("id"), "name": tool.name}
    if tool.namespace is not None:
        item["namespace"] = tool.namespace
    if tool.custom:
        try:
            given = orjson.loads(arguments) if isinstance(arguments, str) else None
        except orjson.JSONDecodeError:
            given = None
        item["type"] = "custom_tool_call"
        item["input"] = given["input"] if isinstance(given, dict) and isinstance(given.get("input"), str) else arguments
        return item
    item["type"] = "function_call"
    item["arguments"] = arguments
    return item


def _text_of(content: Any) -> str:
    """A kept message's text: its string, or its text parts joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str))


def _input_parts(content: Any) -> list[dict[str, Any]]:
    """A kept user message's parts (chat's text, image_url and file) as Responses input parts."""
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "input_text", "text": part.get("text")})
        elif kind == "image_url":
            image = part.get("image_url") or {}
            parts.append({"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail") or "auto"})
        elif kind == "file":
            parts.append({"type": "input_file", **(part.get("file") or {})})
    return parts
