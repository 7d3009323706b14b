"""OpenAI's Responses API: `POST /v1/responses`, and stored responses read or deleted by id at their target."""

from __future__ import annotations

import logging
import re

from aiohttp import web

from gateway.core.errors import InvalidRequestError, NotFoundError
from gateway.core.translate import responses as responses_translation
from gateway.core.translate.responses import state
from gateway.core.tree import Route
from gateway.memory.errors import store_errors
from gateway.memory.headers import MemoryAsk
from gateway.memory.store import StoreUnavailable
from gateway.server import pins, response_chain
from gateway.server.admissions import admit
from gateway.server.bodies import read_payload
from gateway.server.handlers import (
    Answered,
    chat,
    forward_as_is,
    gateway_headers,
    memory_ask,
    resolve,
    served_as_is,
    to_chat,
)
from gateway.server.keys import CONFIG, DISPATCHER, MEMORY, TRACE, tenant_of
from gateway.server.native_conversation import native_conversation_turn
from gateway.server.parsing import check_count
from gateway.server.response_chain import answer_in_chain
from gateway.upstream.dispatch import Request, Result
from gateway.upstream.providers.apis import DELETE, RESPONSES, RESPONSES_API, RETRIEVE
from gateway.upstream.providers.bridge import responses_reshape

log = logging.getLogger("gateway")


async def responses(request: web.Request) -> web.StreamResponse:
    """The Responses API: passed through to targets that serve it, translated for the others.

    A request continuing a response (`previous_response_id`) is pinned to the target that
    produced it when the route has a target that serves the API; otherwise the gateway answers it
    after the chain of responses it recorded (response_chain). A `conversation` is a memory
    conversation, kept as chat messages: on a route that serves the API its history goes as input
    items (native_conversation), otherwise the turn is translated like a memoryId's. An upstream
    never sees its id.
    """
    raw, body = await read_payload(request)
    route = resolve(request, body)
    await admit(request, route, body, raw=raw)
    check_count(body, "input", request.app[CONFIG].server.max_messages)
    ask = memory_ask(request, route)
    conversation, previous = state.conversation_id(body), state.previous_response_id(body)
    state.one_state(conversation, previous, memory_id=None if ask is None else ask.memory_id)
    if conversation is not None and ask is None:
        ask = MemoryAsk(conversation, route.memory)
    native = served_as_is(route, RESPONSES)
    if conversation is not None and native:
        assert ask is not None  # the conversation's, or a memoryId header naming it
        return await native_conversation_turn(request, route, body, ask=ask)
    if ask is None and native:
        if previous is not None:
            route = await _pinned_route(request, route, previous)
        stored = body.get("store") is not False  # an upstream keeps no response the client asked it not to
        call = Request(RESPONSES, body, raw, stream=request[TRACE].stream, trace=request[TRACE])
        answered = _recording(request, route) if stored else None
        return await forward_as_is(request, route, call, api=RESPONSES_API, answered=answered)
    reshape = responses_reshape(body)  # the whole body: the answer repeats its conversation and previous response
    payload = await to_chat(responses_translation.to_chat, state.stateless(body), raw)
    if ask is not None:
        return await chat(request, route, payload, ask=ask, reshape=reshape)
    # A route no target of which keeps responses: the gateway keeps them, to be continued
    keep = body.get("store") is not False
    if previous is None and not keep:
        return await chat(request, route, payload, ask=None, reshape=reshape)
    return await answer_in_chain(request, route, payload, previous=previous, keep=keep, reshape=reshape)


async def get_response(request: web.Request) -> web.StreamResponse:
    """`GET /v1/responses/{response_id}`: asked of the target that produced the response, or read from the gateway's record."""
    return await _stored_response(request, RETRIEVE)


async def delete_response(request: web.Request) -> web.StreamResponse:
    """`DELETE /v1/responses/{response_id}`: asked of the target that produced the response, or the gateway's record erased."""
    return await _stored_response(request, DELETE)


_RESPONSE_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")


async def _stored_response(request: web.Request, endpoint: str) -> web.StreamResponse:
    """A response read or deleted where it is kept: at the target that produced it, else in the gateway's records.

    Another tenant's response is unknown to this one, exactly as an id nobody answered.
    """
    response_id = request.match_info["response_id"]
    unknown = NotFoundError(
        f"No response with id '{response_id[:300]}' is kept for this key by this gateway or its upstreams "
        "(records expire with the memory store's TTL; responses created with store: false are not kept).",
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
            found = await pins.find(store, request.app[CONFIG], tenant=tenant, response_id=response_id)
        except pins.NotYours:
            raise unknown from None
        if found is None:
            return await _recorded_response(request, endpoint, tenant=tenant, unknown=unknown)
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


async def _recorded_response(
    request: web.Request, endpoint: str, *, tenant: str, unknown: NotFoundError
) -> web.StreamResponse:
    """A response the gateway answered by translation (response_chain), read as a Response or erased.

    Raises StoreUnavailable when the store cannot say (the caller answers 503).
    """
    store, response_id = request.app[MEMORY].store, request.match_info["response_id"]
    if endpoint == DELETE:
        if not await response_chain.forget_link(store, tenant, response_id):
            raise unknown
        return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})
    link = await response_chain.read_link(store, tenant, response_id)
    if link is None:
        raise unknown
    return web.json_response(response_chain.stored_response(link))


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
        found = await pins.find(request.app[MEMORY].store, config, tenant=tenant_of(request), response_id=response_id)
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
        await pins.record(
            request.app[MEMORY].store, tenant_of(request), pins.response_id_of(result), route=route, target=result.target
        )

    return answered

