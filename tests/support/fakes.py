"""A scripted OpenAI-compatible upstream: a real aiohttp server on loopback.

Each call takes the next Step of the script (then the default step): a status and body, a
delay, an SSE stream with pauses, a body sent in pieces, a connection reset. Every request is
recorded, a stream the gateway abandons sets `disconnected` (and counts in `disconnects`), and
`active` counts the requests still being answered.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


def chat_completion(content: str = "Hello from upstream", *, model: str = "up-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def chunk(delta: dict[str, Any], finish: str | None = None, *, model: str = "up-model") -> bytes:
    body = {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def stream_of(*pieces: str, done: bool = True) -> list[bytes | float | asyncio.Event]:
    events: list[bytes | float | asyncio.Event] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in pieces]
    events.append(chunk({}, "stop"))
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


def trickle(data: bytes, pause: float) -> list[bytes | float | asyncio.Event]:
    """`data` a byte at a time, `pause` seconds apart: slow enough, no read completes an event."""
    out: list[bytes | float | asyncio.Event] = []
    for i in range(len(data)):
        out += [data[i : i + 1], pause]
    return out


def usage_chunk(prompt: int = 5, completion: int = 3) -> bytes:
    """The last chunk of a stream asked for with include_usage: no choices, the usage."""
    body = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "up-model", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message or f"upstream failure {status}", "type": "upstream_test", "code": f"e{status}"}}


@dataclass
class Step:
    status: int = 200
    body: Any = None  # JSON-able, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # SSE bytes; a float means "sleep this long", an asyncio.Event "wait until it is set"
    events: list[bytes | float | asyncio.Event] | None = None
    reset: bool = False  # abort the connection after the events (or instead of any answer)
    content_type: str = "application/json"
    gate: asyncio.Event | None = None  # answer only once this is set
    events_type: str = "text/event-stream"  # the content type `events` go out with (a JSON body sent in pieces, say)


def broken_stream() -> Step:
    """A stream that commits ("Hel") and then loses its connection."""
    return Step(events=stream_of("Hel", done=False)[:2], reset=True)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    raw: bytes = b""


class FakeUpstream:
    def __init__(self, default: Step | None = None) -> None:
        self.default = default or Step(body=chat_completion())
        self.script: deque[Step] = deque()
        self.requests: list[Received] = []
        self.disconnected = asyncio.Event()
        self.arrived = asyncio.Event()  # set by every request
        self.disconnects = 0  # streams the gateway abandoned
        self.active = 0  # requests being answered now
        self._idle = asyncio.Event()  # set while no request is being answered
        self._idle.set()
        self.url = ""

    def then(self, *steps: Step) -> FakeUpstream:
        self.script.extend(steps)
        return self

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def idle(self) -> None:
        """Return once no request is being answered (every stream finished or was abandoned)."""
        await self._idle.wait()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.active += 1
        self._idle.clear()
        try:
            return await self._answer(request)
        finally:
            self.active -= 1
            if not self.active:
                self._idle.set()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append(Received(request.path, dict(request.headers), orjson.loads(raw), time.monotonic(), raw))
        self.arrived.set()
        step = self.script.popleft() if self.script else self.default
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.gate is not None:
            await step.gate.wait()
        if step.events is not None:
            return await self._stream(request, step)
        if step.reset:
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        body = step.body if isinstance(step.body, bytes) else orjson.dumps(step.body if step.body is not None else {})
        return web.Response(status=step.status, body=body, headers=step.headers, content_type=step.content_type)

    async def _stream(self, request: web.Request, step: Step) -> web.StreamResponse:
        response = web.StreamResponse(status=step.status, headers=step.headers)
        response.content_type = step.events_type
        await response.prepare(request)
        finished = False
        try:
            for item in step.events or []:
                if isinstance(item, float):
                    await asyncio.sleep(item)
                elif isinstance(item, asyncio.Event):
                    await item.wait()
                else:
                    await response.write(item)
            if step.reset:
                assert request.transport is not None
                request.transport.abort()
                finished = True
                return response
            await response.write_eof()
            finished = True
        finally:
            if not finished:
                self.disconnects += 1
                self.disconnected.set()
        return response
