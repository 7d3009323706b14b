"""An OpenAI-compatible upstream whose answer is named in the URL's path: a real aiohttp server.

A generated config picks each target's behaviour through its baseUrl (`http://host:port/s429/v1`),
so one server serves every target of every generated tree. It never answers 500: a 500 a test
sees is the gateway's own.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
from aiohttp import web

from tests.support.fakes import chat_completion, chunk, error_body, stream_of

BEHAVIOURS: Final = ("ok", "s429", "s400", "s502", "s503", "garbage", "reset", "cut", "nodone")


def _behaviour(path: str) -> str:
    for segment in path.split("/"):
        if segment in BEHAVIOURS:
            return segment
    return "ok"


async def _answer(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    try:
        body: Any = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        body = {}
    streamed = isinstance(body, dict) and body.get("stream") is True
    behaviour = _behaviour(request.path)
    if behaviour.startswith("s"):
        status = int(behaviour[1:])
        return web.json_response(error_body(status), status=status)
    if behaviour == "reset":
        assert request.transport is not None
        request.transport.abort()
        return web.Response()
    if behaviour == "garbage":
        if streamed:
            return await _stream(request, [b"data: {not json\n\n", b"data: [DONE]\n\n"])
        return web.Response(body=b"{not json", content_type="application/json")
    if not streamed:
        return web.Response(body=orjson.dumps(chat_completion("fine")), content_type="application/json")
    events = [e for e in stream_of("fi", "ne") if isinstance(e, bytes)]
    if behaviour == "nodone":
        events = events[:-1]
    if behaviour == "cut":
        return await _stream(request, [chunk({"role": "assistant", "content": "par"})], reset=True)
    return await _stream(request, events)


async def _stream(request: web.Request, events: list[bytes], *, reset: bool = False) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "text/event-stream"
    await response.prepare(request)
    for event in events:
        await response.write(event)
    if reset:
        transport = request.transport
        assert transport is not None
        # abort() drops what the transport still holds: the partial answer, a few bytes on
        # loopback, went straight to the socket (were it held, this test would not cut it)
        assert transport.get_write_buffer_size() == 0
        transport.abort()
        return response
    await response.write_eof()
    return response


def behaviours_app() -> web.Application:
    """The upstream: every POST and GET answered as its path's behaviour says."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", _answer)
    return app
