"""A scripted fake of OpenAI's Responses API: a real aiohttp server on loopback.

`POST /v1/responses` takes the next Answer of the script, else answers the default text: as one
response object, or as the Responses SSE events when the request asked to stream. Responses it
answered are kept (unless the request said `store: false`) for `GET` and `DELETE
/v1/responses/{id}`, and a `previous_response_id` it does not keep is a 404, as OpenAI answers.
Every request is recorded with its method, path, query, headers, JSON body and bytes.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

MODEL = "gpt-4.1-up"
USAGE = {"input_tokens": 9, "output_tokens": 4}


def response(text: str, response_id: str, *, status: str = "completed", model: str = MODEL) -> dict[str, Any]:
    """A response object carrying `text` (no output and no usage while in progress)."""
    done = status != "in_progress"
    message = {"id": f"msg_{response_id}", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    usage = {**USAGE, "total_tokens": sum(USAGE.values()), "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    return {
        "id": response_id, "object": "response", "created_at": 1700000000, "status": status, "model": model,
        "output": [message] if done else [], "usage": usage if done else None, "error": None,
        "incomplete_details": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
        "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": [], "previous_response_id": None,
    }  # fmt: skip


def event(kind: str, sequence: int, **fields: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, "sequence_number": sequence, **fields}) + b"\n\n"


def response_events(*pieces: str, response_id: str, complete: bool = True) -> list[bytes]:
    """The SSE events of a streamed answer; without `complete` it stops after the text deltas."""
    numbers = itertools.count()
    text = "".join(pieces)
    where = {"item_id": f"msg_{response_id}", "output_index": 0}
    events = [
        event("response.created", next(numbers), response=response("", response_id, status="in_progress")),
        event("response.in_progress", next(numbers), response=response("", response_id, status="in_progress")),
        event("response.output_item.added", next(numbers), output_index=0,
              item={"id": where["item_id"], "type": "message", "role": "assistant", "status": "in_progress", "content": []}),
        event("response.content_part.added", next(numbers), **where, content_index=0,
              part={"type": "output_text", "text": "", "annotations": []}),
    ]  # fmt: skip
    events += [event("response.output_text.delta", next(numbers), **where, content_index=0, delta=p) for p in pieces]
    if complete:
        final = response(text, response_id)
        events += [
            event("response.output_text.done", next(numbers), **where, content_index=0, text=text),
            event("response.content_part.done", next(numbers), **where, content_index=0, part=final["output"][0]["content"][0]),
            event("response.output_item.done", next(numbers), output_index=0, item=final["output"][0]),
            event("response.completed", next(numbers), response=final),
        ]  # fmt: skip
    return events


def error_event(code: str, message: str, sequence: int) -> bytes:
    return event("error", sequence, code=code, message=message, param=None)


def failed_event(code: str, message: str, response_id: str, sequence: int) -> bytes:
    failed = {**response("", response_id, status="failed"), "output": [], "error": {"code": code, "message": message}}
    return event("response.failed", sequence, response=failed)


def openai_error(status: int, message: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message or f"upstream failure {status}", "type": "upstream_test", "param": None,
                      "code": f"e{status}"}}  # fmt: skip


@dataclass
class Answer:
    """One scripted answer to `POST /v1/responses`: a status and JSON body, or SSE events.

    An asyncio.Event among the events is waited for; with `cut` the connection is dropped after them.
    """

    status: int = 200
    body: Any = None
    events: list[bytes | asyncio.Event] | None = None
    cut: bool = False


@dataclass
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = b""


@dataclass
class FakeResponses:
    name: str = "up"  # ids it makes start with resp_<name>
    text: str = "Hello from Responses"
    script: deque[Answer] = field(default_factory=deque)
    requests: list[Received] = field(default_factory=list)
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    url: str = ""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def then(self, *answers: Answer) -> FakeResponses:
        self.script.extend(answers)
        return self

    @property
    def calls(self) -> int:
        return len(self.requests)

    def next_id(self) -> str:
        return f"resp_{self.name}{next(self._ids)}"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/responses", self._create)
        app.router.add_get("/v1/responses/{id}", self._stored)
        app.router.add_delete("/v1/responses/{id}", self._stored)
        return app

    async def _record(self, request: web.Request) -> Received:
        raw = await request.read()
        received = Received(request.method, request.path, request.query_string, dict(request.headers),
                            orjson.loads(raw) if raw else {}, raw)  # fmt: skip
        self.requests.append(received)
        return received

    async def _create(self, request: web.Request) -> web.StreamResponse:
        sent = (await self._record(request)).body
        previous = sent.get("previous_response_id")
        if previous is not None and previous not in self.kept and not self.script:
            message = f"Previous response with id '{previous}' not found."
            return web.json_response(openai_error(404, message), status=404)
        answer = self.script.popleft() if self.script else self._default(stream=bool(sent.get("stream")), store=sent.get("store", True))
        if answer.events is None:
            body = answer.body if answer.body is not None else self._kept(response(self.text, self.next_id()), sent)
            return web.Response(status=answer.status, body=orjson.dumps(body), content_type="application/json")
        stream = web.StreamResponse(status=answer.status)
        stream.content_type = "text/event-stream"
        await stream.prepare(request)
        for item in answer.events:
            if isinstance(item, asyncio.Event):
                await item.wait()
            else:
                await stream.write(item)
        if answer.cut:
            assert request.transport is not None
            request.transport.abort()
            return stream
        await stream.write_eof()
        return stream

    def _kept(self, answer: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
        if sent.get("store", True) is not False:
            self.kept[answer["id"]] = answer
        return answer

    def _default(self, *, stream: bool, store: Any) -> Answer:
        response_id = self.next_id()
        if not stream:
            return Answer(body=self._kept(response(self.text, response_id), {"store": store}))
        if store is not False:
            self.kept[response_id] = response(self.text, response_id)
        middle = len(self.text) // 2
        return Answer(events=list(response_events(self.text[:middle], self.text[middle:], response_id=response_id)))

    async def _stored(self, request: web.Request) -> web.Response:
        await self._record(request)
        response_id = request.match_info["id"]
        if response_id not in self.kept:
            return web.json_response(openai_error(404, f"Response with id '{response_id}' not found."), status=404)
        if request.method == "DELETE":
            del self.kept[response_id]
            return web.json_response({"id": response_id, "object": "response", "deleted": True})
        return web.json_response(self.kept[response_id])


async def start_responses(aiohttp_server: Any, name: str = "up", text: str = "Hello from Responses") -> FakeResponses:
    fake = FakeResponses(name, text)
    server = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("/v1"))
    return fake
