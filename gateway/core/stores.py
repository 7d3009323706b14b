"""How the gateway reaches a shared store: one Redis, a Redis Cluster, or a primary Sentinel watches."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SentinelSettings:
    """A primary found through Redis Sentinel: the sentinels to ask and the name they know it by.

    `password` is the primary's and its replicas'; `sentinel_password` the sentinels' own.
    """

    master_name: str
    nodes: tuple[tuple[str, int], ...]
    password: str | None = field(default=None, repr=False)  # passwords must never reach a log
    sentinel_password: str | None = field(default=None, repr=False)
    db: int = 0


@dataclass(frozen=True, slots=True)
class RedisConnection:
    """Where a Redis store lives: `url` alone, `url` as any node of a Cluster, or a Sentinel's primary."""

    url: str = field(default="redis://127.0.0.1:6379/0", repr=False)  # its password must never reach a log
    cluster: bool = False
    sentinel: SentinelSettings | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The passwords a message about this connection must not show, besides the URL's own."""
        if self.sentinel is None:
            return ()
        return tuple(secret for secret in (self.sentinel.password, self.sentinel.sentinel_password) if secret)
