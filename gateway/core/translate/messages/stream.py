"""Chat completion chunks as Anthropic SSE events, as they arrive: one stream state machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.core.json_shape import is_int
from gateway.core.translate.messages.answer import stop_reason_of, usage_from_chat
from gateway.core.translate.messages.checks import JSON


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
        stop_reason, stop_sequence = stop_reason_of(
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
        index = given if is_int(given) else 0
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
