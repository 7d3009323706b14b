"""Thin handlers: parse the request, call the dispatcher, render the answer."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.config import Config, Route
from gateway.dispatch import Request, Result
from gateway.errors import NotFoundError
from gateway.memory.headers import read_memory_headers
from gateway.memory.turns import Turn
from gateway.observe import Trace
from gateway.server.bodies import read_payload
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY, REQUEST_ID, TENANT, TRACE
from gateway.server.parsing import check_input, check_messages, check_model, check_stream
from gateway.server.relay import relay_stream


def resolve_route(config: Config, model: str) -> Route:
    route = config.routes.get(model)
    if route is None and config.default_route is not None:
        route = config.routes[config.default_route]
    if route is None:
        raise NotFoundError(
            f"The model '{model}' does not exist on this gateway (routes: {', '.join(config.routes)}).",
            param="model",
            code="model_not_found",
        )
    return route


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

    The relay then keeps that chunk from the client, who did not ask for it.
    """
    options = call.payload.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        return call
    options = {**options, "include_usage": True} if isinstance(options, dict) else {"include_usage": True}
    call.payload = {**call.payload, "stream_options": options}
    call.raw = None
    call.hidden_usage = True
    return call


async def forward(request: web.Request, route: Route, call: Request, *, turn: Turn | None = None) -> web.StreamResponse:
    """Dispatch and relay the answer; with memory, the answer reaches the client only once stored."""
    trace = call.trace
    if call.stream and request.app[CONFIG].metrics.stream_usage:
        call = with_stream_usage(call)
    result = await request.app[DISPATCHER].dispatch(route, call)
    headers = gateway_headers(request, route, result)
    if turn is not None:
        headers.update(turn.headers)
    if result.reply is not None:
        if isinstance(result.reply.data, dict):
            trace.usage(result.target, result.reply.data.get("usage"))
        if turn is not None:
            await turn.commit_answer(result.reply.data)
        headers["Content-Type"] = result.reply.content_type
        return web.Response(body=result.reply.body, status=result.reply.status, headers=headers)
    return await relay_stream(request, result, headers, trace=trace, sink=turn, hide_usage=call.hidden_usage)


MODEL_PATHS = {
    "/v1/chat/completions": "chat/completions",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    config = request.app[CONFIG]
    route = resolve_route(config, check_model(payload))
    stream = check_stream(payload)
    trace.resolved(route, stream=stream)
    messages = check_messages(payload)
    ask = read_memory_headers(request.headers, route.memory, config.memory.limits)
    if ask is None:
        return await forward(request, route, Request("chat/completions", payload, raw, stream, trace))
    model = route.first_target.model or payload["model"]
    async with request.app[MEMORY].turn(request[TENANT], ask, messages, model, trace=trace) as turn:
        payload = {**payload, "messages": turn.plan.forwarded}
        return await forward(request, route, Request("chat/completions", payload, None, stream, trace), turn=turn)


async def completions(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    route = resolve_route(request.app[CONFIG], check_model(payload))
    stream = check_stream(payload)
    trace.resolved(route, stream=stream)
    check_input(payload, "prompt", required=False)
    return await forward(request, route, Request("completions", payload, raw, stream, trace))


async def embeddings(request: web.Request) -> web.StreamResponse:
    trace: Trace = request[TRACE]
    raw, payload = await read_payload(request)
    route = resolve_route(request.app[CONFIG], check_model(payload))
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
