"""A Responses `response` object under construction: its output items, status and usage, rendered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any, Literal

import orjson

from gateway.core.json_shape import is_int
from gateway.core.pieces import TextPieces
from gateway.core.translate.responses.echo import echo
from gateway.core.translate.responses.names import ToolName, tool_names


class Status(StrEnum):
    """A response's status (its items' too, but for `in_progress`)."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"


PartKind = Literal["output_text", "refusal"]
"""The kinds of content part of the assistant message (their `type`)."""
# Where a chat message (or delta) carries each kind of content part.
PART_KEYS: tuple[tuple[PartKind, str], ...] = (("output_text", "content"), ("refusal", "refusal"))


@dataclass(eq=False)
class Part:
    """One content part of the assistant message, as the pieces it arrived in."""

    kind: PartKind
    pieces: TextPieces = field(default_factory=TextPieces)

    def render(self, text: str | None = None) -> dict[str, Any]:
        text = self.pieces.text() if text is None else text
        if self.kind == "refusal":
            return {"type": "refusal", "refusal": text}
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


@dataclass(eq=False)
class Message:
    """The assistant message: its content parts, one per kind."""

    parts: list[Part] = field(default_factory=list)


@dataclass(eq=False)
class Call:
    """A tool call: its chat arguments as they arrived; a custom tool's input is their `input` string."""

    call_id: str
    name: str
    pieces: TextPieces = field(default_factory=TextPieces)
    _: KW_ONLY
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


Item = Message | Call


def _item_id(response_id: str, item: Item, index: int) -> str:
    """`msg_…`, `fc_…` or `ctc_…`, the same for the same response id and output position."""
    suffix = response_id.removeprefix("resp_")
    kind = "msg" if isinstance(item, Message) else "ctc" if item.custom else "fc"
    return f"{kind}_{suffix}_{index}"


def render_item(item: Item, item_id: str, status: Status, *, empty: bool = False) -> dict[str, Any]:
    """The output item; `empty` as it is announced, before any of its content."""
    if isinstance(item, Message):
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
    return value if is_int(value) and value >= 0 else 0


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


def _status(finish_reason: str | None) -> tuple[Status, str | None]:
    """(status, incomplete_details.reason) for a chat finish_reason."""
    match finish_reason:
        case "length":
            return Status.INCOMPLETE, "max_output_tokens"
        case "content_filter":
            return Status.INCOMPLETE, "content_filter"
        case _:
            return Status.COMPLETED, None


def model_of(answer: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The model a response names: the answer's, else the request's."""
    for model in (answer.get("model"), request.get("model")):
        if isinstance(model, str):
            return model
    return ""


@dataclass(eq=False)
class Reply:
    """A response under construction: the request it answers and what the upstream said so far."""

    request: Mapping[str, Any]
    response_id: str
    created_at: int
    _: KW_ONLY
    model: str
    items: list[Item] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Any = None
    names: dict[str, ToolName] = field(init=False)

    def __post_init__(self) -> None:
        self.names = tool_names(self.request)

    def name(self, call: Call) -> None:
        """Give `call` the namespace, name and kind of the tool its chat function name stands for."""
        if (found := self.names.get(call.name)) is not None:
            call.namespace, call.name, call.custom = found.namespace, found.name, found.custom

    def item_id(self, index: int) -> str:
        return _item_id(self.response_id, self.items[index], index)

    def render(self, *, final: bool) -> dict[str, Any]:
        """The response object: in progress and empty, or final with every item and the usage."""
        status, reason = _status(self.finish_reason) if final else (Status.IN_PROGRESS, None)
        item_status = Status.COMPLETED if status is Status.COMPLETED else Status.INCOMPLETE
        return {
            **echo(self.request),
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "incomplete_details": None if reason is None else {"reason": reason},
            "output": [render_item(item, self.item_id(n), item_status) for n, item in enumerate(self.items)]
            if final else [],
            "usage": _usage(self.usage) if final else None,
        }
