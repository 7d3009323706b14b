"""Thin handlers: parse the request, call the dispatcher, render the answer."""

from __future__ import annotations

import secrets
import time
from typing import Any, Protocol

import orjson
from aiohttp import web

from gateway.config import Route
from gateway.dispatch import Request, Result, redact
from gateway.errors import GatewayError, NotFoundError
from gateway.memory.headers import read_memory_headers
from gateway.memory.turns import Turn
from gateway.observe import Trace
from gateway.server.bodies import read_payload
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY, REQUEST_ID, TENANT, TRACE
from gateway.server.parsing import check_input, check_messages, check_model, check_stream
from gateway.server.relay import Translator, relay_stream
from gateway.server.resolve import route_for
from gateway.translate import MalformedAnswer
from gateway.translate import messages as anthropic_api
from gateway.translate import responses as responses_api


def gateway_headers(request: web.Request, route: Route, result: Result) -> dict[str, str]:
    return {
        **result.headers,
        "x-request-id": request[REQUEST_ID],
        "x-gateway-route": route.name,
        "x-gateway-target": result.target.name,
        "x-gateway-attempts": str(len(result.attempts)),
    }


def with_stream_usage(call: Request) -> Request:
    """Ask a stream for its final usage chunk, for metrics, unless the client already did.

    The relay then keeps that chunk from the client, who did not ask for it. Without
    `stream_options` in the body, the option is added to the client's bytes (the last `}` of a
    JSON object ends it): nothing is re-serialized.
    """
    options = call.payload.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        return call
    raw = call.raw.rstrip() if call.raw is not None and "stream_options" not in call.payload else b""
    call.raw = raw[:-1] + _INCLUDE_USAGE if raw.endswith(b"}") else None
    options = {**options, "include_usage": True} if isinstance(options, dict) else {"include_usage": True}
    call.payload = {**call.payload, "stream_options": options}
    call.hidden_usage = True
    return call


_INCLUDE_USAGE = b',"stream_options":{"include_usage":true}}'


class Reshape(Protocol):
    """How a chat answer reaches a client of another API (Anthropic Messages, Responses)."""

    def answer(self, data: Any) -> dict[str, Any]:
        """The client's JSON for a complete chat completion; raises MalformedAnswer."""
        ...

    def translator(self) -> Translator: ...


class MalformedUpstreamAnswer(GatewayError):
    status = 502
    type = "upstream_error"
    code = "malformed_upstream_response"


async def forward(
    request: web.Request, route: Route, call: Request, *, turn: Turn | None = None, reshape: Reshape | None = None
) -> web.StreamResponse:
    """Dispatch and relay the answer; with memory, the answer reaches the client only once stored."""
    trace = call.trace
    metrics = request.app[CONFIG].metrics
    if call.stream and metrics.enabled and metrics.stream_usage:  # usage is asked for the metrics' sake
        call = with_stream_usage(call)
    result = await request.app[DISPATCHER].dispatch(route, call)
    headers = gateway_headers(request, route, result)
    if turn is not None:
        headers.update(turn.headers)
    if result.reply is not None:
        if isinstance(result.reply.data, dict):
            trace.usage(result.target, result.reply.data.get("usage"))
        body = result.reply.body
        if reshape is not None:
            try:
                body = orjson.dumps(reshape.answer(result.reply.data))
            except MalformedAnswer as exc:
                raise MalformedUpstreamAnswer(f"{result.target.name}: {redact(str(exc), result.target)}") from None
            headers["Content-Type"] = "application/json"
        else:
            headers["Content-Type"] = result.reply.content_type
        if turn is not None:
            await turn.commit_answer(result.reply.data)
        return web.Response(body=body, status=result.reply.status, headers=headers)
    translator = reshape.translator() if reshape is not None else None
    return await relay_stream(
        request, result, headers, trace=trace, sink=turn, hide_usage=call.hidden_usage, translator=translator
    )


