"""An Anthropic request's system prompt and messages as chat messages (the canonical form memory stores)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.json_shape import index_path, key_path
from gateway.core.translate import TranslationError
from gateway.core.translate.messages.checks import (
    CHECK,
    JSON,
    as_bool,
    as_list,
    as_object,
    as_string,
    required,
)

# Claude Code's first system block: a header for Anthropic's billing, not for the model. It changes
# between sessions, so a chat upstream that kept it would cache no prompt prefix across them.
BILLING_HEADER = "x-anthropic-billing-header:"
_USER_BLOCKS = ("text", "image", "document", "tool_result")
_ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")
_RESULT_BLOCKS = ("text", "image", "document", "tool_reference")
_INNER_BLOCKS = ("text", "image")  # of a document's content: documents do not nest


def system_to_chat(system: Any, path: str = "system") -> list[JSON]:
    """The system message of a `system` prompt (or a system message's content): its text blocks joined."""
    if system is None:
        return []
    if isinstance(system, str):
        text = system
    else:
        texts = (_text_of(block, index_path(path, i)) for i, block in enumerate(as_list(system, path)))
        text = "\n".join(text for text in texts if not text.startswith(BILLING_HEADER))
    return [{"role": "system", "content": text}] if text else []


def _text_of(value: Any, path: str) -> str:
    """The text of a block that must be a text block."""
    block = as_object(value, path)
    if block.get("type") != "text":
        raise CHECK.fail(key_path(path, "type"), "'text'", block.get("type"))
    return as_string(required(block, "text", path), key_path(path, "text"))


def messages_to_chat(value: Any, path: str, tools: Mapping[str, JSON]) -> list[JSON]:
    """The chat messages of the request's messages; `tools`: its chat functions by name, for tool_reference blocks."""
    items = as_list(value, path)
    if not items:
        raise TranslationError(f"{path}: must hold at least one message", path)
    out: list[JSON] = []
    for i, item in enumerate(items):
        out += _message_to_chat(item, index_path(path, i), tools, last=i == len(items) - 1)
    return out


def _message_to_chat(value: Any, path: str, tools: Mapping[str, JSON], *, last: bool) -> list[JSON]:
    message = as_object(value, path)
    role = message.get("role")
    content_path = key_path(path, "content")
    if role == "system":  # instructions between turns (Claude Code's environment, reminders): chat has them too
        return system_to_chat(required(message, "content", path), content_path)
    if role != "user" and role != "assistant":
        raise CHECK.fail(key_path(path, "role"), "'user', 'assistant' or 'system'", role)
    content = required(message, "content", path)
    if not isinstance(content, str):
        content = as_list(content, content_path)
    if not content:
        if role == "assistant" and last:  # an empty prefill: nothing for the model to continue
            return []
        raise TranslationError(f"{content_path}: must not be empty", content_path)
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if role == "user":
        return _user_to_chat(content, content_path, tools)
    return [_assistant_to_chat(content, content_path)]


def _user_to_chat(blocks: list[Any], path: str, tools: Mapping[str, JSON]) -> list[JSON]:
    """Tool results first, as `tool` messages (OpenAI wants them right after the calls), then the rest."""
    results: list[JSON] = []
    moved: list[JSON] = []
    parts: list[JSON] = []
    for i, value in enumerate(blocks):
        block_path = index_path(path, i)
        block = as_object(value, block_path)
        if block.get("type") == "tool_result":
            result, attachments = _tool_result_to_chat(block, block_path, tools)
            results.append(result)
            moved += attachments
        else:
            parts += _parts_to_chat(block, block_path, allowed=_USER_BLOCKS)
    if moved or parts:
        results.append({"role": "user", "content": moved + parts})
    return results


def _parts_to_chat(block: JSON, path: str, *, allowed: tuple[str, ...]) -> list[JSON]:
    """The OpenAI content parts of a text, image or document block (a type not `allowed` is refused so)."""
    match block.get("type"):
        case "text":
            return [{"type": "text", "text": as_string(required(block, "text", path), key_path(path, "text"))}]
        case "image":
            source_path = key_path(path, "source")
            return [_image_to_chat(as_object(required(block, "source", path), source_path), source_path)]
        case "document":
            return _document_to_chat(block, path)
        case other:
            raise CHECK.choice_error(key_path(path, "type"), allowed, other)


def _image_to_chat(source: JSON, path: str) -> JSON:
    match source.get("type"):
        case "base64":
            url = _data_url(source, path)
        case "url":
            url = as_string(required(source, "url", path), key_path(path, "url"))
        case other:
            raise CHECK.fail(key_path(path, "type"), "'base64' or 'url' for a non-Anthropic target", other)
    return {"type": "image_url", "image_url": {"url": url}}


def _document_to_chat(block: JSON, path: str) -> list[JSON]:
    source_path = key_path(path, "source")
    source = as_object(required(block, "source", path), source_path)
    title = block.get("title")
    title = as_string(title, key_path(path, "title")) if title is not None else None
    match source.get("type"):
        case "base64":
            file = {"filename": title or "document.pdf", "file_data": _data_url(source, source_path)}
            return [{"type": "file", "file": file}]
        case "text":
            text = as_string(required(source, "data", source_path), key_path(source_path, "data"))
            return [{"type": "text", "text": f"{title}\n\n{text}" if title else text}]
        case "content":
            content_path = key_path(source_path, "content")
            content = required(source, "content", source_path)
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            parts: list[JSON] = []
            for i, value in enumerate(as_list(content, content_path)):
                inner_path = index_path(content_path, i)
                inner = as_object(value, inner_path)
                if inner.get("type") == "document":
                    raise CHECK.choice_error(key_path(inner_path, "type"), _INNER_BLOCKS, "document")
                parts += _parts_to_chat(inner, inner_path, allowed=_INNER_BLOCKS)
            return parts
        case other:
            raise CHECK.fail(key_path(source_path, "type"),
                             "'base64', 'text' or 'content' for a non-Anthropic target", other)


def _data_url(source: JSON, path: str) -> str:
    media_type = as_string(required(source, "media_type", path), key_path(path, "media_type"))
    data = as_string(required(source, "data", path), key_path(path, "data"))
    return f"data:{media_type};base64,{data}"


def _tool_result_to_chat(block: JSON, path: str, tools: Mapping[str, JSON]) -> tuple[JSON, list[JSON]]:
    """The `tool` message of a tool_result, and the images or files it carried (for a user message).

    A tool_reference block (a tool search's result) is the definition of the tool it loads, as text.
    """
    call_id = as_string(required(block, "tool_use_id", path), key_path(path, "tool_use_id"))
    content = block.get("content")
    texts: list[str] = []
    attachments: list[JSON] = []
    if isinstance(content, str):
        texts.append(content)
    elif content is not None:
        content_path = key_path(path, "content")
        for i, value in enumerate(as_list(content, content_path)):
            inner_path = index_path(content_path, i)
            if as_object(value, inner_path).get("type") == "tool_reference":
                texts.append(_tool_reference(value, inner_path, tools))
                continue
            for part in _parts_to_chat(value, inner_path, allowed=_RESULT_BLOCKS):
                if part["type"] == "text":
                    texts.append(part["text"])
                else:
                    attachments.append(part)
    is_error = block.get("is_error")
    text = "\n".join(texts)
    if is_error is not None and as_bool(is_error, key_path(path, "is_error")):
        text = f"Error: {text}" if text else "Error"
    if attachments:
        attachments.insert(0, {"type": "text", "text": f"Attachments of tool result {call_id}:"})
    return {"role": "tool", "tool_call_id": call_id, "content": text}, attachments


def _tool_reference(block: JSON, path: str, tools: Mapping[str, JSON]) -> str:
    """A loaded tool's definition as Anthropic shows it to the model: `<functions><function>{...}</function></functions>`."""
    name = as_string(required(block, "tool_name", path), key_path(path, "tool_name"))
    definition = tools.get(name, {"name": name})
    return f"<functions><function>{orjson.dumps(definition).decode()}</function></functions>"


def _assistant_to_chat(blocks: list[Any], path: str) -> JSON:
    texts: list[str] = []
    calls: list[JSON] = []
    for i, value in enumerate(blocks):
        block_path = index_path(path, i)
        block = as_object(value, block_path)
        match block.get("type"):
            case "text":
                texts.append(as_string(required(block, "text", block_path), key_path(block_path, "text")))
            case "tool_use":
                calls.append(_tool_use_to_chat(block, block_path))
            case "thinking" | "redacted_thinking":
                pass  # an OpenAI upstream can neither read nor verify Anthropic's signed reasoning
            case other:
                raise CHECK.choice_error(key_path(block_path, "type"), _ASSISTANT_BLOCKS, other)
    message: JSON = {"role": "assistant"}
    if texts or not calls:  # as stored replies are: no content key beside tool calls without text
        message["content"] = "".join(texts)
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_use_to_chat(block: JSON, path: str) -> JSON:
    call_id = as_string(required(block, "id", path), key_path(path, "id"))
    name = as_string(required(block, "name", path), key_path(path, "name"))
    arguments = as_object(required(block, "input", path), key_path(path, "input"))
    try:
        encoded = orjson.dumps(arguments).decode()
    except orjson.JSONEncodeError:  # integers past 64 bits, nesting past orjson's limit, lone surrogates
        raise TranslationError(f"{path}.input: cannot be encoded as JSON", key_path(path, "input")) from None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}
