"""A chat completion as an Anthropic `message`: its content blocks, stop reason and usage."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import orjson

from gateway.core.json_shape import index_path, is_int, key_path
from gateway.core.nesting import too_deep
from gateway.core.translate import MalformedAnswer, TranslationError
from gateway.core.translate.messages.checks import (
    CHECK,
    JSON,
    as_list,
    as_object,
    as_string,
    body_object,
    required,
)

_MAX_COUNT = 2**53  # token counts past this are not counts; they would not survive JSON either


class StopReason(StrEnum):
    """Why an Anthropic message ended (its `stop_reason`)."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"
    REFUSAL = "refusal"


def from_chat(answer: Any, *, model: str, message_id: str | None = None) -> JSON:
    """The Anthropic `message` for a chat completion's choice 0; MalformedAnswer names what is wrong with it.

    The id is `message_id`, else `msg_` + the completion's id.
    """
    try:
        return _message_from_chat(answer, model=model, message_id=message_id)
    except TranslationError as exc:  # the shape checks speak of requests; here the upstream is at fault
        raise MalformedAnswer(f"the upstream's answer: {exc.message}") from None


def _message_from_chat(answer: Any, *, model: str, message_id: str | None) -> JSON:
    completion = body_object(answer)
    choices = as_list(required(completion, "choices", ""), "choices")
    if not choices:
        raise TranslationError("choices: the answer has no choices", "choices")
    choice = as_object(choices[0], "choices[0]")
    message = as_object(required(choice, "message", "choices[0]"), "choices[0].message")
    identity = message_id or message_id_of(completion.get("id"))
    content, refused = _reply_blocks(message, "choices[0].message", identity)
    stop_reason, stop_sequence = stop_reason_of(
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
        raise CHECK.fail(key_path(path, "content"), "a string, a list of parts or null", content)
    refusal = message.get("refusal")
    refused = isinstance(refusal, str) and bool(refusal)
    if isinstance(refusal, str):
        texts.append(refusal)
    blocks += [{"type": "text", "text": text} for text in texts if text]
    calls = message.get("tool_calls")
    if calls is not None:
        calls_path = key_path(path, "tool_calls")
        for i, value in enumerate(as_list(calls, calls_path)):
            call_path = index_path(calls_path, i)
            call = as_object(value, call_path)
            function_path = key_path(call_path, "function")
            function = as_object(required(call, "function", call_path), function_path)
            call_id = call.get("id")
            blocks.append(tool_use(call_id if isinstance(call_id, str) and call_id else f"toolu_{message_id}_{i}",
                                   function, function_path))
    legacy = message.get("function_call")
    if legacy is not None and calls is None:
        legacy_path = key_path(path, "function_call")
        blocks.append(tool_use(f"toolu_{message_id}_0", as_object(legacy, legacy_path), legacy_path))
    return blocks, refused


def tool_use(call_id: str, function: JSON, path: str) -> JSON:
    """The tool_use block of a chat tool call's `function` (at `path`), under `call_id`."""
    name = as_string(required(function, "name", path), key_path(path, "name"))
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input(function.get("arguments"))}


def tool_input(arguments: Any) -> JSON:
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


def stop_reason_of(finish_reason: Any, matched: Any, *, tool_use: bool, refused: bool) -> tuple[StopReason, str | None]:
    """Anthropic's (stop_reason, stop_sequence) for an OpenAI finish_reason.

    `matched` is the stop string vLLM names in `stop_reason`; upstreams that stop with tool calls
    but say `stop` are reported as `tool_use`, which is what agent loops wait for.
    """
    if finish_reason == "length":
        return StopReason.MAX_TOKENS, None
    if finish_reason == "tool_calls" or finish_reason == "function_call" or (tool_use and finish_reason != "content_filter"):
        return StopReason.TOOL_USE, None
    if finish_reason == "content_filter" or refused:
        return StopReason.REFUSAL, None
    if finish_reason == "stop" and isinstance(matched, str):
        return StopReason.STOP_SEQUENCE, matched
    return StopReason.END_TURN, None


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
    return value if is_int(value) and 0 <= value < _MAX_COUNT else None
