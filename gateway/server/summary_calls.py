"""A summary window's turn, and the call that makes its summaries: a chat request to the summary route.

The call asks for `summaryMaxTokens` at most and cuts a longer answer there (counted in the
conversation's encoding, as its turns are): the forwarded note never grows past it. It goes through the dispatcher like a client's request to that route (its targets,
retries, fallbacks and breakers), with a Trace of its own: its attempts, tokens and cost count
under the summary route's series, and the access log shows it as a POST /v1/chat/completions of
the conversation's tenant. What it comes to is counted in gateway_memory_summaries_total.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from gateway.core.errors import GatewayError
from gateway.core.memory.entries import Message
from gateway.core.memory.settings import SUMMARY_WINDOW, MemorySettings
from gateway.core.memory.summary import Outcome, summary_text
from gateway.core.tree import Route
from gateway.memory.store import Key
from gateway.memory.summaries import Summarize, cut_to_tokens
from gateway.memory.summary_turns import SummaryTurn
from gateway.memory.turns import Memory, Turn
from gateway.observe import trace as observe
from gateway.observe.trace import CLIENT_CLOSED, Trace
from gateway.server.keys import CONFIG, DISPATCHER, METRICS, OBSERVER
from gateway.server.middlewares import new_request_id
from gateway.tokens import encoding_name, get_encoding
from gateway.upstream.dispatch import Request


class UnusableSummary(GatewayError):
    status = 502
    type = "upstream_error"
    code = "unusable_summary"


def memory_turn(
    app: web.Application, memory: Memory, key: Key, *, settings: MemorySettings, messages: Sequence[Mapping[str, Any]],
    model: str | None, trace: Trace,
) -> Turn:  # fmt: skip
    """The turn of a request with memory: its window's (a summary window's SummaryTurn, else a Turn)."""
    if settings.memory_type == SUMMARY_WINDOW:
        return summary_turn(app, memory, key, settings=settings, messages=messages, model=model, trace=trace)
    return Turn(memory, key, settings=settings, messages=messages, model=model, trace=trace)


def summary_turn(
    app: web.Application, memory: Memory, key: Key, *, settings: MemorySettings, messages: Sequence[Mapping[str, Any]],
    model: str | None, trace: Trace,
) -> Turn:  # fmt: skip
    """The turn of a summary window: a SummaryTurn, or a token window's Turn when no summary route is configured."""
    route = app[CONFIG].routes.get(settings.summary_route or "")
    if route is None:  # a memoryType header asked for summaries on a route that names no summary route
        return Turn(memory, key, settings=settings, messages=messages, model=model, trace=trace)
    metrics = app.get(METRICS)
    summarize = summarizer(app, route, memory=memory, tenant=key[0], max_tokens=settings.summary_max_tokens, model=model)
    return SummaryTurn(
        memory, key, settings=settings, messages=messages, model=model, trace=trace, summarize=summarize,
        counted=metrics.memory_summarized if metrics is not None else _not_counted,
    )  # fmt: skip


def _not_counted(outcome: Outcome) -> None:
    """The count of a gateway without metrics."""


def summarizer(
    app: web.Application, route: Route, *, memory: Memory, tenant: str, max_tokens: int, model: str | None
) -> Summarize:
    """The call that sends a summary prompt to `route` and gives back the summary, cut to `max_tokens` in `model`'s encoding.

    Raises when the answer brings none.
    """
    dispatcher, observer = app[DISPATCHER], app[OBSERVER]
    encoding = encoding_name(model)

    async def summarize(prompt: list[Message]) -> str:
        trace = Trace(observer, new_request_id(), method="POST", path="/v1/chat/completions", tenant=tenant)
        trace.endpoint = "chat/completions"
        observe.current.set(trace)  # this job's task serves only this call: its log lines carry its id
        trace.resolved(route, stream=False)
        status: int = 500
        code: str | None = "internal_error"
        try:
            payload = {"model": route.name, "messages": prompt, "max_tokens": max_tokens}
            result = await dispatcher.dispatch(route, Request("chat/completions", payload, None, trace=trace))
            reply = result.reply
            data = reply.data if reply is not None else None
            if isinstance(data, dict):
                trace.usage(result.target, data.get("usage"))
            text = summary_text(data)
            if text is None:
                raise UnusableSummary(f"{route.name}: the answer holds no summary text")
            # The conversation's turns loaded this encoding already; a long answer is cut on a thread
            cut = functools.partial(cut_to_tokens, text, max_tokens, get_encoding(encoding))
            summary = await memory.offload(cut, [{"content": text}])
            status, code = 200, None
            return summary
        except GatewayError as exc:
            status, code = exc.status, exc.code
            raise
        except asyncio.CancelledError:  # the gateway stops: counted as a request whose client left
            status, code = CLIENT_CLOSED, None
            raise
        finally:
            trace.end(status, code)

    return summarize
