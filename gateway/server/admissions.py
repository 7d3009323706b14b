"""Governance on the request path: a model request admitted before memory or an upstream is touched, settled once when it ends.

Every handler of a model request calls `admit` right after resolving its route. With no limits
configured the app's governor is `Unlimited` and `admit` returns at once: nothing is estimated,
nothing is stored, and the gateway middleware settles nothing (gateway.server.app decides that
once per configuration). Otherwise the request's tokens are estimated (on a body thread for a
large body), the governor takes them, and what it let through is kept at request[ADMISSION]: the
gateway middleware settles it when the handler ends, whatever the outcome (`settle_ended`), and
gateway.server.limit_headers puts the key's x-ratelimit-* headers on the answer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from enum import Enum
from typing import Any

from aiohttp import web

from gateway.core.estimate import answer_limit, prompt_tokens
from gateway.core.tree import Route
from gateway.governance.admission import Governor, Unlimited
from gateway.observe.metrics.prices import load_prices, price_of
from gateway.observe.trace import Trace
from gateway.server.aiohttp_internals import Store, request_state
from gateway.server.bodies import is_large, off_loop
from gateway.server.keys import ADMISSION, GOVERNOR, STREAM_STARTED, TRACE, tenant_of
from gateway.server.metering import METER, Meter

log = logging.getLogger("gateway")


def is_governed(governor: Governor) -> bool:
    """Whether `governor` may limit anything (else admission is skipped and nothing is wired in)."""
    return not isinstance(governor, Unlimited)


async def admit(request: web.Request, route: Route, payload: Mapping[str, Any], *, raw: bytes | None = None, counted: bool = True) -> None:
    """Admit `request` on `route` for the tokens `payload` asks for; a 403 or 429 (GatewayError) when refused.

    `raw`: the body's bytes, by which a large body's estimate is made on a body thread.
    `counted`: False for a request that makes the upstream generate nothing (count_tokens), which
    takes a request and no tokens.
    """
    governor = request.app[GOVERNOR]
    if isinstance(governor, Unlimited):  # no limits: the usual request pays for nothing here
        return
    prompt = answer = 0
    if counted:
        answer = answer_limit(payload)
        if raw is not None and is_large(raw):
            prompt = await off_loop(functools.partial(prompt_tokens, payload))
        else:
            prompt = prompt_tokens(payload)
    admission = await governor.admit(tenant_of(request), route, tokens=prompt + answer)
    if admission is not None:
        state = request_state(request)  # the request's own dict: request[...] goes through MutableMapping's methods
        state[ADMISSION] = admission
        state[METER] = Meter(prompt)


class Ending(Enum):
    """How a governed request ended, as its settle reads it."""

    ANSWERED = "answered"  # an answer the client took (a stream maybe cut short by its upstream)
    FAILED = "failed"  # an error answer: the request's checks, the upstream's 4xx/5xx, every attempt failed
    LEFT = "left"  # the client went away before the handler was done


def settle_ended(governor: Governor, state: Store, *, status: int | None, failed: bool) -> None:
    """Tell `governor` what the request whose own dict is `state` used and spent, if it was admitted; once, as it ends.

    The gateway middleware calls it as every request of a governed configuration ends, whatever
    the outcome. `status`: the answer's, None when the client went away before the handler was
    done (cancelled, or its connection reset). `failed`: the handler raised an error of its own.
    What it used is the upstream's usage when it came, whatever the ending; else see `unreported`.
    """
    admission = state.get(ADMISSION)
    if admission is None or admission.settled:
        return
    try:
        trace: Trace = state[TRACE]
        prompt = trace.prompt_tokens
        tokens: int | None
        if prompt is not None:
            tokens, cost = priced(trace, prompt=prompt, completion=trace.completion_tokens or 0)
        elif status is None:
            tokens, cost = unreported(trace, ending=Ending.LEFT, relayed=state[METER])
        else:
            ending = Ending.FAILED if failed or status >= 400 else Ending.ANSWERED
            tokens, cost = unreported(trace, ending=ending, relayed=state[METER] if STREAM_STARTED in state else None)
        governor.settle(admission, tokens=tokens, cost_usd=cost)
    except Exception:  # the answer is given and the request must still end: its reservation stands
        log.exception("limits: settling a request of key '%s' failed", admission.tenant)
    admission.settled = True


def unreported(trace: Trace, *, ending: Ending, relayed: Meter | None) -> tuple[int | None, float]:
    """The tokens a request whose usage never came used (None: unknown, its reservation stands), and their cost in USD.

    Nothing for an error answer or a request that reached no upstream (the upstream generated
    nothing); for a stream under way or a client that left, what `relayed` counted: the prompt's
    estimate and the answer's text relayed to the client, so closing a stream early escapes
    neither a token limit nor a budget.
    """
    if ending is Ending.FAILED or (trace.attempts == 0 and ending is not Ending.LEFT):
        return 0, 0.0
    if relayed is None:
        return None, 0.0
    return priced(trace, prompt=relayed.prompt_tokens, completion=relayed.completion_tokens)


def priced(trace: Trace, *, prompt: int, completion: int) -> tuple[int, float]:
    """`prompt` + `completion` tokens, and their cost: the model sent upstream's (trace.model_sent), as gateway_cost_usd_total prices it."""
    price = price_of(trace.model_sent(trace.target), load_prices())
    return prompt + completion, price.of(prompt, completion) if price is not None else 0.0
