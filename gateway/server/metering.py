"""What a governed request used when the upstream's usage never came: its prompt, estimated, and the text relayed.

A client that closes its stream before the final usage chunk (at the finish reason, or mid-way)
would otherwise be charged only its reservation. Its request is counted instead as the gateway
saw it: the prompt's estimate made at admission plus the characters of the answer's text that
reached the client (content, refusals, completions' text, tool-call arguments) divided by four,
OpenAI's rule of thumb (gateway.core.estimate's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.core.estimate import CHARACTERS_PER_TOKEN
from gateway.server.relay import StreamSink

DELTA_TEXT = ("content", "refusal", "reasoning_content")
ANTHROPIC_DELTA_TEXT = ("text", "partial_json", "thinking")


@dataclass(slots=True, eq=False)
class Meter:
    """A governed request's estimated prompt tokens and the characters of answer text relayed to its client so far."""

    prompt_tokens: int
    characters: int = 0

    @property
    def completion_tokens(self) -> int:
        """The relayed text's tokens, estimated as the prompt's are (characters / 4, rounded up)."""
        return -(-self.characters // CHARACTERS_PER_TOKEN)

    def counting(self, sink: StreamSink | None) -> StreamSink:
        """A stream sink that counts each chunk's text here, then passes the chunk on to `sink` (a memory turn's)."""
        return RelayedText(self, sink)


METER = web.RequestKey("meter", Meter)  # a governed request's, set at its admission


class RelayedText:
    """A StreamSink that counts the answer text of every chat chunk the relay passes on, for `meter`."""

    def __init__(self, meter: Meter, sink: StreamSink | None) -> None:
        self.meter = meter
        self.sink = sink

    def feed(self, chunk: Any) -> None:
        self.meter.characters += answer_characters(chunk)
        if self.sink is not None:
            self.sink.feed(chunk)

    async def finish(self) -> None:
        if self.sink is not None:
            await self.sink.finish()


def answer_characters(chunk: Any) -> int:
    """Characters of the answer text in a chunk or event the relay passes on; 0 for any other.

    A chat or completions chunk: its choices' deltas (content, refusal, reasoning, tool-call
    arguments) and text. An event of the Responses API (`delta`, a string: output text, a
    function call's arguments, ...) or Anthropic's `content_block_delta` (its delta's text,
    partial_json or thinking), for the relay of a stream already in the client's API, fed only
    the events whose delta is text (an audio delta is not).
    """
    if type(chunk) is not dict:
        return 0
    choices = chunk.get("choices")
    if type(choices) is not list:
        return api_delta_characters(chunk.get("delta"))
    characters = 0
    for choice in choices:
        if type(choice) is not dict:
            continue
        text = choice.get("text")
        if type(text) is str:
            characters += len(text)
        delta = choice.get("delta")
        if type(delta) is dict:
            characters += delta_characters(delta)
    return characters


def delta_characters(delta: dict[str, Any]) -> int:
    """Characters of the text in one choice's delta: its content, refusal, reasoning and tool calls' arguments."""
    characters = 0
    for name in DELTA_TEXT:
        text = delta.get(name)
        if type(text) is str:
            characters += len(text)
    calls = delta.get("tool_calls")
    if type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            arguments = function.get("arguments") if type(function) is dict else None
            if type(arguments) is str:
                characters += len(arguments)
    return characters


def api_delta_characters(delta: Any) -> int:
    """Characters of an API event's `delta`: a Responses event's string, or an Anthropic delta's text fields."""
    if type(delta) is str:
        return len(delta)
    if type(delta) is not dict:
        return 0
    characters = 0
    for name in ANTHROPIC_DELTA_TEXT:
        text = delta.get(name)
        if type(text) is str:
            characters += len(text)
    return characters
