"""The OpenAI Responses API served by a chat completions upstream: requests, answers and streams.

Pure translation, no I/O: `to_chat` turns a Responses request into a chat completions payload,
`from_chat` turns the chat answer into a Responses `response` object, and `StreamTranslator`
turns chat chunks into Responses SSE events as they arrive.

What chat completions cannot do is refused with a TranslationError (a 400 naming the dotted
param): OpenAI's built-in tools other than web search, state kept by a Responses upstream
(`previous_response_id`, `conversation`, `prompt`, `background`, `context_management`,
`moderation`), file ids and file URLs, and input items other than messages, function calls and
their outputs. What only tunes OpenAI's own service is dropped: `metadata` (echoed back), `store`
(a translated response is never stored), `include`, `truncation`, `max_tool_calls`,
`top_logprobs`, `stream_options`, `prompt_cache_options`, `client_metadata`, `reasoning.summary`,
`reasoning.context` and `reasoning` input items. An offered web search tool is dropped too (the
model answers without searching; a tool_choice that forces it is refused). What is dropped is
told to the log (`dropped.DROPS`), once per field at INFO. Keys this module does not know pass
through to the chat payload, as the chat endpoint passes a client's extras.

Tools grouped in a `namespace` (Codex sends its agent tools so) become chat functions named
`<namespace>__<name>` (the `functions` namespace is the root one: its tools keep their names);
the calls of the answer carry their namespace and name apart again. Tools an `additional_tools`
input item adds join the request's tools (chat has one list, not one per place in the history).
A custom tool (free-form input, maybe under a grammar) becomes a function of one string
parameter, `input`, described with the grammar; its calls come back as `custom_tool_call` items
whose input is that string (a stream sends it whole, once the call is complete).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import orjson

from gateway.core.pieces import TextPieces
from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.dropped import DROPS

__all__ = ["MalformedAnswer", "StreamTranslator", "TranslationError", "from_chat", "to_chat"]

T = TypeVar("T")


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
# Built-in tools a request may offer and the model do without: dropped, unless tool_choice forces one.
_OFFERED_ONLY = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26",
                           "web_search_preview_2025_03_11"})
_NAMESPACE_JOIN = "__"
_ROOT_NAMESPACE = "functions"  # what a model calls `functions.x` is the tool `x`
_MAX_NAME = 64  # the longest function name OpenAI's chat completions take
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_VERBOSITIES = ("low", "medium", "high")
_CHOICE_MODES = ("none", "auto", "required")
_ROLES = ("user", "assistant", "system", "developer")
_PartKind = Literal["output_text", "refusal"]
# Where a chat message (or delta) carries each kind of content part.
_PART_KEYS: tuple[tuple[_PartKind, str], ...] = (("output_text", "content"), ("refusal", "refusal"))


def _kind(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string" if value else "an empty string"
        case list():
            return "an array"
        case _:
            return "an object"


def _invalid(at: str, expected: str, value: Any) -> TranslationError:
    return TranslationError(f"{at} must be {expected}, got {_kind(value)}.", at, code="invalid_type")


def _one_of(at: str, options: tuple[str, ...], value: Any) -> TranslationError:
    shown = repr(value[:40]) if isinstance(value, str) else _kind(value)
    return TranslationError(f"{at} must be one of {', '.join(map(repr, options))}, got {shown}.", at)


def _untranslatable(at: str, what: str) -> TranslationError:
    return TranslationError(
        f"{at}: {what} cannot be translated to chat completions; it needs a target whose upstream "
        "serves the Responses API.",
        at,
        code="unsupported_value",
    )


def _str(value: Any, at: str) -> str:
    if not isinstance(value, str):
        raise _invalid(at, "a string", value)
    return value


def _object(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(at, "an object", value)
    return value


def _array(value: Any, at: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid(at, "an array", value)
    return value


def _bool(value: Any, at: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(at, "a boolean", value)
    return value


def _number(value: Any, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(at, "a number", value)
    return value


def _positive(value: Any, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(at, "a positive integer", value)
    return value


def _metadata(value: Any, at: str) -> dict[str, str]:
    for key, item in _object(value, at).items():
        _str(item, f"{at}.{key}")
    return value  # type: ignore[no-any-return]  # every value was just checked


def _effort(value: Any, at: str) -> str:
    if value not in _EFFORTS:
        raise _one_of(at, _EFFORTS, value)
    return value  # type: ignore[no-any-return]  # one of _EFFORTS


def _verbosity(value: Any, at: str) -> str:
    if value not in _VERBOSITIES:
        raise _one_of(at, _VERBOSITIES, value)
    return value  # type: ignore[no-any-return]  # one of _VERBOSITIES


def _optional(
    body: Mapping[str, Any], key: str, read: Callable[[Any, str], T], at: str | None = None
) -> T | None:
    """`read` of body[key], or None when the key is absent or null."""
    value = body.get(key)
    return None if value is None else read(value, at or key)


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
        raise _invalid("model", "a non-empty string", body.get("model"))
    for key in ("temperature", "top_p"):
        _optional(body, key, _number)
    for key in ("user", "safety_identifier", "prompt_cache_key", "service_tier"):
        _optional(body, key, _str)
    _optional(body, "metadata", _metadata)
    payload["messages"] = _messages(body)

    tools = (_optional(body, "tools", _tools) or []) + _added_tools(body.get("input"))
    choice = _optional(body, "tool_choice", _tool_choice)
    parallel = _optional(body, "parallel_tool_calls", _bool)
    if tools:  # chat refuses tool_choice and parallel_tool_calls without tools
        payload["tools"] = tools
        if choice is not None:
            payload["tool_choice"] = choice
        if parallel is not None:
            payload["parallel_tool_calls"] = parallel
    if (limit := _optional(body, "max_output_tokens", _positive)) is not None:
        payload["max_completion_tokens"] = limit
    if (text := _optional(body, "text", _object)) is not None:
        if (response_format := _optional(text, "format", _response_format, "text.format")) is not None:
            payload["response_format"] = response_format
        if (verbosity := _optional(text, "verbosity", _verbosity, "text.verbosity")) is not None:
            payload["verbosity"] = verbosity
    reasoning = _optional(body, "reasoning", _object) or {}
    if (effort := _optional(reasoning, "effort", _effort, "reasoning.effort")) is not None:
        payload["reasoning_effort"] = effort
    if (stream := _optional(body, "stream", _bool)) is not None:
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
    for group in _offered(body):
        dropped += [f"the {tool['type']} tool" for tool in group if isinstance(tool, dict) and tool.get("type") in _OFFERED_ONLY]
    items = body.get("input")
    if isinstance(items, list) and any(isinstance(item, dict) and item.get("type") == "reasoning" for item in items):
        dropped.append("reasoning items")
    return dropped


def qualified(namespace: str | None, name: str) -> str:
    """The chat function name of tool `name` in `namespace` (none, or the root namespace: the name itself).

    One longer than chat allows (64 characters) is cut, with a digest of the whole: still unique.
    """
    if namespace is None or namespace == _ROOT_NAMESPACE:
        return name
    joined = f"{namespace}{_NAMESPACE_JOIN}{name}"
    if len(joined) <= _MAX_NAME:
        return joined
    return f"{joined[:_MAX_NAME - 9]}_{hashlib.sha256(joined.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class ToolName:
    """What a chat function name stands for: a tool's namespace (None at the root), name, and kind."""

    namespace: str | None
    name: str
    custom: bool


