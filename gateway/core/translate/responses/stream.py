"""Chat completion chunks as Responses SSE events, as they arrive: encoded, numbered, in order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.translate import MalformedAnswer
from gateway.core.translate.responses.checks import ANSWER, answer_text
from gateway.core.translate.responses.reply import (
    PART_KEYS,
    Call,
    Message,
    Part,
    PartKind,
    Reply,
    Status,
    model_of,
    render_item,
)


class StreamTranslator:
    """Chat completion chunks in, Responses SSE events out: encoded, numbered, in order.

    Items stay open until `finish`, since a chat stream may interleave parallel tool calls and an
    item once done takes no more deltas. A tool call is announced once its name is whole: OpenAI
    sends a name in one piece, but some compatible servers split it over several deltas, so its
    pieces are joined until the call's arguments begin, another call or text comes, or the choice
    finishes.
    """

    def __init__(self, request: Mapping[str, Any], response_id: str, created_at: int) -> None:
        self._reply = Reply(request, response_id, created_at, model=model_of({}, request))
        self._sequence = 0
        self._started = False
        self._message: int | None = None  # output index of the assistant message
        self._calls: dict[int, Call] = {}  # by the chunk's tool call index
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
            raise ANSWER.fail("a stream chunk", "an object", chunk)
        if isinstance(chunk.get("model"), str):
            self._reply.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self._reply.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ANSWER.fail("a stream chunk's choices", "an array", choices)
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
            if isinstance(item, Message):
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
        kind = "response.completed" if final["status"] is Status.COMPLETED else "response.incomplete"
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
        for kind, key in PART_KEYS:
            if text := answer_text(delta.get(key), f"delta.{key}"):
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

    def _text(self, kind: PartKind, text: str) -> list[bytes]:
        events: list[bytes] = []
        items = self._reply.items
        if self._message is None:
            self._message = len(items)
            items.append(Message())
            events.append(self._added(self._message))
        message = items[self._message]
        assert isinstance(message, Message)
        where = {"item_id": self._reply.item_id(self._message), "output_index": self._message}
        part = next((part for part in message.parts if part.kind == kind), None)
        if part is None:
            part = Part(kind)
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
        call_id = answer_text(delta.get("id"), "tool_calls[].id")
        name = answer_text(function.get("name"), "tool_calls[].function.name")
        arguments = answer_text(function.get("arguments"), "tool_calls[].function.arguments")
        events = self._announce_named(besides=index)  # another call's piece: their names are whole
        call = self._calls.setdefault(index, Call("", ""))
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
        item = render_item(self._reply.items[index], self._reply.item_id(index), Status.IN_PROGRESS, empty=True)
        return self._event("response.output_item.added", output_index=index, item=item)
