"""How a chat completions answer reaches a client of another API: one object per request.

The server (memory, routes whose every target speaks chat) and the providers (one translated
attempt of a mixed route) both turn chat answers into Responses or Anthropic ones through these:
`answer` for a complete chat completion, `translator` for a stream's chunks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gateway.core.translate import messages as anthropic_api
from gateway.core.translate import responses as responses_api


class StreamReshape(Protocol):
    """Chat chunks in, the client API's encoded events out."""

    def feed(self, chunk: Any) -> list[bytes]:
        """The events for one parsed chat chunk; raises MalformedAnswer for one it cannot translate."""
        ...

    def finish(self, usage: Any) -> list[bytes]:
        """The events that end a complete answer (in place of `[DONE]`)."""
        ...

    def error(self, message: str, code: str, status: int) -> bytes:
        """The in-band error event that ends an incomplete answer."""
        ...


class Reshape(Protocol):
    """How a chat answer reaches a client of another API (Anthropic Messages, Responses)."""

    def answer(self, data: Any) -> dict[str, Any]:
        """The client's JSON for a complete chat completion; raises MalformedAnswer."""
        ...

    def translator(self) -> StreamReshape: ...


class AnthropicReshape:
    """Chat answers as Anthropic messages named `model`, under one message id (the caller's, see ResponsesReshape)."""

    def __init__(self, model: str, *, message_id: str) -> None:
        self.model = model
        self.message_id = message_id

    def answer(self, data: Any) -> dict[str, Any]:
        return anthropic_api.from_chat(data, model=self.model, message_id=self.message_id)

    def translator(self) -> StreamReshape:
        return _AnthropicStream(anthropic_api.StreamTranslator(self.model, self.message_id))


class _AnthropicStream:
    def __init__(self, stream: anthropic_api.StreamTranslator) -> None:
        self.stream = stream

    def feed(self, chunk: Any) -> list[bytes]:
        return self.stream.feed(chunk)

    def finish(self, usage: Any) -> list[bytes]:
        return self.stream.finish(usage if isinstance(usage, dict) else None)

    def error(self, message: str, code: str, status: int) -> bytes:
        return anthropic_api.error_event(message, anthropic_api.error_type(status))


class ResponsesReshape:
    """Chat answers as the Responses `response` that answers `body`, under one response id.

    The id and the time come from the caller (`upstream.providers.bridge.responses_reshape`):
    the core reads no clock and draws no random number.
    """

    def __init__(self, body: Mapping[str, Any], *, response_id: str, created_at: int) -> None:
        self.body = body
        self.response_id = response_id
        self.created_at = created_at

    def answer(self, data: Any) -> dict[str, Any]:
        return responses_api.from_chat(data, request=self.body, response_id=self.response_id, created_at=self.created_at)

    def translator(self) -> StreamReshape:
        return _ResponsesStream(responses_api.StreamTranslator(self.body, self.response_id, self.created_at))


class _ResponsesStream:
    def __init__(self, stream: responses_api.StreamTranslator) -> None:
        self.stream = stream

    def feed(self, chunk: Any) -> list[bytes]:
        return self.stream.feed(chunk)

    def finish(self, usage: Any) -> list[bytes]:
        return self.stream.finish(usage if isinstance(usage, dict) else None)

    def error(self, message: str, code: str, status: int) -> bytes:
        return self.stream.error_event(message, code)
