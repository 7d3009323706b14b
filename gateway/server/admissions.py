"""Governance on the request path: a model request admitted before memory or an upstream is touched, settled once when it ends.

Every handler of a model request calls `admit` right after resolving its route. With no limits
configured the app's governor is `Unlimited` and `admit` returns at once: nothing is estimated,
nothing is stored, and neither `governed` nor `add_quota_headers` is wired in (gateway.server.app
decides that once per configuration). Otherwise the request's tokens are estimated (on a body
thread for a large body), the governor takes them, and what it let through is kept at
request[ADMISSION]: `governed` settles it when the handler ends, whatever the outcome, and
`add_quota_headers` puts the key's x-ratelimit-* headers on the answer, the upstream's own then
relayed as x-upstream-ratelimit-*.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.core.estimate import requested_tokens
from gateway.core.ratelimit_headers import quota_headers
from gateway.core.tree import Route
from gateway.governance.admission import Admission, Unlimited
from gateway.observe.metrics.prices import load_prices, price_of
from gateway.observe.trace import Trace
from gateway.server.bodies import is_large, off_loop
from gateway.server.keys import ADMISSION, GOVERNOR, TRACE, tenant_of

RATE_LIMIT_PREFIX: Final = "x-ratelimit-"
UPSTREAM_RATE_LIMIT_PREFIX: Final = "x-upstream-ratelimit-"


def is_governed(app: web.Application) -> bool:
    """Whether `app`'s governor may limit anything (else admission is skipped and nothing is wired in)."""
    return not isinstance(app[GOVERNOR], Unlimited)


async def admit(request: web.Request, route: Route, payload: Mapping[str, Any], *, raw: bytes | None = None, counted: bool = True) -> None:
    """Admit `request` on `route` for the tokens `payload` asks for; a 403 or 429 (GatewayError) when refused.

    `raw`: the body's bytes, by which a large body's estimate is made on a body thread.
    `counted`: False for a request that makes the upstream generate nothing (count_tokens), which
    takes a request and no tokens.
    """
    governor = request.app[GOVERNOR]
    if isinstance(governor, Unlimited):  # no limits: the usual request pays for nothing here
        return
    tokens = 0
    if counted:
        if raw is not None and is_large(raw):
            tokens = await off_loop(functools.partial(requested_tokens, payload))
        else:
            tokens = requested_tokens(payload)
    admission = await governor.admit(tenant_of(request), route, tokens=tokens)
    if admission is not None:
        request[ADMISSION] = admission


def governed(handler: Handler) -> Handler:
    """`handler`, its request's admission settled once when it ends: answered, failed, or left by its client."""

    async def handle(request: web.Request) -> web.StreamResponse:
        left = True  # until the handler returns or raises an error of its own: cancelled, or the client went away
        try:
            response = await handler(request)
            left = False
            return response
        except Exception as exc:
            left = isinstance(exc, ConnectionResetError)
            raise
        finally:
            admission = request.get(ADMISSION)
            if admission is not None:
                settle(request, admission, left=left)

    return handle


def settle(request: web.Request, admission: Admission, *, left: bool) -> None:
    """Tell the governor what `admission`'s request used and spent, once.

    The tokens are the upstream's usage (prompt + completion). Without usage: none when no
    upstream was called and the client stayed (a request refused by its checks), else unknown
    (the reservation stands).
    """
    if admission.settled:
        return
    trace: Trace = request[TRACE]
    tokens, cost = used(trace, left=left)
    request.app[GOVERNOR].settle(admission, tokens=tokens, cost_usd=cost)
    admission.settled = True


def used(trace: Trace, *, left: bool) -> tuple[int | None, float]:
    """The tokens `trace`'s request used (None: unknown) and their cost in USD, priced as gateway_cost_usd_total."""
    prompt, completion = trace.prompt_tokens, trace.completion_tokens
    if prompt is None:
        nothing_sent = trace.attempts == 0 and trace.target is None and not left
        return (0 if nothing_sent else None), 0.0
    completion = completion or 0
    target, route = trace.target, trace.route
    model = target.model if target is not None and target.model else route.name if route is not None else ""
    price = price_of(model, load_prices())
    return prompt + completion, price.of(prompt, completion) if price is not None else 0.0


async def add_quota_headers(request: web.Request, response: web.StreamResponse) -> None:
    """An on_response_prepare hook: a limited key's x-ratelimit-* on its answer, the upstream's renamed x-upstream-ratelimit-*."""
    admission = request.get(ADMISSION)
    if admission is None or (admission.requests is None and admission.tokens is None):
        return
    headers = response.headers
    relayed = [name for name in headers if name.lower().startswith(RATE_LIMIT_PREFIX)]
    for name in dict.fromkeys(relayed):
        values = headers.getall(name)
        del headers[name]
        for value in values:
            headers.add(UPSTREAM_RATE_LIMIT_PREFIX + name[len(RATE_LIMIT_PREFIX) :], value)
    headers.update(quota_headers(admission.requests, admission.tokens))