def tool_names(request: Mapping[str, Any]) -> dict[str, ToolName]:
    """The namespaced and custom tools `request` offers, by chat function name (others are named as they are)."""
    found: dict[str, ToolName] = {}

    def add(tool: Any, namespace: str | None) -> None:
        if not isinstance(tool, dict) or not isinstance(name := tool.get("name"), str):
            return
        if tool.get("type") == "namespace":
            members = tool.get("tools")
            for member in members if isinstance(members, list) else ():
                add(member, name)
        elif tool.get("type") == "custom" or (namespace is not None and namespace != _ROOT_NAMESPACE):
            root = namespace is None or namespace == _ROOT_NAMESPACE
            found[qualified(namespace, name)] = ToolName(None if root else namespace, name, tool.get("type") == "custom")

    for group in _offered(request):
        for tool in group:
            add(tool, None)
    return found


def _offered(request: Mapping[str, Any]) -> list[list[Any]]:
    """The request's tool lists: its `tools`, and those of its `additional_tools` input items."""
    groups = [request["tools"]] if isinstance(request.get("tools"), list) else []
    items = request.get("input")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
            groups.append(item["tools"])
    return groups


def _added_tools(items: Any) -> list[dict[str, Any]]:
    """The chat tools of the `additional_tools` input items, in their order."""
    tools: list[dict[str, Any]] = []
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools += _tools(item.get("tools"), f"input[{index}].tools")
    return tools


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if instructions := _optional(body, "instructions", _str):
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        moved: list[dict[str, Any]] = []  # images and files of tool outputs, for a user message after them
        for index, item in enumerate(items):
            _add_item(messages, item, f"input[{index}]", moved)
        _flush(messages, moved)
    elif items is None:
        raise TranslationError("'input' is required.", "input", code="missing_required_parameter")
    else:
        raise _invalid("input", "a string or an array of items", items)
    if not messages:
        raise TranslationError("input must hold at least one message.", "input")
    return messages


