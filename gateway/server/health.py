"""The health endpoints: `/healthz` (alive), `/readyz` (takes traffic) and `GET /v1/gateway/health`.

`/readyz` is not ready while the gateway drains, while the memory store says its writes fail
(a store that heals by itself is found ready again here: see SQLiteStore.unwritable), or while
one of its writes has been pending for more than STALLED_SECONDS: a write stalled without failing
(a frozen file system, another process holding SQLite's write lock) holds memory turns until it
ends, so traffic had better go to another replica meanwhile. Writes take milliseconds; 5 s is
half the SQLite store's busy timeout, so a replica blocked by a lock is out before its writes fail.

`/v1/gateway/health` lists every route's targets with their circuit-breaker state.

Behind the gateway keys like every /v1/ path. With breakers shared through Redis the state is
read fresh from Redis (or, while it is unreachable, this process's view).
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Final

import orjson
from aiohttp import web

from gateway.core.breaker import CLOSED
from gateway.core.tree import iter_targets
from gateway.memory.store import Writability
from gateway.server.keys import CONFIG, DISPATCHER, LIFECYCLE, MEMORY
from gateway.upstream.breakers.board import TargetHealth

STALLED_SECONDS: Final = 5.0  # a memory write pending longer makes the gateway not ready (see above)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """503 while draining, or while the memory store's writes fail or stall (its reason in the body); else 200."""
    if request.app[LIFECYCLE].draining:
        return web.json_response({"status": "draining"}, status=503)
    memory = request.app.get(MEMORY)
    if memory is not None and isinstance(memory.store, Writability):
        pending = memory.store.write_pending()
        if pending > STALLED_SECONDS:  # asked first: unwritable() may wait on the stalled write
            stalled = f"memory store: a write has been pending for {pending:.0f}s"
            return web.json_response({"status": "not ready", "reason": stalled}, status=503)
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
