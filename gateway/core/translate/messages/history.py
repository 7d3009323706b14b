"""Chat messages (what memory stores) as Anthropic messages, so a stored conversation continues on /v1/messages."""

from __future__ import annotations

import re
from typing import Any

from gateway.core.json_shape import index_path, key_path
from gateway.core.translate import TranslationError
from gateway.core.translate.messages.answer import tool_use
from gateway.core.translate.messages.checks import CHECK, JSON, as_list, as_object, as_string, required

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_ROLES = ("system", "developer", "user", "assistant", "tool")
_PARTS = ("text", "image_url", "file")


def messages_from_chat(messages: Any) -> list[JSON]:
    """Anthropic messages for OpenAI chat messages; system and developer messages are left out (they go in `system`).

    Consecutive `tool` messages become one user message of tool_result blocks, so that
    `to_chat(...)["messages"]` gives the chat messages back (tool-call arguments respelled).
    """
    out: list[JSON] = []
    results: list[JSON] | None = None  # the tool_result blocks of the user message being built
    for i, value in enumerate(as_list(messages, "messages")):
        path = index_path("messages", i)
        message = as_object(value, path)
        role = message.get("role")
        if role == "tool":
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(_tool_result_from_chat(message, path))
            continue
        results = None
        match role:
            case "system" | "developer":
                continue
            case "user":
                content = required(message, "content", path)
                out.append({"role": "user", "content": _user_from_chat(content, key_path(path, "content"))})
            case "assistant":
                out.append(_assistant_from_chat(message, path))
            case other:
                raise CHECK.choice_error(key_path(path, "role"), _ROLES, other)
    return out


def _user_from_chat(content: Any, path: str) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    blocks: list[JSON] = []
    for i, value in enumerate(as_list(content, path)):
        part_path = index_path(path, i)
        part = as_object(value, part_path)
        match part.get("type"):
            case "text":
                text = as_string(required(part, "text", part_path), key_path(part_path, "text"))
                blocks.append({"type": "text", "text": text})
            case "image_url":
                image_path = key_path(part_path, "image_url")
                image = as_object(required(part, "image_url", part_path), image_path)
                url = as_string(required(image, "url", image_path), key_path(image_path, "url"))
                blocks.append({"type": "image", "source": _source_from_url(url)})
            case "file":
                blocks.append(_document_from_chat(part, part_path))
            case other:
                raise CHECK.choice_error(key_path(part_path, "type"), _PARTS, other)
    return blocks


def _source_from_url(url: str) -> JSON:
    if (match := _DATA_URL.fullmatch(url)) is not None:
        return {"type": "base64", "media_type": match[1], "data": match[2]}
    return {"type": "url", "url": url}


def _document_from_chat(part: JSON, path: str) -> JSON:
    file_path = key_path(path, "file")
    file = as_object(required(part, "file", path), file_path)
    data = file.get("file_data")
    match = _DATA_URL.fullmatch(data) if isinstance(data, str) else None
    if match is None:
        raise TranslationError(f"{file_path}.file_data: must be a base64 data URL (file ids cannot be translated)",
                               key_path(file_path, "file_data"))
    block: JSON = {"type": "document", "source": {"type": "base64", "media_type": match[1], "data": match[2]}}
    if isinstance(file.get("filename"), str):
        block["title"] = file["filename"]
    return block


def _assistant_from_chat(message: JSON, path: str) -> JSON:
    content = message.get("content")
    if isinstance(content, list):  # text and refusal parts
        text = "".join(_part_text(part) for part in content)
    elif isinstance(content, str) or content is None:
        text = content or ""
    else:
        raise CHECK.fail(key_path(path, "content"), "a string, a list of parts or null", content)
    refusal = message.get("refusal")
    if not text and isinstance(refusal, str):  # a refusal without text (a Responses turn's): Anthropic has no empty turn
        text = refusal
    calls = message.get("tool_calls")
    if not calls:
        return {"role": "assistant", "content": text}
    blocks: list[JSON] = [{"type": "text", "text": text}] if text else []
    calls_path = key_path(path, "tool_calls")
    for i, value in enumerate(as_list(calls, calls_path)):
        call_path = index_path(calls_path, i)
        call = as_object(value, call_path)
        call_id = as_string(required(call, "id", call_path), key_path(call_path, "id"))
        function_path = key_path(call_path, "function")
        function = as_object(required(call, "function", call_path), function_path)
        blocks.append(tool_use(call_id, function, function_path))
    return {"role": "assistant", "content": blocks}


def _part_text(part: Any) -> str:
    """The text of a text or refusal part; "" for anything else."""
    if not isinstance(part, dict):
        return ""
    text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
    return text if isinstance(text, str) else ""


def _tool_result_from_chat(message: JSON, path: str) -> JSON:
    call_id = as_string(required(message, "tool_call_id", path), key_path(path, "tool_call_id"))
    content = message.get("content")
    block: JSON = {"type": "tool_result", "tool_use_id": call_id}
    if isinstance(content, str):
        block["content"] = content
    elif isinstance(content, list):
        block["content"] = [{"type": "text", "text": _part_text(part)} for part in content if _part_text(part)]
    elif content is not None:
        raise CHECK.fail(key_path(path, "content"), "a string or a list of text parts", content)
    return block
