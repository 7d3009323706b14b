"""The health endpoints: `/healthz` (alive), `/readyz` (takes traffic) and `GET /v1/gateway/health`.

`/readyz` is not ready while the gateway drains, or while the memory store says its writes fail
(a store that heals by itself is found ready again here: see SQLiteStore.unwritable).

`/v1/gateway/health` lists every route's targets with their circuit-breaker state.

Behind the gateway keys like every /v1/ path. With breakers shared through Redis the state is
read fresh from Redis (or, while it is unreachable, this process's view).
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import orjson
from aiohttp import web

from gateway.core.breaker import CLOSED
from gateway.core.tree import iter_targets
from gateway.memory.store import Writability
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY
from gateway.upstream.breakers.board import TargetHealth


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """503 while draining, or while the memory store's writes fail (its reason in the body); else 200."""
    if request.app[LIFECYCLE].draining:
        return web.json_response({"status": "draining"}, status=503)
    memory = request.app.get(MEMORY)
    if memory is not None and isinstance(memory.store, Writability):
        reason = await memory.store.unwritable()
        if reason is not None:
            return web.json_response({"status": "not ready", "reason": f"memory store: writes fail ({reason})"}, status=503)
    return web.json_response({"status": "ready"})


async def gateway_health(request: web.Request) -> web.Response:
    """`status` is "degraded" while any breaker is not closed; the answer is 200 either way."""
    breakers = request.app[DISPATCHER].breakers
    if breakers is None:  # no breakers: every target is listed as disabled
        routes = request.app[CONFIG].routes.items()
        snapshot = {name: [TargetHealth(t.name, enabled=False) for t in iter_targets(route.root)] for name, route in routes}
    else:
        snapshot = await breakers.snapshot()
    now = time.time()
    degraded = any(target.enabled and target.state != CLOSED for targets in snapshot.values() for target in targets)
    body = {
        "status": "degraded" if degraded else "ok",
        "breakers": breakers.kind if breakers is not None else None,
        "routes": {name: {"targets": [_target(target, now) for target in targets]} for name, targets in snapshot.items()},
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _target(health: TargetHealth, now: float) -> dict[str, Any]:
    ends = None
    if health.cooldown is not None:
        ends = datetime.datetime.fromtimestamp(now + health.cooldown, datetime.UTC).isoformat(timespec="milliseconds")
    return {
        "name": health.name,
        "state": health.state_name,
        "failureRate": round(health.failure_rate, 4),
        "requests": health.calls,
        "failures": health.failures,
        "consecutiveFailures": health.consecutive_failures,
        "cooldownEndsAt": ends,
        "cooldownSeconds": None if health.cooldown is None else round(health.cooldown, 3),
    }
