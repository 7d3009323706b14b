"""A Responses request's input items as chat messages: messages, function calls and their outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.json_shape import optional
from gateway.core.translate import TranslationError
from gateway.core.translate.responses.checks import CHECK, as_list, as_object, as_string, untranslatable
from gateway.core.translate.responses.names import qualified

_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")
# Items that do not end the turn of tool outputs before them (the others flush their attachments).
_IN_TURN = ("function_call_output", "custom_tool_call_output", "reasoning", "additional_tools")


def messages_to_chat(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a request's `instructions` and `input`."""
    messages: list[dict[str, Any]] = []
    if instructions := optional(body, "instructions", as_string):
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        moved: list[dict[str, Any]] = []  # images and files of tool outputs, for a user message after them
        for index, item in enumerate(items):
            _add_item(messages, item, f"input[{index}]", moved=moved)
        _flush(messages, moved)
    elif items is None:
        raise CHECK.missing("input")
    else:
        raise CHECK.fail("input", "a string or an array of items", items)
    if not messages:
        raise TranslationError("input must hold at least one message.", "input")
    return messages


def _add_item(messages: list[dict[str, Any]], item: Any, path: str, *, moved: list[dict[str, Any]]) -> None:
    """Append one input item's chat message; a function call joins the assistant turn before it.

    A tool output's images and files go to `moved`: a tool message cannot carry them, so they
    follow, in a user message, once the tool messages of that turn are all in (`_flush`).
    """
    item = as_object(item, path)
    kind = item.get("type", "message" if "role" in item else None)
    if kind not in _IN_TURN:
        _flush(messages, moved)
    match kind:
        case "message":
            messages.append(_message(item, path))
        case "function_call" | "custom_tool_call":
            _add_call(messages, _call(item, path, custom=kind == "custom_tool_call"))
        case "function_call_output" | "custom_tool_call_output":
            call_id = as_string(item.get("call_id"), f"{path}.call_id")
            output = item.get("output")
            texts: list[dict[str, Any]] = []
            attachments: list[dict[str, Any]] = []
            for number, part in enumerate([] if isinstance(output, str) else as_list(output, f"{path}.output")):
                read = _input_part(part, f"{path}.output[{number}]")
                (texts if read["type"] == "text" else attachments).append(read)
            content = output if isinstance(output, str) else texts or ""
            messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
            if attachments:
                moved += [{"type": "text", "text": f"Attachments of tool result {call_id}:"}, *attachments]
        case "reasoning":
            pass  # the model's own earlier reasoning; a chat upstream takes none back
        case "additional_tools":
            pass  # tools, not a message: to_chat reads them with the request's own
        case str():
            raise untranslatable(f"{path}.type", f"an input item of type {kind[:40]!r}")
        case _:
            raise CHECK.fail(f"{path}.type", "a string", kind)


def _call(item: dict[str, Any], path: str, *, custom: bool) -> dict[str, Any]:
    """The chat tool call of a function_call item, or of a custom_tool_call (its input the `input` argument)."""
    namespace = optional(item, "namespace", as_string, path=f"{path}.namespace")
    if custom:
        arguments = orjson.dumps({"input": as_string(item.get("input"), f"{path}.input")}).decode()
    else:
        arguments = as_string(item.get("arguments"), f"{path}.arguments")
    name = qualified(namespace, as_string(item.get("name"), f"{path}.name"))
    return {"id": as_string(item.get("call_id"), f"{path}.call_id"), "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _flush(messages: list[dict[str, Any]], moved: list[dict[str, Any]]) -> None:
    """Append the images and files tool outputs carried, as a user message (then none is left)."""
    if moved:
        messages.append({"role": "user", "content": moved.copy()})
        moved.clear()


def _add_call(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """Append a tool call to the assistant turn before it, or as one of its own."""
    # Responses splits an assistant turn into a message and call items; chat, one message.
    if messages and messages[-1]["role"] == "assistant":
        messages[-1].setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _message(item: dict[str, Any], path: str) -> dict[str, Any]:
    role = CHECK.one_of(item.get("role"), f"{path}.role", _ROLES)
    content = item.get("content")
    if role == "assistant":
        return _assistant(content, path)
    # Chat's `developer` role is OpenAI's alone; `system` means the same to every upstream.
    chat_role = "user" if role == "user" else "system"
    if isinstance(content, str):
        return {"role": chat_role, "content": content}
    parts = as_list(content, f"{path}.content")
    read = _input_part if role == "user" else _text_part
    return {"role": chat_role, "content": [read(part, f"{path}.content[{n}]") for n, part in enumerate(parts)]}


def _assistant(content: Any, path: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    refusals: list[str] = []
    for number, part in enumerate(as_list(content, f"{path}.content")):
        where = f"{path}.content[{number}]"
        if as_object(part, where).get("type") == "refusal":
            refusals.append(as_string(part.get("refusal"), f"{where}.refusal"))
        else:
            texts.append(_text_part(part, where)["text"])
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if refusals:
        message["refusal"] = "".join(refusals)
    return message


def _text_part(part: Any, path: str) -> dict[str, Any]:
    part = as_object(part, path)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": as_string(part.get("text"), f"{path}.text")}
    if kind in ("input_image", "input_file"):
        raise untranslatable(f"{path}.type", f"a part of type {kind!r} outside a user message")
    raise CHECK.choice_error(f"{path}.type", _TEXT_PARTS, kind)


def _input_part(part: Any, path: str) -> dict[str, Any]:
    """A user message's content part: text, an image by URL, or a file by its data."""
    kind = as_object(part, path).get("type")
    if kind not in ("input_image", "input_file"):
        return _text_part(part, path)
    for key in ("file_id", "file_url"):
        if part.get(key) is not None:
            raise TranslationError(
                f"{path}.{key}: chat completions cannot fetch a file by id or URL; send it inline "
                f"({'image_url as a data: URL' if kind == 'input_image' else 'file_data'}).",
                f"{path}.{key}",
                code="unsupported_value",
            )
    if kind == "input_image":
        image: dict[str, Any] = {"url": as_string(part.get("image_url"), f"{path}.image_url")}
        if (detail := optional(part, "detail", as_string, path=f"{path}.detail")) is not None:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    file = {"file_data": as_string(part.get("file_data"), f"{path}.file_data")}
    if (filename := optional(part, "filename", as_string, path=f"{path}.filename")) is not None:
        file["filename"] = filename
    return {"type": "file", "file": file}