def _add_item(messages: list[dict[str, Any]], item: Any, at: str, moved: list[dict[str, Any]]) -> None:
    """Append one input item's chat message; a function call joins the assistant turn before it.

    A tool output's images and files go to `moved`: a tool message cannot carry them, so they
    follow, in a user message, once the tool messages of that turn are all in (`_flush`).
    """
    item = _object(item, at)
    kind = item.get("type", "message" if "role" in item else None)
    if kind not in ("function_call_output", "custom_tool_call_output", "reasoning", "additional_tools"):
        _flush(messages, moved)
    match kind:
        case "message":
            messages.append(_message(item, at))
        case "function_call" | "custom_tool_call":
            _add_call(messages, _call(item, at, custom=kind == "custom_tool_call"))
        case "function_call_output" | "custom_tool_call_output":
            call_id = _str(item.get("call_id"), f"{at}.call_id")
            output = item.get("output")
            texts: list[dict[str, Any]] = []
            attachments: list[dict[str, Any]] = []
            for number, part in enumerate([] if isinstance(output, str) else _array(output, f"{at}.output")):
                read = _input_part(part, f"{at}.output[{number}]")
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
            raise _untranslatable(f"{at}.type", f"an input item of type {kind[:40]!r}")
        case _:
            raise _invalid(f"{at}.type", "a string", kind)


