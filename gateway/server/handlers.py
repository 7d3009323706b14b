"""Thin handlers of chat completions and their kin: parse the request, call the dispatcher, render the answer.

Also what the handlers of the other APIs (messages_api, responses_api) share: a route resolved
and told to the trace, a chat request answered with or without memory, and an answer forwarded
as the target gave it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from gateway.core.errors import GatewayError, NotFoundError
from gateway.core.kinds import serves_natively
from gateway.core.translate import MalformedAnswer
from gateway.core.translate.reshape import Reshape
from gateway.core.tree import Route, iter_targets
from gateway.memory.headers import MemoryAsk, asks_for_memory, read_memory_headers
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace
from gateway.server.admissions import admit
from gateway.server.aiohttp_internals import app_state, request_state
from gateway.server.bodies import is_large, off_loop, read_payload
from gateway.server.body_relay import relay_body
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY, TRACE
from gateway.server.metering import METER
from gateway.server.parsing import check_count, check_input, check_messages, check_model, check_stream
from gateway.server.relay import relay_stream
from gateway.server.resolve import route_for
from gateway.server.summary_calls import memory_turn
from gateway.upstream.dispatch import Request, Result
from gateway.upstream.providers.apis import Api, chat_usage
from gateway.upstream.redaction import redact

log = logging.getLogger("gateway")


def gateway_headers(trace: Trace, route: Route, result: Result, *, upstream: Mapping[str, str] | None = None) -> dict[str, str]:
    """The answer's headers: the upstream's relayed ones (`upstream`, else the result's), then the gateway's."""
    return {
        **(result.headers if upstream is None else upstream),
        "x-request-id": trace.request_id,
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
    payload = call.payload
    options = payload.get("stream_options")
    if isinstance(options, dict):
        if options.get("include_usage"):
            return call
        call.raw = None  # the client's own stream_options change: the body is serialized again
        options = {**options, "include_usage": True}
    else:
        raw = call.raw.rstrip() if call.raw is not None and "stream_options" not in payload else b""
        call.raw = raw[:-1] + _INCLUDE_USAGE if raw.endswith(b"}") else None
        options = {"include_usage": True}
    call.payload = {**payload, "stream_options": options}
    call.hidden_usage = True
    return call


_INCLUDE_USAGE = b',"stream_options":{"include_usage":true}}'


class MalformedUpstreamAnswer(GatewayError):
    status = 502
    type = "upstream_error"
    code = "malformed_upstream_response"


Answered = Callable[[Result], Awaitable[None]]


async def forward(
    request: web.Request,
    route: Route,
    call: Request,
    *,
    turn: Turn | None = None,
    reshape: Reshape | None = None,
    app: web.Application | None = None,
) -> web.StreamResponse:
    """Dispatch and relay the answer; with memory, the answer reaches the client only once stored.

    `app`: the request's, when the caller holds it already (request.app goes through properties).
    """
    if app is None:
        app = request.app
    meter = None
    if call.stream:
        # a governed request's: counts the text relayed, should its usage not come (the state's own dict.get:
        # request.get raises and catches a KeyError for every request nothing governs)
        meter = request_state(request).get(METER)
        metrics = app[CONFIG].metrics
        # usage is asked for the metrics' sake, and for a limited key's tokens and spend
        if meter is not None or (metrics.enabled and metrics.stream_usage):
            call = with_stream_usage(call)
    result = await app[DISPATCHER].dispatch(route, call)
    reply, stream = result.reply, result.stream
    # the relayed headers from whichever answered: Result.headers would find it again, as a property
    upstream = reply.headers if reply is not None else stream.headers if stream is not None else None
    headers = gateway_headers(call.trace, route, result, upstream=upstream)
    if turn is not None:
        headers.update(turn.headers)
    if reply is None:
        translator = reshape.translator() if reshape is not None else None
        sink = turn if meter is None else meter.counting(turn)
        return await relay_stream(
            request, result, headers, trace=call.trace, sink=sink, hide_usage=call.hidden_usage, translator=translator
        )
    if reply.unread is not None:
        return await relay_body(request, result, headers, trace=call.trace)
    data = reply.data
    if isinstance(data, dict):
        call.trace.usage(result.target, data.get("usage"))
    if reshape is None:
        body = reply.body
        headers["Content-Type"] = reply.content_type
    else:
        try:
            body = orjson.dumps(reshape.answer(data))
        except MalformedAnswer as exc:
            raise MalformedUpstreamAnswer(f"{result.target.name}: {redact(str(exc), result.target)}") from None
        headers["Content-Type"] = "application/json"
    if turn is not None:
        await turn.commit_answer(data)
    return web.Response(body=body, status=reply.status, headers=headers)


async def forward_as_is(
    request: web.Request, route: Route, call: Request, *, api: Api, answered: Answered | None = None
) -> web.StreamResponse:
    """Dispatch a request of another API (`api`) and relay its answer as the target gave it.

    Targets that serve the API pass the body through and their answer back; the others are
    translated by their provider, one attempt at a time. `answered` is told the result before
    the client sees any of it.
    """
    trace = call.trace
    result = await request.app[DISPATCHER].dispatch(route, call)
    if answered is not None:
        await answered(result)
    headers = gateway_headers(trace, route, result)
    reply = result.reply
    if reply is not None:
        trace.usage(result.target, chat_usage(api.name, reply.data.get("usage") if isinstance(reply.data, dict) else None))
        headers["Content-Type"] = reply.content_type
        return web.Response(body=reply.body, status=reply.status, headers=headers)
    meter = request_state(request).get(METER)  # a governed request's: counts the text relayed (see forward)
    sink = meter.counting(None) if meter is not None else None
    return await relay_stream(request, result, headers, trace=trace, sink=sink, api=api)


MODEL_PATHS = {
    "/v1/chat/completions": "chat/completions",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages/count_tokens",
    "/v1/responses": "responses",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw, payload = await read_payload(request)
    route = resolve(request, payload)
    await admit(request, route, payload, raw=raw)
    check_count(payload, "messages", request.app[CONFIG].server.max_messages)
    if is_large(raw):
        await off_loop(functools.partial(check_messages, payload))
    else:
        check_messages(payload)
    return await chat(request, route, payload, ask=memory_ask(request, route), raw=raw)


async def to_chat(translate: Callable[[dict[str, Any]], dict[str, Any]], body: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """`body` (of another API, `raw` its bytes) as a chat request, its messages checked: on a body thread when large."""

    def translated() -> dict[str, Any]:
        payload = translate(body)
        check_messages(payload)
        return payload

    return await off_loop(translated) if is_large(raw) else translated()


def served_as_is(route: Route, api: str) -> bool:
    """Whether some target of `route` serves `api` itself (then each attempt picks pass-through or translation)."""
    return any(serves_natively(target, api) for target in iter_targets(route.root))


def memory_ask(request: web.Request, route: Route) -> MemoryAsk | None:
    if not asks_for_memory(request.headers):  # the usual request: no window limits to look up
        return None
    return read_memory_headers(request.headers, route.memory, request.app[CONFIG].memory.limits)


def resolve(request: web.Request, body: dict[str, Any]) -> Route:
    """The request's route, told to its trace."""
    model = check_model(body)
    route = route_for(request, model)
    request[TRACE].resolved(route, stream=check_stream(body), model=model)
    return route


def chat(
    request: web.Request,
    route: Route,
    payload: dict[str, Any],
    *,
    ask: MemoryAsk | None,
    raw: bytes | None = None,
    reshape: Reshape | None = None,
) -> Awaitable[web.StreamResponse]:
    """A chat request (its messages checked), whichever API it came in: with memory when asked, answered.

    `raw`: the client's bytes of `payload`, sent as they came when nothing changes it (memory
    does). Without memory, forward's own coroutine is handed back, to be awaited by the caller.
    """
    trace: Trace = request[TRACE]
    if ask is None:
        call = Request("chat/completions", payload, raw, stream=trace.stream, trace=trace)
        return forward(request, route, call, reshape=reshape)
    return chat_with_memory(request, route, payload, ask=ask, trace=trace, reshape=reshape)


async def chat_with_memory(
    request: web.Request,
    route: Route,
    payload: dict[str, Any],
    *,
    ask: MemoryAsk,
    trace: Trace,
    reshape: Reshape | None = None,
) -> web.StreamResponse:
    """A chat turn of a conversation the gateway keeps."""
    app = request.app
    tenant = trace.tenant
    assert tenant is not None  # set for every /v1/ path before its handler runs
    model = route.memory_model or payload["model"]
    memory: Memory = app_state(app)[MEMORY]
    settings, key, messages = ask.settings, (tenant, ask.memory_id), payload["messages"]
    turn = memory_turn(app, memory, key, settings=settings, messages=messages, model=model, trace=trace)
    async with turn:
        payload["messages"] = turn.plan.forwarded  # the request's own dict: the turn keeps the messages it was sent
        call = Request("chat/completions", payload, None, stream=trace.stream, trace=trace)
        return await forward(request, route, call, turn=turn, reshape=reshape, app=app)


async def completions(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    model = check_model(payload)
    route = route_for(request, model)
    stream = check_stream(payload)
    trace.resolved(route, stream=stream, model=model)
    await admit(request, route, payload, raw=raw)
    check_input(payload, "prompt", required=False)
    return await forward(request, route, Request("completions", payload, raw, stream=stream, trace=trace))


async def embeddings(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    model = check_model(payload)
    route = route_for(request, model)
    trace.resolved(route, stream=False, model=model)
    await admit(request, route, payload, raw=raw)
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