MODEL_PATHS = {
    "/v1/chat/completions": "chat/completions",
    "/v1/messages": "messages",
    "/v1/responses": "responses",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw, payload = await read_payload(request)
    return await _chat(request, raw, payload)


async def messages(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API: translated to chat completions and back (errors Anthropic-shaped)."""
    _, body = await read_payload(request)
    route = _resolve(request, body)  # first, so a request the translation refuses counts under its route
    payload = anthropic_api.to_chat(body)
    return await _chat(request, None, payload, _AnthropicReshape(str(payload.get("model", ""))), route=route)


async def responses(request: web.Request) -> web.StreamResponse:
    """The Responses API, translated to chat completions and back."""
    _, body = await read_payload(request)
    route = _resolve(request, body)
    payload = responses_api.to_chat(body)
    return await _chat(request, None, payload, _ResponsesReshape(body), route=route)


def _resolve(request: web.Request, body: dict[str, Any]) -> Route:
    """The request's route, told to its trace."""
    route = route_for(request, check_model(body))
    request[TRACE].resolved(route, stream=check_stream(body))
    return route


async def _chat(
    request: web.Request,
    raw: bytes | None,
    payload: dict[str, Any],
    reshape: Reshape | None = None,
    *,
    route: Route | None = None,
) -> web.StreamResponse:
    """A chat request, whichever API it came in: routed, with memory when asked, answered."""
    trace: Trace = request[TRACE]
    config = request.app[CONFIG]
    route = route or _resolve(request, payload)
    stream = trace.stream
    messages = check_messages(payload)
    ask = read_memory_headers(request.headers, route.memory, config.memory.limits)
    if ask is None:
        return await forward(request, route, Request("chat/completions", payload, raw, stream, trace), reshape=reshape)
    model = route.first_target.model or payload["model"]
    async with request.app[MEMORY].turn(request[TENANT], ask, messages, model, trace=trace) as turn:
        payload = {**payload, "messages": turn.plan.forwarded}
        call = Request("chat/completions", payload, None, stream, trace)
        return await forward(request, route, call, turn=turn, reshape=reshape)


class _AnthropicReshape:
    def __init__(self, model: str) -> None:
        self.model = model
        self.message_id = f"msg_{secrets.token_hex(12)}"

    def answer(self, data: Any) -> dict[str, Any]:
        return anthropic_api.from_chat(data, model=self.model, message_id=self.message_id)

    def translator(self) -> Translator:
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


class _ResponsesReshape:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.response_id = f"resp_{secrets.token_hex(16)}"
        self.created_at = int(time.time())

    def answer(self, data: Any) -> dict[str, Any]:
        return responses_api.from_chat(data, request=self.body, response_id=self.response_id, created_at=self.created_at)

    def translator(self) -> Translator:
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


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """Anthropic's `POST /v1/messages/count_tokens`."""
    raise NotFoundError("count_tokens is not served yet.", code="not_found")


async def get_response(request: web.Request) -> web.StreamResponse:
    """`GET /v1/responses/{response_id}`: asked of the target that produced the response."""
    raise NotFoundError("Stored responses are not served yet.", code="not_found")


async def delete_response(request: web.Request) -> web.StreamResponse:
    """`DELETE /v1/responses/{response_id}`: asked of the target that produced the response."""
    raise NotFoundError("Stored responses are not served yet.", code="not_found")


async def completions(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    route = route_for(request, check_model(payload))
    stream = check_stream(payload)
    trace.resolved(route, stream=stream)
    check_input(payload, "prompt", required=False)
    return await forward(request, route, Request("completions", payload, raw, stream, trace))


async def embeddings(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    route = route_for(request, check_model(payload))
    trace.resolved(route, stream=False)
    check_input(payload, "input", required=True)
    return await forward(request, route, Request("embeddings", payload, raw, trace=trace))


def _model_card(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "gateway"}


async def list_models(request: web.Request) -> web.Response:
    created = request.app[LIFECYCLE].started_at
    data = [_model_card(name, created) for name in request.app[CONFIG].routes]
    return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type="application/json")


async def get_model(request: web.Request) -> web.Response:
    name = request.match_info["model"]
    if name not in request.app[CONFIG].routes:
        raise NotFoundError(f"The model '{name}' does not exist on this gateway.", param="model", code="model_not_found")
    card = _model_card(name, request.app[LIFECYCLE].started_at)
    return web.Response(body=orjson.dumps(card), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    if request.app[LIFECYCLE].draining:
        return web.json_response({"status": "draining"}, status=503)
    return web.json_response({"status": "ready"})