def _call(item: dict[str, Any], at: str, *, custom: bool) -> dict[str, Any]:
    """The chat tool call of a function_call item, or of a custom_tool_call (its input the `input` argument)."""
    namespace = _optional(item, "namespace", _str, f"{at}.namespace")
    if custom:
        arguments = orjson.dumps({"input": _str(item.get("input"), f"{at}.input")}).decode()
    else:
        arguments = _str(item.get("arguments"), f"{at}.arguments")
    name = qualified(namespace, _str(item.get("name"), f"{at}.name"))
    return {"id": _str(item.get("call_id"), f"{at}.call_id"), "type": "function",
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


def _message(item: dict[str, Any], at: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        raise _one_of(f"{at}.role", _ROLES, role)
    content = item.get("content")
    if role == "assistant":
        return _assistant(content, at)
    # Chat's `developer` role is OpenAI's alone; `system` means the same to every upstream.
    chat_role = "user" if role == "user" else "system"
    if isinstance(content, str):
        return {"role": chat_role, "content": content}
    parts = _array(content, f"{at}.content")
    read = _input_part if role == "user" else _text_part
    return {"role": chat_role, "content": [read(part, f"{at}.content[{n}]") for n, part in enumerate(parts)]}


def _assistant(content: Any, at: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    refusals: list[str] = []
    for number, part in enumerate(_array(content, f"{at}.content")):
        where = f"{at}.content[{number}]"
        if _object(part, where).get("type") == "refusal":
            refusals.append(_str(part.get("refusal"), f"{where}.refusal"))
        else:
            texts.append(_text_part(part, where)["text"])
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if refusals:
        message["refusal"] = "".join(refusals)
    return message


def _text_part(part: Any, at: str) -> dict[str, Any]:
    part = _object(part, at)
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": _str(part.get("text"), f"{at}.text")}
    if kind in ("input_image", "input_file"):
        raise _untranslatable(f"{at}.type", f"a part of type {kind!r} outside a user message")
    raise _one_of(f"{at}.type", ("input_text", "output_text"), kind)


def _input_part(part: Any, at: str) -> dict[str, Any]:
    """A user message's content part: text, an image by URL, or a file by its data."""
    kind = _object(part, at).get("type")
    if kind not in ("input_image", "input_file"):
        return _text_part(part, at)
    for key in ("file_id", "file_url"):
        if part.get(key) is not None:
            raise TranslationError(
                f"{at}.{key}: chat completions cannot fetch a file by id or URL; send it inline "
                f"({'image_url as a data: URL' if kind == 'input_image' else 'file_data'}).",
                f"{at}.{key}",
                code="unsupported_value",
            )
    if kind == "input_image":
        image: dict[str, Any] = {"url": _str(part.get("image_url"), f"{at}.image_url")}
        if (detail := _optional(part, "detail", _str, f"{at}.detail")) is not None:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    file = {"file_data": _str(part.get("file_data"), f"{at}.file_data")}
    if (filename := _optional(part, "filename", _str, f"{at}.filename")) is not None:
        file["filename"] = filename
    return {"type": "file", "file": file}


def _tools(value: Any, at: str) -> list[dict[str, Any]]:
    """Chat function tools for the Responses tools (a namespace's flattened); web search is dropped, other built-ins refused."""
    tools = []
    for index, tool in enumerate(_array(value, at)):
        where = f"{at}[{index}]"
        kind = _object(tool, where).get("type")
        match kind:
            case "function":
                tools.append(_function(tool, where, None))
            case "custom":
                tools.append(_custom(tool, where, None))
            case "namespace":
                namespace = _str(tool.get("name"), f"{where}.name")
                for number, member in enumerate(_array(tool.get("tools"), f"{where}.tools")):
                    inner = f"{where}.tools[{number}]"
                    match _object(member, inner).get("type"):
                        case "function":
                            tools.append(_function(member, inner, namespace))
                        case "custom":
                            tools.append(_custom(member, inner, namespace))
                        case other:
                            raise _one_of(f"{inner}.type", ("function", "custom"), other)
            case str() if kind in _OFFERED_ONLY:
                pass  # an offer the model can do without: it answers from what it knows
            case str():
                raise _untranslatable(f"{where}.type", f"the built-in tool {kind[:40]!r}")
            case _:
                raise _invalid(f"{where}.type", "a string", kind)
    return tools


def _custom(tool: dict[str, Any], at: str, namespace: str | None) -> dict[str, Any]:
    """A custom tool as a chat function of one string, `input`, which its grammar (if any) describes."""
    function: dict[str, Any] = {"name": qualified(namespace, _str(tool.get("name"), f"{at}.name"))}
    if (description := _optional(tool, "description", _str, f"{at}.description")) is not None:
        function["description"] = description
    text = "The tool's input, as free-form text."
    if (kind := _optional(tool, "format", _object, f"{at}.format")) is not None and kind.get("type") == "grammar":
        syntax = _str(kind.get("syntax"), f"{at}.format.syntax")
        definition = _str(kind.get("definition"), f"{at}.format.definition")
        text = f"The tool's input, as text this {syntax} grammar accepts:\n{definition}"
    function["parameters"] = {"type": "object", "properties": {"input": {"type": "string", "description": text}},
                              "required": ["input"], "additionalProperties": False}
    return {"type": "function", "function": function}


def _function(tool: dict[str, Any], at: str, namespace: str | None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": qualified(namespace, _str(tool.get("name"), f"{at}.name"))}
    for key, read in (("description", _str), ("parameters", _object), ("strict", _bool)):
        if (setting := _optional(tool, key, read, f"{at}.{key}")) is not None:
            function[key] = setting
    return {"type": "function", "function": function}


def _tool_choice(value: Any, at: str) -> str | dict[str, Any]:
    if isinstance(value, str):
        if value not in _CHOICE_MODES:
            raise _one_of(at, _CHOICE_MODES, value)
        return value
    kind = _object(value, at).get("type")
    if kind == "function" or kind == "custom":
        namespace = _optional(value, "namespace", _str, f"{at}.namespace")
        return {"type": "function", "function": {"name": qualified(namespace, _str(value.get("name"), f"{at}.name"))}}
    if kind == "allowed_tools":
        mode = value.get("mode")
        if mode not in ("auto", "required"):
            raise _one_of(f"{at}.mode", ("auto", "required"), mode)
        allowed = []
        for index, tool in enumerate(_array(value.get("tools"), f"{at}.tools")):
            where = f"{at}.tools[{index}]"
            if _object(tool, where).get("type") != "function":
                raise _untranslatable(f"{where}.type", "a tool other than a function")
            allowed.append(_tool_choice(tool, where))
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    if isinstance(kind, str):
        raise _untranslatable(f"{at}.type", f"a tool_choice of type {kind[:40]!r}")
    raise _invalid(f"{at}.type", "a string", kind)


def _response_format(value: Any, at: str) -> dict[str, Any] | None:
    """Chat's `response_format` for `text.format`; None for plain text, chat's default."""
    kind = _object(value, at).get("type")
    match kind:
        case "text":
            return None
        case "json_object":
            return {"type": "json_object"}
        case "json_schema":
            schema: dict[str, Any] = {
                "name": _str(value.get("name"), f"{at}.name"),
                "schema": _object(value.get("schema"), f"{at}.schema"),
            }
            for key, read in (("description", _str), ("strict", _bool)):
                if (setting := _optional(value, key, read, f"{at}.{key}")) is not None:
                    schema[key] = setting
            return {"type": "json_schema", "json_schema": schema}
        case _:
            raise _one_of(f"{at}.type", ("text", "json_object", "json_schema"), kind)


def _lenient(body: Mapping[str, Any], key: str, read: Callable[[Any, str], T]) -> T | None:
    """What to_chat read from body[key], or None where it would have refused it."""
    try:
        return _optional(body, key, read)
    except TranslationError:
        return None


def _echo(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields a Responses object repeats, as to_chat read them (defaults where it refused)."""
    text = _lenient(request, "text", _object) or {}
    reasoning = _lenient(request, "reasoning", _object)
    parallel = _lenient(request, "parallel_tool_calls", _bool)
    has_choice = _lenient(request, "tool_choice", _tool_choice) is not None
    tools = _lenient(request, "tools", _tools) or []
    return {
        "instructions": _lenient(request, "instructions", _str),
        "metadata": _lenient(request, "metadata", _metadata),
        "max_output_tokens": _lenient(request, "max_output_tokens", _positive),
        "parallel_tool_calls": True if parallel is None else parallel,
        "temperature": _lenient(request, "temperature", _number),
        "top_p": _lenient(request, "top_p", _number),
        "tool_choice": request["tool_choice"] if has_choice else "auto",
        "tools": [{"type": "function", **tool["function"]} for tool in tools],
        "text": {
            "format": text["format"] if _lenient(text, "format", _response_format) else {"type": "text"},
            "verbosity": _lenient(text, "verbosity", _verbosity),
        },
        "reasoning": None if reasoning is None else {"effort": _lenient(reasoning, "effort", _effort)},
        "user": _lenient(request, "user", _str),
        "previous_response_id": None,
        "error": None,
    }


@dataclass(eq=False)
class _Part:
    """One content part of the assistant message, as the pieces it arrived in."""

    kind: _PartKind
    pieces: TextPieces = field(default_factory=TextPieces)

    def render(self, text: str | None = None) -> dict[str, Any]:
        text = self.pieces.text() if text is None else text
        if self.kind == "refusal":
            return {"type": "refusal", "refusal": text}
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


@dataclass(eq=False)
class _Message:
    parts: list[_Part] = field(default_factory=list)


@dataclass(eq=False)
class _Call:
    """A tool call: its chat arguments as they arrived; a custom tool's input is their `input` string."""

    call_id: str
    name: str
    pieces: TextPieces = field(default_factory=TextPieces)
    namespace: str | None = None
    custom: bool = False

    def input(self) -> str:
        """A custom tool call's input: what the function's `input` argument holds (else the arguments as they are)."""
        arguments = self.pieces.text()
        try:
            parsed = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
        return parsed["input"] if isinstance(parsed, dict) and isinstance(parsed.get("input"), str) else arguments


_Item = _Message | _Call


def _item_id(response_id: str, item: _Item, index: int) -> str:
    """`msg_…`, `fc_…` or `ctc_…`, the same for the same response id and output position."""
    suffix = response_id.removeprefix("resp_")
    kind = "msg" if isinstance(item, _Message) else "ctc" if item.custom else "fc"
    return f"{kind}_{suffix}_{index}"


def _render(item: _Item, item_id: str, status: str, *, empty: bool = False) -> dict[str, Any]:
    """The output item; `empty` as it is announced, before any of its content."""
    if isinstance(item, _Message):
        content = [] if empty else [part.render() for part in item.parts]
        return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}
    rendered: dict[str, Any] = {"id": item_id, "type": "function_call", "status": status, "call_id": item.call_id,
                                "name": item.name}
    if item.custom:
        rendered.update(type="custom_tool_call", input="" if empty else item.input())
    else:
        rendered["arguments"] = "" if empty else item.pieces.text()
    if item.namespace is not None:
        rendered["namespace"] = item.namespace
    return rendered


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(usage: Any) -> dict[str, Any] | None:
    """Responses usage for chat usage; counts an upstream left out or garbled are 0."""
    if not isinstance(usage, Mapping):
        return None
    prompt = usage.get("prompt_tokens_details")
    prompt = prompt if isinstance(prompt, Mapping) else {}
    completion = usage.get("completion_tokens_details")
    completion = completion if isinstance(completion, Mapping) else {}
    inputs, outputs = _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens"))
    return {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": _tokens(prompt.get("cached_tokens")),
                                 "cache_write_tokens": _tokens(prompt.get("cache_write_tokens"))},
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": _tokens(completion.get("reasoning_tokens"))},
        "total_tokens": _tokens(usage.get("total_tokens")) or inputs + outputs,
    }


def _status(finish_reason: str | None) -> tuple[str, str | None]:
    """(status, incomplete_details.reason) for a chat finish_reason."""
    match finish_reason:
        case "length":
            return "incomplete", "max_output_tokens"
        case "content_filter":
            return "incomplete", "content_filter"
        case _:
            return "completed", None


@dataclass(eq=False)
class _Reply:
    """A response under construction: the request it answers and what the upstream said so far."""

    request: Mapping[str, Any]
    response_id: str
    created_at: int
    model: str
    items: list[_Item] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Any = None
    names: dict[str, ToolName] = field(init=False)

    def __post_init__(self) -> None:
        self.names = tool_names(self.request)

    def name(self, call: _Call) -> None:
        """Give `call` the namespace, name and kind of the tool its chat function name stands for."""
        if (found := self.names.get(call.name)) is not None:
            call.namespace, call.name, call.custom = found.namespace, found.name, found.custom

    def item_id(self, index: int) -> str:
        return _item_id(self.response_id, self.items[index], index)

    def render(self, *, final: bool) -> dict[str, Any]:
        """The response object: in progress and empty, or final with every item and the usage."""
        status, reason = _status(self.finish_reason) if final else ("in_progress", None)
        item_status = "completed" if status == "completed" else "incomplete"
        return {
            **_echo(self.request),
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "incomplete_details": None if reason is None else {"reason": reason},
            "output": [_render(item, self.item_id(n), item_status) for n, item in enumerate(self.items)]
            if final else [],
            "usage": _usage(self.usage) if final else None,
        }


def _model(answer: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    for model in (answer.get("model"), request.get("model")):
        if isinstance(model, str):
            return model
    return ""


def _answer_text(value: Any, at: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedAnswer(f"{at} is {_kind(value)}, not a string")
    return value


def from_chat(
    answer: Any, *, request: Mapping[str, Any], response_id: str, created_at: int
) -> dict[str, Any]:
    """The Responses `response` object for a chat completion; MalformedAnswer if it is not one."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedAnswer("the upstream answer is not a chat completion (no choices)")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedAnswer("choices[0].message is not an object")
    reply = _Reply(request, response_id, created_at, _model(answer, request), usage=answer.get("usage"))
    at = "choices[0].message"
    parts = [_Part(kind, TextPieces(text)) for kind, key in _PART_KEYS
             if (text := _answer_text(message.get(key), f"{at}.{key}"))]
    if parts:
        reply.items.append(_Message(parts))
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise MalformedAnswer(f"{at}.tool_calls is {_kind(calls)}, not an array")
    for number, call in enumerate(calls or []):
        where = f"{at}.tool_calls[{number}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise MalformedAnswer(f"{where}.function is not an object")
        name = _answer_text(function.get("name"), f"{where}.function.name")
        if not name:
            raise MalformedAnswer(f"{where}.function.name is missing")
        call_id = _answer_text(call.get("id"), f"{where}.id") or f"call_{response_id}_{number}"
        arguments = _answer_text(function.get("arguments"), f"{where}.function.arguments") or ""
        reply.items.append(call := _Call(call_id, name, TextPieces(arguments)))
        reply.name(call)
    finish = choices[0].get("finish_reason")
    reply.finish_reason = finish if isinstance(finish, str) else None
    return reply.render(final=True)


class StreamTranslator:
    """Chat completion chunks in, Responses SSE events out: encoded, numbered, in order.

    Items stay open until `finish`, since a chat stream may interleave parallel tool calls and an
    item once done takes no more deltas. A tool call is announced once its name is whole: OpenAI
    sends a name in one piece, but some compatible servers split it over several deltas, so its
    pieces are joined until the call's arguments begin, another call or text comes, or the choice
    finishes.
    """

    def __init__(self, request: Mapping[str, Any], response_id: str, created_at: int) -> None:
        self._reply = _Reply(request, response_id, created_at, _model({}, request))
        self._sequence = 0
        self._started = False
        self._message: int | None = None  # output index of the assistant message
        self._calls: dict[int, _Call] = {}  # by the chunk's tool call index
        self._indexes: dict[int, int] = {}  # tool call index -> output index, once announced

    def feed(self, chunk: Any) -> list[bytes]:
        """The events one chat chunk makes (the stream's first two come with the first chunk).

        After a MalformedAnswer the stream can only end with `error_event`, which then takes the
        next number of what was sent (the events of the failed chunk never were).
        """
        sequence, started = self._sequence, self._started
        try:
            return self._feed(chunk)
        except MalformedAnswer:
            self._sequence, self._started = sequence, started
            raise

    def _feed(self, chunk: Any) -> list[bytes]:
        events = self._start()
        if not isinstance(chunk, dict):
            raise MalformedAnswer(f"a stream chunk is {_kind(chunk)}, not an object")
        if isinstance(chunk.get("model"), str):
            self._reply.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self._reply.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedAnswer(f"a stream chunk's choices is {_kind(choices)}, not an array")
        for choice in choices:
            if not isinstance(choice, dict):
                raise MalformedAnswer("a stream chunk's choice is not an object")
            if choice.get("index", 0) == 0:  # n > 1 is not a Responses notion; the first choice answers
                events += self._choice(choice)
        return events

    def finish(self, usage: Mapping[str, Any] | None = None) -> list[bytes]:
        """The closing events of every item, then `response.completed` (or `.incomplete`)."""
        if unnamed := [index for index, call in self._calls.items() if not call.name]:
            raise MalformedAnswer(f"the stream's tool call {unnamed[0]} never got a function name")
        events = self._start() + self._announce_named()
        if usage is not None:
            self._reply.usage = usage
        reply = self._reply
        final = reply.render(final=True)
        for index, (item, rendered) in enumerate(zip(reply.items, final["output"], strict=True)):
            where = {"item_id": rendered["id"], "output_index": index}
            if isinstance(item, _Message):
                for number, part in enumerate(rendered["content"]):
                    if part["type"] == "refusal":
                        events.append(self._event("response.refusal.done", **where, content_index=number,
                                                   refusal=part["refusal"]))
                    else:
                        events.append(self._event("response.output_text.done", **where, content_index=number,
                                                  text=part["text"], logprobs=[]))
                    events.append(self._event("response.content_part.done", **where, content_index=number,
                                              part=part))
            elif item.custom:  # its input is known whole only now: one delta, then done
                events.append(self._event("response.custom_tool_call_input.delta", **where, delta=rendered["input"]))
                events.append(self._event("response.custom_tool_call_input.done", **where, input=rendered["input"]))
            else:
                events.append(self._event("response.function_call_arguments.done", **where,
                                          name=item.name, arguments=rendered["arguments"]))
            events.append(self._event("response.output_item.done", output_index=index, item=rendered))
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        events.append(self._event(kind, response=final))
        return events

    def error_event(self, message: str, code: str) -> bytes:
        """The in-band `error` event that ends a stream which failed after its first event."""
        return self._event("error", code=code, message=message, param=None)

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        try:
            data = orjson.dumps(payload)
        except TypeError as exc:  # text that is not UTF-8 (lone surrogates)
            raise MalformedAnswer(f"a {kind} event cannot be encoded: {exc}") from None
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def _start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        response = self._reply.render(final=False)
        return [self._event("response.created", response=response),
                self._event("response.in_progress", response=response)]

    def _choice(self, choice: dict[str, Any]) -> list[bytes]:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise MalformedAnswer("a stream chunk's delta is not an object")
        events: list[bytes] = []
        for kind, key in _PART_KEYS:
            if text := _answer_text(delta.get(key), f"delta.{key}"):
                events += self._announce_named() + self._text(kind, text)
        calls = delta.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MalformedAnswer("a stream chunk's delta.tool_calls is not an array")
        for position, call in enumerate(calls):
            events += self._call(call, position)
        if isinstance(finish := choice.get("finish_reason"), str):
            self._reply.finish_reason = finish
            events += self._announce_named()
        return events

    def _text(self, kind: _PartKind, text: str) -> list[bytes]:
        events: list[bytes] = []
        items = self._reply.items
        if self._message is None:
            self._message = len(items)
            items.append(_Message())
            events.append(self._added(self._message))
        message = items[self._message]
        assert isinstance(message, _Message)
        where = {"item_id": self._reply.item_id(self._message), "output_index": self._message}
        part = next((part for part in message.parts if part.kind == kind), None)
        if part is None:
            part = _Part(kind)
            message.parts.append(part)
            events.append(self._event("response.content_part.added", **where,
                                      content_index=len(message.parts) - 1, part=part.render("")))
        part.pieces.add(text)
        number = message.parts.index(part)
        if kind == "refusal":
            events.append(self._event("response.refusal.delta", **where, content_index=number, delta=text))
        else:
            events.append(self._event("response.output_text.delta", **where, content_index=number,
                                      delta=text, logprobs=[]))
        return events

    def _call(self, delta: Any, position: int) -> list[bytes]:
        if not isinstance(delta, dict):
            raise MalformedAnswer("a stream chunk's tool call is not an object")
        index = delta.get("index", position)
        function = delta.get("function") or {}
        if isinstance(index, bool) or not isinstance(index, int) or not isinstance(function, dict):
            raise MalformedAnswer("a stream chunk's tool call has no integer index or no function object")
        call_id = _answer_text(delta.get("id"), "tool_calls[].id")
        name = _answer_text(function.get("name"), "tool_calls[].function.name")
        arguments = _answer_text(function.get("arguments"), "tool_calls[].function.arguments")
        events = self._announce_named(besides=index)  # another call's piece: their names are whole
        call = self._calls.setdefault(index, _Call("", ""))
        output_index = self._indexes.get(index)
        if output_index is None:  # once announced, its id and name are what the client has
            call.call_id, call.name = call.call_id or call_id or "", call.name + (name or "")
        if arguments:
            call.pieces.add(arguments)
            if output_index is None:
                events += self._announce_named()  # its arguments began: its name is whole
            elif not call.custom:
                events.append(self._event("response.function_call_arguments.delta", output_index=output_index,
                                          item_id=self._reply.item_id(output_index), delta=arguments))
        return events

    def _announce_named(self, *, besides: int | None = None) -> list[bytes]:
        """Announce every named call not yet announced (but call `besides`), with the arguments it already has."""
        events: list[bytes] = []
        for index, call in self._calls.items():
            if index == besides or index in self._indexes or not call.name:
                continue
            output_index = self._indexes[index] = len(self._reply.items)
            call.call_id = call.call_id or f"call_{self._reply.response_id}_{index}"
            self._reply.name(call)
            self._reply.items.append(call)
            events.append(self._added(output_index))
            if (arguments := call.pieces.text()) and not call.custom:
                events.append(self._event("response.function_call_arguments.delta", output_index=output_index,
                                          item_id=self._reply.item_id(output_index), delta=arguments))
        return events

    def _added(self, index: int) -> bytes:
        item = _render(self._reply.items[index], self._reply.item_id(index), "in_progress", empty=True)
        return self._event("response.output_item.added", output_index=index, item=item)
