"""The gateway's settings as parsed from its config: server, keys, CORS, metrics, breakers, routes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gateway.core.governance import LimitsConfig, LimitStoreKind, RateLimits
from gateway.core.memory.settings import MemoryConfig, StoreKind
from gateway.core.stores import RedisConnection, SentinelSettings
from gateway.core.tree import Route


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 8080
    max_body_bytes: int = 10 * 1024 * 1024
    max_response_bytes: int = 32 * 1024 * 1024  # the most of an upstream answer the gateway buffers
    body_read_timeout_seconds: float = 30.0  # a client slower than this sending its body gets a 408
    backlog: int = 2048  # the listen queue: connections the kernel holds before the loop accepts them
    drain_seconds: float = 60.0  # on SIGTERM, how long in-flight requests and streams may finish
    max_messages: int = 10_000  # messages (or input items) one request may carry: more is a 413
    # Client connections open at once; past it new ones are refused. 0: from the file-descriptor limit.
    max_connections: int = 0


@dataclass(frozen=True, slots=True)
class CorsConfig:
    """Cross-origin access for browser clients; off while `allow_origins` is empty.

    `allow_headers` empty means: allow whatever request headers the preflight asks for.
    """

    allow_origins: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    max_age_seconds: int = 600

    @property
    def enabled(self) -> bool:
        return bool(self.allow_origins)


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """Prometheus metrics: where they are served and whether the gateway keys guard them.

    `stream_usage` asks streaming upstreams for a final usage chunk (and keeps it from clients that
    did not ask for one), so token and cost metrics cover streams too.
    """

    enabled: bool = True
    path: str = "/metrics"
    require_auth: bool = False
    stream_usage: bool = True


class BreakerStoreKind(StrEnum):
    """Where circuit-breaker state lives: in each process, or in Redis, shared by all."""

    LOCAL = "local"
    REDIS = "redis"


@dataclass(frozen=True, slots=True)
class BreakersConfig:
    """Where circuit-breaker state lives: "local" (per process) or "redis" (shared by all).

    None means: redis when memory.store is redis, local otherwise. A redis store without a url or
    sentinel of its own connects as memory does (url, cluster, sentinel).
    """

    store: BreakerStoreKind | None = None
    url: str | None = field(default=None, repr=False)  # its password must never reach a log
    cluster: bool = False
    sentinel: SentinelSettings | None = None
    timeout_seconds: float = 0.5  # a Redis that hangs costs a call at most this, then is left alone a while


@dataclass(frozen=True, slots=True)
class RequestConfigSettings:
    """Per-request routing trees in `x-gateway-config` (off unless enabled).

    An inline tree may only reach base URLs whose host is in `allowed_hosts`.
    """

    enabled: bool = False
    allowed_hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A gateway key, kept only as its SHA-256 digest; `name` is the caller's tenant.

    `routes`: the routes it may use (None: every one); `limits`: its own (None: limits.defaults).
    """

    name: str
    sha256: bytes = field(repr=False)
    routes: frozenset[str] | None = None
    limits: RateLimits | None = None


@dataclass(frozen=True, slots=True)
class Config:
    routes: Mapping[str, Route]
    server: ServerConfig = ServerConfig()
    api_keys: tuple[ApiKey, ...] = ()
    default_route: str | None = None
    memory: MemoryConfig = MemoryConfig()
    cors: CorsConfig = CorsConfig()
    metrics: MetricsConfig = MetricsConfig()
    breakers: BreakersConfig = BreakersConfig()
    request_config: RequestConfigSettings = RequestConfigSettings()
    admin_keys: tuple[ApiKey, ...] = ()  # keys that manage keys (/v1/gateway/keys) and see every key's usage
    limits: LimitsConfig = LimitsConfig()


def limit_store(config: Config) -> LimitStoreKind:
    """Where `config`'s limits (and the keys issued through the API) are kept: limits.store, else Redis when memory is on Redis."""
    if config.limits.store is not None:
        return config.limits.store
    return LimitStoreKind.REDIS if config.memory.store is StoreKind.REDIS else LimitStoreKind.LOCAL


def limits_redis(config: Config) -> RedisConnection:
    """The Redis limits are counted in: their own url or sentinel, else memory's connection."""
    own = config.limits
    if own.url is None and own.sentinel is None:
        return config.memory.redis
    return RedisConnection(url=own.url or "", cluster=own.cluster, sentinel=own.sentinel)


def breakers_redis(config: Config) -> RedisConnection:
    """The Redis shared breakers use: their own url or sentinel, else memory's connection."""
    own = config.breakers
    if own.url is None and own.sentinel is None:
        return config.memory.redis
    return RedisConnection(url=own.url or "", cluster=own.cluster, sentinel=own.sentinel)
