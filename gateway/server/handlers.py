"""Thin handlers: parse the request, call the dispatcher, render the answer."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from gateway.core.errors import GatewayError, InvalidRequestError, NotFoundError
from gateway.core.kinds import serves_natively
from gateway.core.translate import MalformedAnswer
from gateway.core.translate import messages as anthropic_api
from gateway.core.translate import responses as responses_api
from gateway.core.translate.reshape import AnthropicReshape, Reshape, ResponsesReshape
from gateway.core.tree import Route, iter_targets
from gateway.memory.errors import store_errors
from gateway.memory.headers import MemoryAsk, asks_for_memory, read_memory_headers
from gateway.memory.store import StoreUnavailable
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace
from gateway.server import pins
from gateway.server.aiohttp_internals import app_state, request_state
from gateway.server.bodies import OFF_LOOP_BYTES, is_large, off_loop, read_payload
from gateway.server.body_relay import relay_body
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY, TRACE, tenant_of
from gateway.server.parsing import check_count, check_input, check_messages, check_model, check_stream
from gateway.server.relay import relay_stream
from gateway.server.resolve import route_for
from gateway.upstream.dispatch import Request, Result
from gateway.upstream.providers.anthropic import client_headers
from gateway.upstream.providers.apis import (
    COUNT_TOKENS,
    DELETE,
    MESSAGES,
    MESSAGES_API,
    RESPONSES,
    RESPONSES_API,
    RETRIEVE,
    Api,
    chat_usage,
    data_of,
)
from gateway.upstream.providers.token_count import estimate
from gateway.upstream.redaction import redact

log = logging.getLogger("gateway")


def gateway_headers(trace: Trace, route: Route, result: Result, upstream: Mapping[str, str] | None = None) -> dict[str, str]:
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

    `app`: the request's, when the caller holds it already (each request.app is two property calls).
    """
    if app is None:
        app = request.app
    if call.stream:
        metrics = app[CONFIG].metrics
        if metrics.enabled and metrics.stream_usage:  # usage is asked for the metrics' sake
            call = with_stream_usage(call)
    result = await app[DISPATCHER].dispatch(route, call)
    reply, stream = result.reply, result.stream
    # the relayed headers from whichever answered: Result.headers would find it again, as a property
    upstream = reply.headers if reply is not None else stream.headers if stream is not None else None
    headers = gateway_headers(call.trace, route, result, upstream)
    if turn is not None:
        headers.update(turn.headers)
    if reply is None:
        translator = reshape.translator() if reshape is not None else None
        return await relay_stream(
            request, result, headers, trace=call.trace, sink=turn, hide_usage=call.hidden_usage, translator=translator
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
    request: web.Request, route: Route, call: Request, api: Api, *, answered: Answered | None = None
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
    return await relay_stream(request, result, headers, trace=trace, api=api)


MODEL_PATHS = {
    "/v1/chat/completions": "chat/completions",
    "/v1/messages": "messages",
    "/v1/messages/count_tokens": "messages/count_tokens",
    "/v1/responses": "responses",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    # _resolve and _chat written out: the most common request takes two frames less.
    raw, payload = await read_payload(request)
    trace = request_state(request)[TRACE]
    app = request.app  # read once, for route_for and forward both: each read is two property calls
    config = app[CONFIG]  # read once too: app[...] is a Python method
    route = route_for(request, check_model(payload), config)
    trace.resolved(route, stream=check_stream(payload))
    check_count(payload, "messages", config.server.max_messages)
    if len(raw) > OFF_LOOP_BYTES:
        await off_loop(functools.partial(check_messages, payload))
    else:
        check_messages(payload)
    # _memory_ask written out: the usual request (no memoryId) takes no frame for it
    headers = request.headers
    ask = read_memory_headers(headers, route.memory, config.memory.limits) if asks_for_memory(headers) else None
    if ask is None:
        return await forward(request, route, Request("chat/completions", payload, raw, trace.stream, trace), app=app)
    return await _chat_with_memory(request, route, payload, ask, trace, None, app)


async def messages(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API: passed through to anthropic targets, translated for the others.

    With memory every target is translated: the conversation is kept as chat messages.
    """
    raw, body = await read_payload(request)
    route = _resolve(request, body)  # first, so a request the translation refuses counts under its route
    check_count(body, "messages", request.app[CONFIG].server.max_messages)
    trace: Trace = request[TRACE]
    ask = _memory_ask(request, route)
    if ask is None and _served_as_is(route, MESSAGES):
        call = Request(MESSAGES, body, raw, trace.stream, trace, client_headers=client_headers(request.headers))
        return await forward_as_is(request, route, call, MESSAGES_API)
    payload = await _to_chat(anthropic_api.to_chat, body, raw)
    return await _chat(request, route, None, payload, ask=ask, reshape=AnthropicReshape(str(payload.get("model", ""))))


async def responses(request: web.Request) -> web.StreamResponse:
    """The Responses API: passed through to targets that serve it, translated for the others.

    A request continuing a response (`previous_response_id`) is pinned to the target that
    produced it. With memory every target is translated: the conversation is kept as chat messages.
    """
    raw, body = await read_payload(request)
    route = _resolve(request, body)
    check_count(body, "input", request.app[CONFIG].server.max_messages)
    trace: Trace = request[TRACE]
    ask = _memory_ask(request, route)
    previous = body.get("previous_response_id")
    if ask is None and isinstance(previous, str) and previous:
        route = await _pinned_route(request, route, previous)
    if ask is None and _served_as_is(route, RESPONSES):
        stored = body.get("store") is not False  # an upstream keeps no response the client asked it not to
        call = Request(RESPONSES, body, raw, trace.stream, trace)
        return await forward_as_is(request, route, call, RESPONSES_API, answered=_recording(request, route) if stored else None)
    # Translated here, by a route no target of which keeps responses (or for memory): nothing to record.
    payload = await _to_chat(responses_api.to_chat, body, raw)
    return await _chat(request, route, None, payload, ask=ask, reshape=ResponsesReshape(body))


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """Anthropic's `POST /v1/messages/count_tokens`: asked of an anthropic target, else estimated here."""
    raw, body = await read_payload(request)
    route = _resolve(request, body)
    check_count(body, "messages", request.app[CONFIG].server.max_messages)
    trace: Trace = request[TRACE]
    if _served_as_is(route, MESSAGES):
        call = Request(COUNT_TOKENS, body, raw, trace=trace, client_headers=client_headers(request.headers))
        return await forward_as_is(request, route, call, MESSAGES_API)
    return web.json_response(await estimate(body), headers={"x-gateway-route": route.name})


async def get_response(request: web.Request) -> web.StreamResponse:
    """`GET /v1/responses/{response_id}`: asked of the target that produced the response."""
    return await _stored_response(request, RETRIEVE)


async def delete_response(request: web.Request) -> web.StreamResponse:
    """`DELETE /v1/responses/{response_id}`: asked of the target that produced the response."""
    return await _stored_response(request, DELETE)


_RESPONSE_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")


async def _stored_response(request: web.Request, endpoint: str) -> web.StreamResponse:
    response_id = request.match_info["response_id"]
    unknown = NotFoundError(
        f"No stored response with id '{response_id[:300]}' is known to this gateway for this key "
        "(records expire; responses translated to chat completions are not stored).",
        param="response_id",
    )
    if not _RESPONSE_ID.fullmatch(response_id):
        raise unknown
    if request.query.get("stream", "").lower() == "true":
        raise InvalidRequestError("Streaming a stored response is not supported by this gateway.", param="stream",
                                  code="unsupported_value")
    store, tenant = request.app[MEMORY].store, tenant_of(request)
    with store_errors():
        try:
            found = await pins.find(store, request.app[CONFIG], tenant, response_id)
        except pins.NotYours:
            found = None
    if found is None:
        raise unknown
    route = pins.pinned(*found)
    payload = {"response_id": response_id, "query": request.query_string}
    trace = request[TRACE]
    result = await request.app[DISPATCHER].dispatch(route, Request(endpoint, payload, None, trace=trace))
    reply = result.reply
    assert reply is not None  # the call was not a stream
    if endpoint == DELETE:
        await pins.forget(store, response_id)
    headers = {**gateway_headers(trace, route, result), "Content-Type": reply.content_type}
    return web.Response(body=reply.body, status=reply.status, headers=headers)


async def _pinned_route(request: web.Request, route: Route, response_id: str) -> Route:
    """`route`, or the target that produced `response_id` alone when it is known.

    With several tenants (gateway keys of different names), only an id answered to this
    tenant is continued: every tenant calls the upstreams with the operator's keys, so an
    unknown id, another tenant's, or a store that cannot say is refused. With one tenant an
    unknown id walks the route as usual (its upstream answers).
    """
    config = request.app[CONFIG]
    strict = len({key.name for key in config.api_keys}) > 1
    unknown = NotFoundError(
        f"No response with id '{response_id[:300]}' was answered to this key through this gateway "
        "(records expire with the memory store's TTL).",
        param="previous_response_id",
    )
    try:
        found = await pins.find(request.app[MEMORY].store, config, tenant_of(request), response_id)
    except pins.NotYours:
        raise unknown from None
    except StoreUnavailable as exc:
        if strict:
            with store_errors():
                raise
        log.warning("previous_response_id %s: its target could not be looked up (%s); routing as usual", response_id, exc)
        return route
    if found is None:
        if strict:
            raise unknown
        return route
    return pins.pinned(*found)


def _recording(request: web.Request, route: Route) -> Answered:
    """Records which target answered the response id the answer carries (passed through or translated)."""

    async def answered(result: Result) -> None:
        await pins.record(request.app[MEMORY].store, tenant_of(request), _response_id(result), route, result.target)

    return answered


def _response_id(result: Result) -> object:
    """The id of the Responses answer in `result`: its JSON's, or its stream's `response.created`'s."""
    if result.reply is not None:
        data = result.reply.data
        return data.get("id") if isinstance(data, dict) else None
    assert result.first_event is not None
    response = data_of(result.first_event).get("response")
    return response.get("id") if isinstance(response, dict) else None


async def _to_chat(translate: Callable[[dict[str, Any]], dict[str, Any]], body: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """`body` (of another API, `raw` its bytes) as a chat request, its messages checked: on a body thread when large."""

    def translated() -> dict[str, Any]:
        payload = translate(body)
        check_messages(payload)
        return payload

    return await off_loop(translated) if is_large(raw) else translated()


def _served_as_is(route: Route, api: str) -> bool:
    """Whether some target of `route` serves `api` itself (then each attempt picks pass-through or translation)."""
    return any(serves_natively(target, api) for target in iter_targets(route.root))


def _memory_ask(request: web.Request, route: Route) -> MemoryAsk | None:
    if not asks_for_memory(request.headers):  # the usual request: no window limits to look up
        return None
    return read_memory_headers(request.headers, route.memory, request.app[CONFIG].memory.limits)


def _resolve(request: web.Request, body: dict[str, Any]) -> Route:
    """The request's route, told to its trace."""
    route = route_for(request, check_model(body))
    request[TRACE].resolved(route, stream=check_stream(body))
    return route


def _chat(
    request: web.Request,
    route: Route,
    raw: bytes | None,
    payload: dict[str, Any],
    *,
    ask: MemoryAsk | None,
    reshape: Reshape | None = None,
) -> Awaitable[web.StreamResponse]:
    """A chat request (its messages checked), whichever API it came in: with memory when asked, answered.

    Without memory, forward's own coroutine is handed back: no frame more on the common path.
    """
    trace: Trace = request[TRACE]
    if ask is None:
        return forward(request, route, Request("chat/completions", payload, raw, trace.stream, trace), reshape=reshape)
    return _chat_with_memory(request, route, payload, ask, trace, reshape)


async def _chat_with_memory(
    request: web.Request,
    route: Route,
    payload: dict[str, Any],
    ask: MemoryAsk,
    trace: Trace,
    reshape: Reshape | None,
    app: web.Application | None = None,
) -> web.StreamResponse:
    """A chat turn of a conversation the gateway keeps; `app`: the request's, when the caller holds it."""
    if app is None:
        app = request.app
    tenant = trace.tenant
    assert tenant is not None  # set for every /v1/ path before its handler runs
    model = route.memory_model or payload["model"]
    memory: Memory = app_state(app)[MEMORY]
    async with Turn(memory, (tenant, ask.memory_id), ask.settings, payload["messages"], model, trace) as turn:
        payload["messages"] = turn.plan.forwarded  # the request's own dict: the turn keeps the messages it was sent
        call = Request("chat/completions", payload, None, trace.stream, trace)
        return await forward(request, route, call, turn=turn, reshape=reshape, app=app)


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
