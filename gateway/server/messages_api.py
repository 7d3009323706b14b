"""Anthropic's Messages API: `POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

from aiohttp import web

from gateway.core.translate import messages as anthropic_api
from gateway.observe.trace import Trace
from gateway.server.admissions import admit
from gateway.server.bodies import read_payload
from gateway.server.handlers import chat, forward_as_is, memory_ask, resolve, served_as_is, to_chat
from gateway.server.keys import CONFIG, TRACE
from gateway.server.parsing import check_count
from gateway.upstream.dispatch import Request
from gateway.upstream.providers.anthropic import client_headers
from gateway.upstream.providers.apis import COUNT_TOKENS, MESSAGES, MESSAGES_API
from gateway.upstream.providers.bridge import anthropic_reshape
from gateway.upstream.providers.token_count import estimate


async def messages(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API: passed through to anthropic targets, translated for the others.

    With memory every target is translated: the conversation is kept as chat messages.
    """
    raw, body = await read_payload(request)
    route = resolve(request, body)  # first, so a request the translation refuses counts under its route
    await admit(request, route, body, raw=raw)
    check_count(body, "messages", request.app[CONFIG].server.max_messages)
    trace: Trace = request[TRACE]
    ask = memory_ask(request, route)
    if ask is None and served_as_is(route, MESSAGES):
        call = Request(MESSAGES, body, raw, stream=trace.stream, trace=trace, client_headers=client_headers(request.headers))
        return await forward_as_is(request, route, call, api=MESSAGES_API)
    payload = await to_chat(anthropic_api.to_chat, body, raw)
    return await chat(request, route, payload, ask=ask, reshape=anthropic_reshape(str(payload.get("model", ""))))


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """Anthropic's `POST /v1/messages/count_tokens`: asked of an anthropic target, else estimated here."""
    raw, body = await read_payload(request)
    route = resolve(request, body)
    await admit(request, route, body, counted=False)  # a count makes the upstream generate nothing
    check_count(body, "messages", request.app[CONFIG].server.max_messages)
    trace: Trace = request[TRACE]
    if served_as_is(route, MESSAGES):
        call = Request(COUNT_TOKENS, body, raw, trace=trace, client_headers=client_headers(request.headers))
        return await forward_as_is(request, route, call, api=MESSAGES_API)
    return web.json_response(await estimate(body), headers={"x-gateway-route": route.name})
