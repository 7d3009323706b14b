"""A `conversation` turn passed through to a target that serves the Responses API, its history expanded into input items.

The conversation is a memory conversation of the gateway: the upstream never sees its id. The
turn is a memory turn (gateway.memory.turns.Turn, a summary window's SummaryTurn as on the chat
path): the conversation is held, its history trimmed by the window, and sent as input items
before the request's own input (after a summary window's note); the request's
input (as chat messages) and the answer's output (as the chat message a chat answer would be)
are stored once the answer is complete. A JSON answer is stored before the client gets it; a
stream holds back its `response.completed` until the turn is stored, and ends with an in-band
`error` event instead when it cannot be (a cut-off or failed stream stores nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from aiohttp import web

from gateway.core.memory.entries import Message
from gateway.core.memory.messages import SYSTEM_ROLES
from gateway.core.memory.policies import Plan
from gateway.core.translate.responses.history import items_of, output_message
from gateway.core.translate.responses.items import messages_to_chat
from gateway.core.translate.responses.names import tool_names
from gateway.core.translate.responses.state import stateless
from gateway.core.tree import Route
from gateway.memory.headers import MemoryAsk
from gateway.memory.turns import Turn
from gateway.observe.trace import Trace
from gateway.server import pins
from gateway.server.aiohttp_internals import request_state
from gateway.server.handlers import gateway_headers
from gateway.server.keys import DISPATCHER, MEMORY, TRACE, tenant_of
from gateway.server.metering import METER
from gateway.server.relay import relay_stream
from gateway.server.summary_calls import memory_turn
from gateway.upstream.dispatch import Request
from gateway.upstream.providers.apis import RESPONSES, RESPONSES_API, chat_usage


async def native_conversation_turn(
    request: web.Request, route: Route, body: dict[str, Any], *, ask: MemoryAsk
) -> web.StreamResponse:
    """Answer `body` (naming the conversation `ask` holds) through the route's Responses targets, the history as input items."""
    app = request.app
    trace: Trace = request[TRACE]
    tenant = tenant_of(request)
    own = stateless(body)
    messages = messages_to_chat(own)  # the turn as memory keeps it; a 400 names an input item it cannot keep
    model = route.memory_model or str(body["model"])
    turn = memory_turn(app, app[MEMORY], (tenant, ask.memory_id), settings=ask.settings, messages=messages, model=model, trace=trace)
    async with turn:
        given = own["input"]
        own["input"] = [*items_of(_history(turn.plan, messages), tool_names(own)),
                        *([{"role": "user", "content": given}] if isinstance(given, str) else given)]  # fmt: skip
        call = Request(RESPONSES, own, None, stream=trace.stream, trace=trace)
        result = await app[DISPATCHER].dispatch(route, call)
        if own.get("store") is not False:
            await pins.record(app[MEMORY].store, tenant, pins.response_id_of(result), route=route, target=result.target)
        headers = {**gateway_headers(trace, route, result), **turn.headers}
        reply = result.reply
        if reply is not None:
            data = reply.data if isinstance(reply.data, dict) else None
            trace.usage(result.target, chat_usage(RESPONSES, data.get("usage") if data is not None else None))
            if reply.ok and (data is None or data.get("status") != "failed"):
                await _commit(turn, data)
            headers["Content-Type"] = reply.content_type
            return web.Response(body=reply.body, status=reply.status, headers=headers)
        keep = functools.partial(_keep, turn)  # at the stream's end, as a chat turn's sink is finished
        meter = request_state(request).get(METER)  # a governed request's: counts the text relayed (see forward)
        sink = meter.counting(None) if meter is not None else None
        return await relay_stream(request, result, headers, trace=trace, sink=sink, api=RESPONSES_API, keep=keep)


def _history(plan: Plan, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """What goes before the request's own input: the kept history, after the stored instructions when it gives none.

    A summary window's note (between the system messages and the kept history in the plan) goes
    before the kept history either way. The request's input goes as it came, so the stored
    messages it resends (memory tells its new turn from a copy of the history's end) are left
    out of the history instead.
    """
    forwarded = plan.forwarded
    start = len(forwarded) - len(plan.new_turn) - plan.history_kept  # the plan ends with the kept history and the new turn
    before, kept = forwarded[:start], forwarded[start : start + plan.history_kept]
    own_system = sum(message.get("role") in SYSTEM_ROLES for message in messages)
    resent = len(messages) - own_system - len(plan.new_turn)
    kept = kept[: max(len(kept) - resent, 0)]
    return [*before[len(plan.system) :], *kept] if own_system else [*before, *kept]


def _keep(turn: Turn, end: dict[str, Any]) -> Awaitable[None]:
    """Store the turn with the answer that `end` (a stream's `response.completed` or `.incomplete` event) carries."""
    return _commit(turn, end.get("response"))


def _commit(turn: Turn, response: Any) -> Awaitable[None]:
    """Store the turn with the response's output as its reply (a chat completion's shape, as Turn takes answers)."""
    message = output_message(response)
    return turn.commit_answer({"choices": [{"message": message}]} if message is not None else None)
