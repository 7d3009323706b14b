"""Circuit breakers: the health of every configured target, remembered across requests.

`state` is one breaker as a pure state machine, `board` the process's breakers as the dispatcher
and the health page use them, `redis` the same board shared through Redis.
"""

from __future__ import annotations

from gateway.core.breaker import (
    CLOSED,
    FORCED,
    HALF_OPEN,
    OPEN,
    ORDINARY,
    PROBE,
    REFUSED,
    SKIPPED,
    Admission,
    State,
)
from gateway.core.memory.settings import StoreKind
from gateway.core.settings import BreakerStoreKind, Config, breakers_redis
from gateway.upstream.breakers.board import BreakerListener, Breakers, LocalBreakers, TargetHealth


def open_breakers(config: Config, *, listener: BreakerListener | None = None) -> Breakers:
    """The configured board: shared through Redis (`breakers.store`, or memory's Redis), else per process.

    Breakers without a Redis of their own connect as memory does: its URL, Cluster or Sentinel.
    """
    shared = config.memory.store == StoreKind.REDIS
    store = config.breakers.store or (BreakerStoreKind.REDIS if shared else BreakerStoreKind.LOCAL)
    if store == BreakerStoreKind.REDIS:
        # imported here for start-up cost: redis-py loads only for breakers on Redis
        from gateway.upstream.breakers.redis import RedisBreakers

        return RedisBreakers(
            config.routes, breakers_redis(config), listener=listener, timeout=config.breakers.timeout_seconds
        )
    return LocalBreakers(config.routes, listener=listener)


__all__ = [
    "CLOSED",
    "FORCED",
    "HALF_OPEN",
    "OPEN",
    "ORDINARY",
    "PROBE",
    "REFUSED",
    "SKIPPED",
    "Admission",
    "BreakerListener",
    "Breakers",
    "LocalBreakers",
    "State",
    "TargetHealth",
    "open_breakers",
]  # fmt: skip
