"""Anthropic's Messages API onto OpenAI Chat Completions and back: requests, answers, streams, errors.

Pure functions and one stream state machine, no I/O. Chat Completions messages are the canonical
form (what memory stores), so `to_chat(body)["messages"]` is a turn's canonical form and
`messages_from_chat` turns stored history back into Anthropic messages.

What an OpenAI-compatible upstream cannot be told, and so is dropped or approximated:
- `thinking` / `redacted_thinking` blocks of earlier assistant turns are dropped (an OpenAI
  upstream can neither read nor verify them), as are the `thinking` option, `output_config.effort`,
  `cache_control`, citations, `service_tier` and any other option not listed in `to_chat`.
- Several `system` text blocks become one system message, joined with newlines; an assistant
  turn's text blocks become one string (Anthropic splits one text into blocks at citations).
  A message of role `system` among the messages (Claude Code sends its environment so) is a
  system message at that place.
- Claude Code's `x-anthropic-billing-header:` system block is left out: it is for Anthropic's
  billing, and it would keep a chat upstream from caching the prompt's prefix across sessions.
- `metadata.user_id` becomes `user` when it fits OpenAI's 64 characters, and is left out when
  longer (Claude Code's is a JSON object of ids, about 150 characters).
- A tool with `defer_loading` is left out until a `tool_reference` block (in a tool_result: a
  tool search's answer, Claude Code's ToolSearch) loads it, as Anthropic keeps it from the model
  till then; the reference becomes the tool's definition as text, `<functions><function>{...}`
  `</function></functions>`, as Anthropic expands it.
- What is left out is told to the log (`dropped.DROPS`), once per field at INFO.
- A `tool_result` becomes a `tool` message with its text joined by newlines and `is_error` as an
  `Error: ` prefix; images and documents in it move to a user message right after the tool
  messages, as a tool message cannot carry them.
- Documents: a base64 PDF becomes a `file` part, plain-text and content sources become text;
  URL and Files API sources are refused, as are `file` image sources.
- Anthropic's server tools that only add to what the model may do (`web_search_*`,
  `web_fetch_*`, `code_execution_*`: Claude Code's WebSearch offers one in a request of its
  own) are left out, and the model answers without them, as the Responses translation does
  with `web_search`; a `tool_choice` that forces one is refused. Other typed tools (Anthropic's
  client tools: bash, text editor, computer, memory) are refused: the model would not know them.
- Answers: reasoning an upstream returns (`reasoning_content`) is not turned into thinking
  blocks (they need Anthropic's signature). Tool-call arguments that are not a JSON object come
  back as `{"_raw": "<the arguments>"}` (a stream passes them on as they are). `stop_sequence`
  is known only from upstreams that name the matched stop (vLLM's `stop_reason`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

from gateway.core.nesting import too_deep
from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.dropped import DROPS

JSON = dict[str, Any]

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
# Claude Code's first system block: a header for Anthropic's billing, not for the model. It changes
# between sessions, so a chat upstream that kept it would cache no prompt prefix across them.
_BILLING_HEADER = "x-anthropic-billing-header:"
_USER_BLOCKS = "text, image, document, tool_result"
_ASSISTANT_BLOCKS = "text, tool_use, thinking, redacted_thinking"
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_MAX_COUNT = 2**53  # token counts past this are not counts; they would not survive JSON either

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


# Anthropic request -> OpenAI chat payload


def to_chat(body: Any) -> JSON:
    """The Chat Completions payload for an Anthropic Messages request; TranslationError when malformed."""
    request = _object(body, "")
    model = _string(_required(request, "model", ""), "model")
    max_tokens = _required(request, "max_tokens", "")
    if not _is_int(max_tokens) or max_tokens < 1:
        raise _invalid("max_tokens", "must be an integer >= 1", max_tokens)
    sent = _required(request, "messages", "")
    tools = _tools_to_chat(request.get("tools"), "tools", loaded=_referenced(sent))
    messages = _system_to_chat(request.get("system"))
    messages += _messages_to_chat(sent, "messages", {tool["function"]["name"]: tool["function"] for tool in tools})
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
    if (stop := _strings(request.get("stop_sequences"), "stop_sequences")):
        payload["stop"] = stop
    for name in ("temperature", "top_p"):
        if (value := request.get(name)) is not None:
            payload[name] = _number(value, name)
    if (top_k := request.get("top_k")) is not None:
        if not _is_int(top_k) or top_k < 0:
            raise _invalid("top_k", "must be an integer >= 0", top_k)
        payload["top_k"] = top_k
    if (user := _metadata_user(request.get("metadata"))) is not None and len(user) <= _MAX_USER:
        payload["user"] = user
    if (response_format := _output_format(request.get("output_config"))) is not None:
        payload["response_format"] = response_format
    if (stream := request.get("stream")) is not None:
        payload["stream"] = _boolean(stream, "stream")
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
    system = list(_listed(request.get("system")))  # copies: the request's own lists stay as they are
    blocks = list(_listed(request.get("tools")))
    for message in _listed(request.get("messages")):
        if isinstance(message, dict):
            (system if message.get("role") == "system" else blocks).extend(_listed(message.get("content")))
    if any(isinstance(block, dict) and str(block.get("text")).startswith(_BILLING_HEADER) for block in system):
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
    return {str(tool.get("name")): tool["type"] for tool in _listed(tools)
            if isinstance(tool, dict) and isinstance(tool.get("type"), str) and _OFFERED_ONLY.fullmatch(tool["type"])}


def _loaded(tool: JSON, loaded: set[str]) -> bool:
    """Whether `tool` is one a tool_reference loaded (`loaded`: their names)."""
    name = tool.get("name")
    return isinstance(name, str) and name in loaded


def _referenced(messages: Any) -> set[str]:
    """The names of the tools the tool_reference blocks of `messages` load (a tool search's results)."""
    names: set[str] = set()
    for message in _listed(messages):
        for block in _listed(message.get("content")) if isinstance(message, dict) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                names |= {inner["tool_name"] for inner in _listed(block.get("content"))
                          if isinstance(inner, dict) and inner.get("type") == "tool_reference"
                          and isinstance(inner.get("tool_name"), str)}
    return names


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _system_to_chat(system: Any, path: str = "system") -> list[JSON]:
    """The system message of a `system` prompt (or a system message's content): its text blocks joined."""
    if system is None:
        return []
    if isinstance(system, str):
        text = system
    else:
        texts = (_text_of(block, _item(path, i)) for i, block in enumerate(_array(system, path)))
        text = "\n".join(text for text in texts if not text.startswith(_BILLING_HEADER))
    return [{"role": "system", "content": text}] if text else []


def _text_of(value: Any, path: str) -> str:
    """The text of a block that must be a text block."""
    block = _object(value, path)
    if block.get("type") != "text":
        raise _invalid(_at(path, "type"), "must be 'text'", block.get("type"))
    return _string(_required(block, "text", path), _at(path, "text"))


def _messages_to_chat(value: Any, path: str, tools: Mapping[str, JSON]) -> list[JSON]:
    """The chat messages of the request's messages; `tools`: its chat functions by name, for tool_reference blocks."""
    items = _array(value, path)
    if not items:
        raise TranslationError(f"{path}: must hold at least one message", path)
    out: list[JSON] = []
    for i, item in enumerate(items):
        out += _message_to_chat(item, _item(path, i), tools, last=i == len(items) - 1)
    return out


def _message_to_chat(value: Any, path: str, tools: Mapping[str, JSON], *, last: bool) -> list[JSON]:
    message = _object(value, path)
    role = message.get("role")
    if role == "system":  # instructions between turns (Claude Code's environment, reminders): chat has them too
        return _system_to_chat(_required(message, "content", path), _at(path, "content"))
    if role != "user" and role != "assistant":
        raise _invalid(_at(path, "role"), "must be 'user', 'assistant' or 'system'", role)
    content_path = _at(path, "content")
    content = _required(message, "content", path)
    if not isinstance(content, str):
        content = _array(content, content_path)
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
        block_path = _item(path, i)
        block = _object(value, block_path)
        if block.get("type") == "tool_result":
            result, attachments = _tool_result_to_chat(block, block_path, tools)
            results.append(result)
            moved += attachments
        else:
            parts += _parts_to_chat(block, block_path, allowed=_USER_BLOCKS)
    if moved or parts:
        results.append({"role": "user", "content": moved + parts})
    return results


def _parts_to_chat(block: JSON, path: str, *, allowed: str) -> list[JSON]:
    """The OpenAI content parts of a text, image or document block."""
    match block.get("type"):
        case "text":
            return [{"type": "text", "text": _string(_required(block, "text", path), _at(path, "text"))}]
        case "image":
            return [_image_to_chat(_object(_required(block, "source", path), _at(path, "source")), _at(path, "source"))]
        case "document":
            return _document_to_chat(block, path)
        case other:
            raise _invalid(_at(path, "type"), f"must be one of {allowed}", other)


def _image_to_chat(source: JSON, path: str) -> JSON:
    match source.get("type"):
        case "base64":
            url = _data_url(source, path)
        case "url":
            url = _string(_required(source, "url", path), _at(path, "url"))
        case other:
            raise _invalid(_at(path, "type"), "must be 'base64' or 'url' for a non-Anthropic target", other)
    return {"type": "image_url", "image_url": {"url": url}}


def _document_to_chat(block: JSON, path: str) -> list[JSON]:
    source_path = _at(path, "source")
    source = _object(_required(block, "source", path), source_path)
    title = block.get("title")
    title = _string(title, _at(path, "title")) if title is not None else None
    match source.get("type"):
        case "base64":
            file = {"filename": title or "document.pdf", "file_data": _data_url(source, source_path)}
            return [{"type": "file", "file": file}]
        case "text":
            text = _string(_required(source, "data", source_path), _at(source_path, "data"))
            return [{"type": "text", "text": f"{title}\n\n{text}" if title else text}]
        case "content":
            content_path = _at(source_path, "content")
            content = _required(source, "content", source_path)
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            parts: list[JSON] = []
            for i, value in enumerate(_array(content, content_path)):
                inner_path = _item(content_path, i)
                inner = _object(value, inner_path)
                if inner.get("type") == "document":  # documents do not nest
                    raise _invalid(_at(inner_path, "type"), "must be one of text, image", "document")
                parts += _parts_to_chat(inner, inner_path, allowed="text, image")
            return parts
        case other:
            raise _invalid(_at(source_path, "type"), "must be 'base64', 'text' or 'content' for a non-Anthropic target", other)


def _data_url(source: JSON, path: str) -> str:
    media_type = _string(_required(source, "media_type", path), _at(path, "media_type"))
    data = _string(_required(source, "data", path), _at(path, "data"))
    return f"data:{media_type};base64,{data}"


def _tool_result_to_chat(block: JSON, path: str, tools: Mapping[str, JSON]) -> tuple[JSON, list[JSON]]:
    """The `tool` message of a tool_result, and the images or files it carried (for a user message).

    A tool_reference block (a tool search's result) is the definition of the tool it loads, as text.
    """
    call_id = _string(_required(block, "tool_use_id", path), _at(path, "tool_use_id"))
    content = block.get("content")
    texts: list[str] = []
    attachments: list[JSON] = []
    if isinstance(content, str):
        texts.append(content)
    elif content is not None:
        content_path = _at(path, "content")
        for i, value in enumerate(_array(content, content_path)):
            inner_path = _item(content_path, i)
            if _object(value, inner_path).get("type") == "tool_reference":
                texts.append(_tool_reference(value, inner_path, tools))
                continue
            for part in _parts_to_chat(value, inner_path, allowed="text, image, document, tool_reference"):
                if part["type"] == "text":
                    texts.append(part["text"])
                else:
                    attachments.append(part)
    is_error = block.get("is_error")
    text = "\n".join(texts)
    if is_error is not None and _boolean(is_error, _at(path, "is_error")):
        text = f"Error: {text}" if text else "Error"
    if attachments:
        attachments.insert(0, {"type": "text", "text": f"Attachments of tool result {call_id}:"})
    return {"role": "tool", "tool_call_id": call_id, "content": text}, attachments


def _tool_reference(block: JSON, path: str, tools: Mapping[str, JSON]) -> str:
    """A loaded tool's definition as Anthropic shows it to the model: `<functions><function>{...}</function></functions>`."""
    name = _string(_required(block, "tool_name", path), _at(path, "tool_name"))
    definition = tools.get(name, {"name": name})
    return f"<functions><function>{orjson.dumps(definition).decode()}</function></functions>"


def _assistant_to_chat(blocks: list[Any], path: str) -> JSON:
    texts: list[str] = []
    calls: list[JSON] = []
    for i, value in enumerate(blocks):
        block_path = _item(path, i)
        block = _object(value, block_path)
        match block.get("type"):
            case "text":
                texts.append(_string(_required(block, "text", block_path), _at(block_path, "text")))
            case "tool_use":
                calls.append(_tool_use_to_chat(block, block_path))
            case "thinking" | "redacted_thinking":
                pass  # an OpenAI upstream can neither read nor verify Anthropic's signed reasoning
            case other:
                raise _invalid(_at(block_path, "type"), f"must be one of {_ASSISTANT_BLOCKS}", other)
    message: JSON = {"role": "assistant"}
    if texts or not calls:  # as stored replies are: no content key beside tool calls without text
        message["content"] = "".join(texts)
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_use_to_chat(block: JSON, path: str) -> JSON:
    call_id = _string(_required(block, "id", path), _at(path, "id"))
    name = _string(_required(block, "name", path), _at(path, "name"))
    arguments = _object(_required(block, "input", path), _at(path, "input"))
    try:
        encoded = orjson.dumps(arguments).decode()
    except orjson.JSONEncodeError:  # integers past 64 bits, nesting past orjson's limit, lone surrogates
        raise TranslationError(f"{path}.input: cannot be encoded as JSON", _at(path, "input")) from None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


def _tools_to_chat(value: Any, path: str, *, loaded: set[str]) -> list[JSON]:
    """Chat functions for the request's tools; one whose loading is deferred only once a tool_reference loaded it."""
    if value is None:
        return []
    tools: list[JSON] = []
    for i, item in enumerate(_array(value, path)):
        tool_path = _item(path, i)
        tool = _object(item, tool_path)
        if tool.get("defer_loading") is True and not _loaded(tool, loaded):  # hidden from the model till then
            continue
        kind = tool.get("type")
        if isinstance(kind, str) and _OFFERED_ONLY.fullmatch(kind):
            continue  # an offer the model can do without: it answers from what it knows
        if kind is not None and kind != "custom":
            raise _invalid(_at(tool_path, "type"), "must be 'custom' (or a server tool the model can do without, "
                           "as web_search_20250305): Anthropic's other typed tools need an Anthropic target", kind)
        function: JSON = {
            "name": _string(_required(tool, "name", tool_path), _at(tool_path, "name")),
            "parameters": _object(_required(tool, "input_schema", tool_path), _at(tool_path, "input_schema")),
        }
        if (description := tool.get("description")) is not None:
            function["description"] = _string(description, _at(tool_path, "description"))
        if (strict := tool.get("strict")) is not None:
            function["strict"] = _boolean(strict, _at(tool_path, "strict"))
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice_to_chat(value: Any, path: str) -> tuple[Any, bool | None]:
    """(OpenAI's tool_choice, parallel_tool_calls), each None when the request leaves it to the default."""
    if value is None:
        return None, None
    choice = _object(value, path)
    chosen: Any
    match choice.get("type"):
        case "auto":
            chosen = "auto"
        case "any":
            chosen = "required"
        case "none":
            chosen = "none"
        case "tool":
            chosen = {"type": "function", "function": {"name": _string(_required(choice, "name", path), _at(path, "name"))}}
        case other:
            raise _invalid(_at(path, "type"), "must be one of auto, any, tool, none", other)
    disable = choice.get("disable_parallel_tool_use")
    if disable is None:
        return chosen, None
    return chosen, False if _boolean(disable, _at(path, "disable_parallel_tool_use")) else None


def _metadata_user(value: Any) -> str | None:
    if value is None:
        return None
    user = _object(value, "metadata").get("user_id")
    return None if user is None else _string(user, "metadata.user_id")


def _output_format(value: Any) -> JSON | None:
    """OpenAI's response_format for `output_config.format` (a JSON schema), without strict mode."""
    if value is None:
        return None
    output_format = _object(value, "output_config").get("format")
    if output_format is None:
        return None
    path = "output_config.format"
    output_format = _object(output_format, path)
    if output_format.get("type") != "json_schema":
        raise _invalid(_at(path, "type"), "must be 'json_schema'", output_format.get("type"))
    schema = _object(_required(output_format, "schema", path), _at(path, "schema"))
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


# OpenAI chat completion -> Anthropic message


def from_chat(answer: Any, *, model: str, message_id: str | None = None) -> JSON:
    """The Anthropic `message` for a chat completion's choice 0; MalformedAnswer names what is wrong with it.

    The id is `message_id`, else `msg_` + the completion's id.
    """
    try:
        return _message_from_chat(answer, model=model, message_id=message_id)
    except TranslationError as exc:  # the shape checks speak of requests; here the upstream is at fault
        raise MalformedAnswer(f"the upstream's answer: {exc.message}") from None


def _message_from_chat(answer: Any, *, model: str, message_id: str | None) -> JSON:
    completion = _object(answer, "")
    choices = _array(_required(completion, "choices", ""), "choices")
    if not choices:
        raise TranslationError("choices: the answer has no choices", "choices")
    choice = _object(choices[0], "choices[0]")
    message = _object(_required(choice, "message", "choices[0]"), "choices[0].message")
    identity = message_id or message_id_of(completion.get("id"))
    content, refused = _reply_blocks(message, "choices[0].message", identity)
    stop_reason, stop_sequence = _stop_reason(
        choice.get("finish_reason"), choice.get("stop_reason"),
        tool_use=any(block["type"] == "tool_use" for block in content), refused=refused,
    )
    return {
        "id": identity,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage_from_chat(completion.get("usage")),
    }


def message_id_of(completion_id: Any) -> str:
    """An Anthropic message id for an OpenAI completion id (`msg_` + it)."""
    if isinstance(completion_id, str) and completion_id:
        return completion_id if completion_id.startswith("msg_") else f"msg_{completion_id}"
    return "msg_gateway"


def _reply_blocks(message: JSON, path: str, message_id: str) -> tuple[list[JSON], bool]:
    """(the content blocks of an OpenAI assistant message, whether it was a refusal)."""
    blocks: list[JSON] = []
    content = message.get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):  # some upstreams answer with parts
        texts = [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    elif content is None:
        texts = []
    else:
        raise _invalid(_at(path, "content"), "must be a string, a list of parts or null", content)
    refusal = message.get("refusal")
    refused = isinstance(refusal, str) and bool(refusal)
    if isinstance(refusal, str):
        texts.append(refusal)
    blocks += [{"type": "text", "text": text} for text in texts if text]
    calls = message.get("tool_calls")
    if calls is not None:
        for i, value in enumerate(_array(calls, _at(path, "tool_calls"))):
            call_path = _item(_at(path, "tool_calls"), i)
            call = _object(value, call_path)
            function = _object(_required(call, "function", call_path), _at(call_path, "function"))
            call_id = call.get("id")
            blocks.append(_tool_use(call_id if isinstance(call_id, str) and call_id else f"toolu_{message_id}_{i}",
                                    function, _at(call_path, "function")))
    legacy = message.get("function_call")
    if legacy is not None and calls is None:
        blocks.append(_tool_use(f"toolu_{message_id}_0", _object(legacy, _at(path, "function_call")), _at(path, "function_call")))
    return blocks, refused


def _tool_use(call_id: str, function: JSON, path: str) -> JSON:
    name = _string(_required(function, "name", path), _at(path, "name"))
    return {"type": "tool_use", "id": call_id, "name": name, "input": _tool_input(function.get("arguments"))}


def _tool_input(arguments: Any) -> JSON:
    """A tool_use `input` from OpenAI's arguments: the JSON object, `{}` when empty, else `{"_raw": arguments}`."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        return {} if arguments is None else {"_raw": arguments}
    if not arguments.strip():
        return {}
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw": arguments}
    # the input is written again in the Anthropic body: orjson may write past its buffer on deep nesting
    return parsed if isinstance(parsed, dict) and not too_deep(arguments, parsed) else {"_raw": arguments}


def _stop_reason(finish_reason: Any, matched: Any, *, tool_use: bool, refused: bool) -> tuple[str, str | None]:
    """Anthropic's (stop_reason, stop_sequence) for an OpenAI finish_reason.

    `matched` is the stop string vLLM names in `stop_reason`; upstreams that stop with tool calls
    but say `stop` are reported as `tool_use`, which is what agent loops wait for.
    """
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason == "tool_calls" or finish_reason == "function_call" or (tool_use and finish_reason != "content_filter"):
        return "tool_use", None
    if finish_reason == "content_filter" or refused:
        return "refusal", None
    if finish_reason == "stop" and isinstance(matched, str):
        return "stop_sequence", matched
    return "end_turn", None


def usage_from_chat(value: Any) -> JSON:
    """Anthropic usage for OpenAI usage: cached prompt tokens are cache reads, not input tokens."""
    usage = value if isinstance(value, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    prompt = _count(usage.get("prompt_tokens")) or 0
    out: JSON = {"input_tokens": max(prompt - (cached or 0), 0), "output_tokens": _count(usage.get("completion_tokens")) or 0}
    if cached is not None:
        out["cache_read_input_tokens"] = cached
    return out


def _count(value: Any) -> int | None:
    return value if _is_int(value) and 0 <= value < _MAX_COUNT else None


# OpenAI stream chunks -> Anthropic SSE events


@dataclass(slots=True)
class _ToolCall:
    """One streamed tool call: its block index once started (it starts when its name is whole)."""

    id: str | None = None
    name: str = ""
    block: int | None = None
    pending: list[str] = field(default_factory=list)


class StreamTranslator:
    """Turns OpenAI chat completion chunks into Anthropic SSE events, already encoded.

    `feed` each parsed chunk, then `finish` once the upstream's stream ended well. One content
    block is open at a time: text, or a tool call (a new block per tool call index). A tool call's
    argument pieces that arrive after another block opened (interleaved calls) are sent to its
    own, already stopped, block; the SDK's accumulator takes them, by index. A tool call's block
    starts once its name is whole: OpenAI sends a name in one piece, but some compatible servers
    split it over several deltas, so its pieces are joined until the call's arguments begin,
    another call or text comes, or the choice finishes.
    """

    def __init__(self, model: str, message_id: str) -> None:
        self._model = model
        self._message_id = message_id
        self._started = False
        self._finished = False
        self._blocks = 0
        self._open: int | None = None
        self._open_text = False
        self._calls: dict[int, _ToolCall] = {}
        self._finish_reason: str | None = None
        self._matched: str | None = None
        self._refused = False
        self._usage: JSON | None = None

    def feed(self, chunk: Any) -> list[bytes]:
        """The events one chunk makes; a usage-only chunk (no choices) only records usage."""
        if self._finished:
            return []
        events = self._start()
        if not isinstance(chunk, dict):
            return events
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                events += self._delta(delta)
            if isinstance(reason := choice.get("finish_reason"), str):
                self._finish_reason = reason
                events += self._start_named()
            if isinstance(matched := choice.get("stop_reason"), str):
                self._matched = matched
        return events

    def finish(self, usage: JSON | None = None) -> list[bytes]:
        """The closing events; `usage` (OpenAI's shape) overrides the usage the chunks carried."""
        if self._finished:
            return []
        events = self._start()
        for index, call in self._calls.items():  # a call whose name never came is still a call
            if call.block is None:
                events += self._start_call(index, call)
        events += self._close()
        self._finished = True
        stop_reason, stop_sequence = _stop_reason(
            self._finish_reason, self._matched, tool_use=bool(self._calls), refused=self._refused
        )
        reported = usage if isinstance(usage, dict) else self._usage
        counts = usage_from_chat(reported)
        delta_usage = counts if reported is not None else {"output_tokens": 0}
        events.append(_event({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": delta_usage,
        }))
        events.append(_event({"type": "message_stop"}))
        return events

    def _start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        message: JSON = {
            "id": self._message_id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},  # OpenAI streams count at the end
        }
        return [_event({"type": "message_start", "message": message})]

    def _delta(self, delta: JSON) -> list[bytes]:
        events: list[bytes] = []
        content = delta.get("content")
        if isinstance(content, str) and content:
            events += self._start_named() + self._text(content)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refused = True
            events += self._start_named() + self._text(refusal)
        fragments = delta.get("tool_calls")
        if isinstance(fragments, list):
            for fragment in fragments:
                if isinstance(fragment, dict):
                    events += self._tool_fragment(fragment)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            events += self._tool_fragment({"index": 0, "function": legacy})
        return events

    def _text(self, text: str) -> list[bytes]:
        events: list[bytes] = []
        if not self._open_text:
            events += self._close()
            events.append(self._open_block({"type": "text", "text": ""}))
            self._open_text = True
        events.append(_event({"type": "content_block_delta", "index": self._open,
                              "delta": {"type": "text_delta", "text": text}}))
        return events

    def _tool_fragment(self, fragment: JSON) -> list[bytes]:
        given = fragment.get("index")
        index = given if _is_int(given) else 0
        events = self._start_named(besides=index)  # another call's piece: their names are whole
        call = self._calls.setdefault(index, _ToolCall())
        if call.id is None and isinstance(fragment.get("id"), str) and fragment["id"]:
            call.id = fragment["id"]
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        if call.block is None:
            if isinstance(name := function.get("name"), str):
                call.name += name
            if isinstance(piece := function.get("arguments"), str) and piece:
                call.pending.append(piece)
                events += self._start_named()  # its arguments began: its name is whole
        elif isinstance(piece := function.get("arguments"), str) and piece:
            events.append(_json_delta(call.block, piece))
        return events

    def _start_named(self, *, besides: int | None = None) -> list[bytes]:
        """Start the block of every named call not yet started (but call `besides`)."""
        events: list[bytes] = []
        for index, call in self._calls.items():
            if index != besides and call.block is None and call.name:
                events += self._start_call(index, call)
        return events

    def _start_call(self, index: int, call: _ToolCall) -> list[bytes]:
        events = self._close()
        call_id = call.id or f"toolu_{self._message_id}_{index}"
        events.append(self._open_block({"type": "tool_use", "id": call_id, "name": call.name, "input": {}}))
        call.block = self._open
        if call.pending:
            events.append(_json_delta(call.block, "".join(call.pending)))
            call.pending.clear()
        return events

    def _open_block(self, block: JSON) -> bytes:
        self._open = self._blocks
        self._blocks += 1
        return _event({"type": "content_block_start", "index": self._open, "content_block": block})

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open, self._open_text = self._open, None, False
        return [_event({"type": "content_block_stop", "index": index})]


def _json_delta(index: int | None, piece: str) -> bytes:
    return _event({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})


def error_event(message: str, kind: str) -> bytes:
    """Anthropic's in-band stream error: `event: error` with `{"type": "error", "error": {...}}`."""
    return _event({"type": "error", "error": {"type": kind, "message": message}})


def _event(payload: JSON) -> bytes:
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + _dumps(payload) + b"\n\n"


def _dumps(payload: JSON) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:  # a lone surrogate from a non-JSON source (a provider library): not UTF-8
        return orjson.dumps(_scrub(payload))


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode(errors="replace").decode()
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


# Errors


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def status_of(kind: Any) -> int:
    """The HTTP status an Anthropic error type stands for (an unknown one: 502)."""
    return _STATUSES.get(kind, 502) if isinstance(kind, str) else 502


_STATUSES = {kind: status for status, kind in _ERROR_TYPES.items()} | {"api_error": 500}


def error_body(status: int, message: str) -> JSON:
    """Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`."""
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


# OpenAI chat messages (canonical, stored) -> Anthropic messages


def messages_from_chat(messages: Any) -> list[JSON]:
    """Anthropic messages for OpenAI chat messages; system and developer messages are left out (they go in `system`).

    Consecutive `tool` messages become one user message of tool_result blocks, so that
    `to_chat(...)["messages"]` gives the chat messages back (tool-call arguments respelled).
    """
    out: list[JSON] = []
    results: list[JSON] | None = None  # the tool_result blocks of the user message being built
    for i, value in enumerate(_array(messages, "messages")):
        path = _item("messages", i)
        message = _object(value, path)
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
                out.append({"role": "user", "content": _user_from_chat(_required(message, "content", path), _at(path, "content"))})
            case "assistant":
                out.append(_assistant_from_chat(message, path))
            case other:
                raise _invalid(_at(path, "role"), "must be one of system, developer, user, assistant, tool", other)
    return out


def _user_from_chat(content: Any, path: str) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    blocks: list[JSON] = []
    for i, value in enumerate(_array(content, path)):
        part_path = _item(path, i)
        part = _object(value, part_path)
        match part.get("type"):
            case "text":
                blocks.append({"type": "text", "text": _string(_required(part, "text", part_path), _at(part_path, "text"))})
            case "image_url":
                image = _object(_required(part, "image_url", part_path), _at(part_path, "image_url"))
                url = _string(_required(image, "url", _at(part_path, "image_url")), _at(part_path, "image_url.url"))
                blocks.append({"type": "image", "source": _source_from_url(url)})
            case "file":
                blocks.append(_document_from_chat(part, part_path))
            case other:
                raise _invalid(_at(part_path, "type"), "must be one of text, image_url, file", other)
    return blocks


def _source_from_url(url: str) -> JSON:
    if (match := _DATA_URL.fullmatch(url)) is not None:
        return {"type": "base64", "media_type": match[1], "data": match[2]}
    return {"type": "url", "url": url}


def _document_from_chat(part: JSON, path: str) -> JSON:
    file_path = _at(path, "file")
    file = _object(_required(part, "file", path), file_path)
    data = file.get("file_data")
    match = _DATA_URL.fullmatch(data) if isinstance(data, str) else None
    if match is None:
        raise TranslationError(f"{file_path}.file_data: must be a base64 data URL (file ids cannot be translated)",
                               _at(file_path, "file_data"))
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
        raise _invalid(_at(path, "content"), "must be a string, a list of parts or null", content)
    calls = message.get("tool_calls")
    if not calls:
        return {"role": "assistant", "content": text}
    blocks: list[JSON] = [{"type": "text", "text": text}] if text else []
    for i, value in enumerate(_array(calls, _at(path, "tool_calls"))):
        call_path = _item(_at(path, "tool_calls"), i)
        call = _object(value, call_path)
        call_id = _string(_required(call, "id", call_path), _at(call_path, "id"))
        function = _object(_required(call, "function", call_path), _at(call_path, "function"))
        blocks.append(_tool_use(call_id, function, _at(call_path, "function")))
    return {"role": "assistant", "content": blocks}


def _part_text(part: Any) -> str:
    """The text of a text or refusal part; "" for anything else."""
    if not isinstance(part, dict):
        return ""
    text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
    return text if isinstance(text, str) else ""


def _tool_result_from_chat(message: JSON, path: str) -> JSON:
    call_id = _string(_required(message, "tool_call_id", path), _at(path, "tool_call_id"))
    content = message.get("content")
    block: JSON = {"type": "tool_result", "tool_use_id": call_id}
    if isinstance(content, str):
        block["content"] = content
    elif isinstance(content, list):
        block["content"] = [{"type": "text", "text": _part_text(part)} for part in content if _part_text(part)]
    elif content is not None:
        raise _invalid(_at(path, "content"), "must be a string or a list of text parts", content)
    return block


# Shape checks: every failure is a TranslationError naming the dotted path


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _item(path: str, index: int) -> str:
    return f"{path}[{index}]"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _invalid(path: str, expected: str, got: Any) -> TranslationError:
    return TranslationError(f"{path}: {expected}, got {_describe(got)}", path or None)


def _required(container: JSON, key: str, path: str) -> Any:
    if key not in container:
        where = _at(path, key)
        raise TranslationError(f"{where}: required", where)
    return container[key]


def _object(value: Any, path: str) -> JSON:
    """`value` when it is an object; `path` "" is the whole body."""
    if isinstance(value, dict):
        return value
    if not path:
        raise TranslationError(f"the body must be a JSON object, got {_describe(value)}")
    raise _invalid(path, "must be an object", value)


def _array(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid(path, "must be a list", value)
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _invalid(path, "must be a string", value)
    return value


def _strings(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    return [_string(item, _item(path, i)) for i, item in enumerate(_array(value, path))]


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(path, "must be a boolean", value)
    return value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any, path: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not math.isfinite(value)):
        raise _invalid(path, "must be a finite number", value)
    return value
