"""A scripted fake of Anthropic's Messages API (`POST /v1/messages`): a real aiohttp server on loopback.

Each call takes the next step of the script, else answers the default text: as one JSON message,
or as Anthropic's SSE events when the request asked to stream. A step can send an error status
with an Anthropic-shaped error body and headers, or a stream that breaks off. Every request is
recorded with its headers, JSON body and bytes. `POST /v1/messages/count_tokens` answers
`{"input_tokens": COUNTED}` (or the next step of the script).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

MODEL = "claude-3-5-sonnet-20241022"
USAGE = {"input_tokens": 11, "output_tokens": 7}
COUNTED = 1234


def message(text: str, *, usage: dict[str, int] = USAGE) -> dict[str, Any]:
    """A complete Messages API answer carrying `text`."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


def message_events(
    *pieces: str, usage: dict[str, int] = USAGE, complete: bool = True
) -> list[bytes | asyncio.Event]:
    """The SSE events of a streamed answer; without `complete` it stops after the text deltas."""
    start = {**message("", usage={"input_tokens": usage["input_tokens"], "output_tokens": 1}), "content": []}
    start.update(stop_reason=None)
    events: list[bytes | asyncio.Event] = [
        sse("message_start", {"message": start}),
        sse("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        sse("ping", {}),
    ]
    events += [
        sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}}) for p in pieces
    ]
    if complete:
        events += [
            sse("content_block_stop", {"index": 0}),
            sse(
                "message_delta",
                {
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            sse("message_stop", {}),
        ]
    return events


def anthropic_error(kind: str, text: str) -> dict[str, Any]:
    """Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`."""
    return {"type": "error", "error": {"type": kind, "message": text}}


@dataclass
class Answer:
    """One scripted answer: a status and JSON body, or SSE events (an asyncio.Event: wait until it is set).

    With `cut` the connection is dropped after the events instead of ending cleanly.
    """

    status: int = 200
    body: Any = None  # JSON-able, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    events: list[bytes | asyncio.Event] | None = None
    cut: bool = False


def overloaded() -> Answer:
    return Answer(529, anthropic_error("overloaded_error", "Overloaded"))


def rate_limited(retry_after: str = "0") -> Answer:
    headers = {"retry-after": retry_after, "anthropic-ratelimit-requests-remaining": "0"}
    return Answer(
        429, anthropic_error("rate_limit_error", "Number of requests has exceeded your rate limit"), headers
    )


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = b""


class FakeAnthropic:
    def __init__(self, text: str = "Hello from Claude") -> None:
        self.text = text
        self.script: deque[Answer] = deque()
        self.requests: list[Received] = []
        self.disconnected = asyncio.Event()  # set when the gateway leaves a stream before its end
        self.url = ""  # the server's root, e.g. http://127.0.0.1:PORT (the SDKs append /v1/messages)

    def then(self, *answers: Answer) -> FakeAnthropic:
        self.script.extend(answers)
        return self

    @property
    def calls(self) -> int:
        return len(self.requests)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/messages/count_tokens", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        sent = orjson.loads(raw)
        self.requests.append(Received(request.path, dict(request.headers), sent, raw))
        if self.script:
            answer = self.script.popleft()
        elif request.path.endswith("/count_tokens"):
            answer = Answer(body={"input_tokens": COUNTED})
        else:
            answer = self._default(stream=bool(sent.get("stream")))
        if answer.events is None:
            body = answer.body if answer.body is not None else message(self.text)
            payload = body if isinstance(body, bytes) else orjson.dumps(body)
            return web.Response(
                status=answer.status, body=payload, headers=answer.headers, content_type="application/json"
            )
        response = web.StreamResponse(status=answer.status, headers=answer.headers)
        response.content_type = "text/event-stream"
        await response.prepare(request)
        try:
            for event in answer.events:
                if isinstance(event, asyncio.Event):
                    await event.wait()
                else:
                    await response.write(event)
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        if answer.cut:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
        return response

    def _default(self, *, stream: bool) -> Answer:
        if not stream:
            return Answer(body=message(self.text))
        middle = len(self.text) // 2
        return Answer(events=message_events(self.text[:middle], self.text[middle:]))


async def start_anthropic(aiohttp_server: Any, text: str = "Hello from Claude") -> FakeAnthropic:
    fake = FakeAnthropic(text)
    server = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("")).rstrip("/")
    return fake
