"""The config file's shape: every section and key, its type, its default and what it is for.

Loading validates a file against `ConfigFile` (a client's `x-gateway-config` tree against
`Node`), and `gateway schema` prints it as JSON Schema. A strategy tree's settings are None
unless a node gives them: a node inherits what it does not set (gateway.config.tree). The
sections about keys and limits are gateway.config.governance's.
"""

from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import ConfigDict, Field

from gateway.config.checks import (
    allowed_host_problem,
    cors_header_problem,
    cors_origin_problem,
    metrics_path_problem,
)
from gateway.config.fields import (
    AsEntry,
    AsText,
    Bounds,
    Chosen,
    Count,
    Flag,
    Fraction,
    Headers,
    ListOf,
    MappingOf,
    Params,
    PositiveCount,
    PositiveSeconds,
    Seconds,
    Setting,
    StatusCodes,
    Text,
    Weight,
    holds,
)
from gateway.config.governance import Auth, RateLimiting, RouteLimits
from gateway.config.section import Section
from gateway.config.shared_state import Breakers, Sentinel
from gateway.core.memory.settings import MemoryConfig, MemorySettings
from gateway.core.settings import CorsConfig, MetricsConfig, RequestConfigSettings, ServerConfig
from gateway.core.tree import BreakerPolicy, MockOptions, RetryPolicy

Mode = Literal["single", "fallback", "loadbalance"]
ResponsesApi = Literal["native", "translate"]
MemoryType = Literal["message_window", "token_window", "round_window", "summary_window"]
MemoryStore = Literal["sqlite", "memory", "redis"]
_SERVER, _CORS, _METRICS, _MEMORY = ServerConfig(), CorsConfig(), MetricsConfig(), MemoryConfig()
_RETRY, _BREAKER, _MOCK, _WINDOW = RetryPolicy(), BreakerPolicy(), MockOptions(), MemorySettings()
_INHERITED = "Inherited by the targets below; a node that sets it again replaces it."


class Server(Section):
    """Where the gateway listens, and what one request may ask of it."""

    host: Setting = Field(default=_SERVER.host, description="Address to listen on.")
    port: Annotated[int, Bounds(maximum=65535, between=True)] = Field(
        default=_SERVER.port, description="Port to listen on."
    )
    max_body_bytes: PositiveCount = Field(
        default=_SERVER.max_body_bytes, description="Largest request body; more is a 413."
    )
    max_response_bytes: PositiveCount = Field(
        default=_SERVER.max_response_bytes, description="The most of an upstream answer the gateway buffers."
    )
    body_read_timeout_seconds: PositiveSeconds = Field(
        default=_SERVER.body_read_timeout_seconds,
        description="A client slower than this sending its body gets a 408.",
    )
    backlog: Annotated[int, Bounds(minimum=1, maximum=65535, between=True)] = Field(
        default=_SERVER.backlog, description="Connections the kernel holds before the gateway accepts them."
    )
    drain_seconds: Seconds = Field(
        default=_SERVER.drain_seconds,
        description="On SIGTERM, how long in-flight requests and streams may finish.",
    )
    max_messages: PositiveCount = Field(
        default=_SERVER.max_messages,
        description="Messages (or input items) one request may carry; more is a 413.",
    )
    max_connections: Count = Field(
        default=_SERVER.max_connections,
        description="Client connections open at once; 0: from the file-descriptor limit.",
    )


CorsOrigin = Annotated[str, AsEntry(), holds(cors_origin_problem)]
CorsHeader = Annotated[str, AsEntry(), holds(cors_header_problem)]
AllowedHost = Annotated[str, AsEntry(), holds(allowed_host_problem)]


class Cors(Section):
    """Cross-origin access for browser clients; off while allowOrigins is empty."""

    allow_origins: Annotated[tuple[CorsOrigin, ...], ListOf("strings")] = Field(
        default=_CORS.allow_origins, description="Origins allowed (https://app.example.com), or '*' for any."
    )
    allow_headers: Annotated[tuple[CorsHeader, ...], ListOf("strings")] = Field(
        default=_CORS.allow_headers,
        description="Request headers allowed, or '*'; empty: whatever the preflight asks for.",
    )
    max_age_seconds: Count = Field(
        default=_CORS.max_age_seconds, description="How long browsers may cache a preflight's answer."
    )


class Metrics(Section):
    """Prometheus metrics."""

    enabled: Flag = Field(default=_METRICS.enabled, description="Serve metrics.")
    path: Annotated[str, AsText(blank_is_default=True), holds(metrics_path_problem)] = Field(
        default=_METRICS.path,
        description="Where metrics are served: a plain path outside /v1/, /healthz and /readyz.",
    )
    require_auth: Flag = Field(
        default=_METRICS.require_auth, description="Whether the gateway keys guard the metrics."
    )
    stream_usage: Flag = Field(
        default=_METRICS.stream_usage,
        description="Ask streaming upstreams for usage, so token metrics cover streams too.",
    )


class RequestConfig(Section):
    """Strategy trees a client sends in the x-gateway-config header."""

    enabled: Flag = Field(default=RequestConfigSettings().enabled, description="Accept x-gateway-config.")
    allowed_hosts: Annotated[tuple[AllowedHost, ...], ListOf("strings")] = Field(
        default=(),
        description="Hosts, addresses, networks (10.0.0.0/8) or '*' an inline tree's targets may reach.",
    )


class Limits(Section):
    """Upper limits on the memory windows a request may ask for."""

    max_messages: PositiveCount | None = Field(default=None, description="Messages in the window.")
    max_tokens: PositiveCount | None = Field(default=None, description="Tokens in the window.")
    max_rounds: PositiveCount | None = Field(
        default=None, description="Rounds (a user turn and its answers) in the window."
    )
    max_chars: PositiveCount | None = Field(default=None, description="Characters in the window.")


class Window(Limits):
    """How much of a conversation's history goes with each request."""

    memory_type: Annotated[MemoryType, Chosen(blank_is_default=True)] | None = Field(
        default=None, description=f"Which limit trims the history (default {_WINDOW.memory_type})."
    )
    summary_route: Text | None = Field(
        default=None, description="summary_window: the route that summarizes what leaves the window (another route)."
    )
    summary_max_tokens: PositiveCount | None = Field(
        default=None, description=f"summary_window: the summary's longest length (default {_WINDOW.summary_max_tokens})."
    )


class Memory(Section):
    """Server-side conversation memory, for requests with a memoryId."""

    store: Annotated[MemoryStore, Chosen(blank_is_default=True)] = Field(
        default=cast(MemoryStore, _MEMORY.store), description="Where it is kept."
    )
    path: Setting = Field(default=_MEMORY.path, description="The SQLite file of a sqlite store.")
    url: Setting | None = Field(
        default=None, description=f"The Redis URL of a redis store (default {_MEMORY.url})."
    )
    cluster: Flag = Field(default=_MEMORY.cluster, description="url is any node of a Redis Cluster.")
    sentinel: Sentinel | None = Field(default=None, description="The primary Redis Sentinel names, instead of url.")
    wait_replicas: Count = Field(
        default=_MEMORY.wait_replicas,
        description="Replicas that confirm each turn (Redis WAIT) before it is acknowledged; 0: none waited for.",
    )
    wait_timeout_seconds: PositiveSeconds = Field(
        default=_MEMORY.wait_timeout_seconds,
        description="How long a turn waits for waitReplicas; past it the turn stands, unconfirmed, and a warning is logged.",
    )
    ttl_seconds: PositiveSeconds = Field(
        default=_MEMORY.ttl_seconds, description="How long an idle conversation is kept."
    )
    max_stored_messages: PositiveCount = Field(
        default=_MEMORY.max_stored_messages, description="Messages kept per conversation."
    )
    lock_timeout_seconds: PositiveSeconds = Field(
        default=_MEMORY.lock_timeout_seconds, description="Longest hold of a conversation by one request."
    )
    defaults: Window = Field(
        default_factory=Window.model_construct,
        description="Every route's window, unless the route sets its own.",
    )
    limits: Limits = Field(
        default_factory=Limits.model_construct, description="The largest window a request may ask for."
    )


class Retry(Section):
    """Retries of one target, on the status codes given."""

    attempts: Annotated[int, Bounds(maximum=10, between=True)] | None = Field(
        default=None, description=f"Retries after the first try (default {_RETRY.attempts})."
    )
    on_status_codes: StatusCodes | None = Field(
        default=None, description=f"Statuses that are retried (default {sorted(_RETRY.on_status_codes)})."
    )
    backoff_seconds: Seconds | None = Field(
        default=None, description=f"First wait, doubled each time (default {_RETRY.backoff_seconds})."
    )
    max_backoff_seconds: Seconds | None = Field(
        default=None, description=f"Longest wait (default {_RETRY.max_backoff_seconds})."
    )
    max_retry_after_seconds: Seconds | None = Field(
        default=None, description=f"Longest Retry-After honoured (default {_RETRY.max_retry_after_seconds})."
    )


class Breaker(Section):
    """When a target's circuit opens: consecutive failures, or a failure rate over a window."""

    enabled: Flag | None = Field(
        default=None,
        description=f"Whether the target has a breaker (default {str(_BREAKER.enabled).lower()}).",
    )
    failures: PositiveCount | None = Field(
        default=None, description=f"Failures in a row that open it (default {_BREAKER.failures})."
    )
    failure_rate: Fraction | None = Field(
        default=None, description=f"Failure rate that opens it (default {_BREAKER.failure_rate})."
    )
    min_requests: PositiveCount | None = Field(
        default=None,
        description=f"Requests in the window before the rate counts (default {_BREAKER.min_requests}).",
    )
    window_seconds: PositiveSeconds | None = Field(
        default=None, description=f"The rate's window (default {_BREAKER.window_seconds})."
    )
    cooldown_seconds: PositiveSeconds | None = Field(
        default=None,
        description=f"How long it stays open, doubled on each trip in a row (default {_BREAKER.cooldown_seconds}).",
    )
    max_cooldown_seconds: PositiveSeconds | None = Field(
        default=None, description=f"Longest time open (default {_BREAKER.max_cooldown_seconds})."
    )


class Mock(Section):
    """The built-in mock model's script."""

    latency: Seconds | None = Field(default=None, description="Seconds before it answers.")
    reply: Text | None = Field(default=None, description="A fixed reply; default: it echoes the prompt.")
    statuses: StatusCodes | None = Field(
        default=None, description="Statuses to answer with in turn before succeeding."
    )
    chunk_size: PositiveCount | None = Field(
        default=None, description=f"Characters per stream chunk (default {_MOCK.chunk_size})."
    )
    chunk_delay: Seconds | None = Field(default=None, description="Seconds between stream chunks.")


class Strategy(Section):
    """How a node uses its targets."""

    mode: Annotated[Mode, Chosen(blank="single")] = Field(
        description="single: the first target; fallback: each in turn on failure; loadbalance: one by weight."
    )
    on_status_codes: StatusCodes | None = Field(
        default=None,
        description="Statuses that count as a failure (default: 429 and the 5xx an upstream retries).",
    )


class Node(Section):
    """A target (an upstream and its settings), or a strategy node over targets."""

    name: Text | None = Field(
        default=None, description="Its name in headers, logs and metrics; default: its place in the tree."
    )
    weight: Weight = Field(default=1.0, description="Its share in a loadbalance parent.")
    provider: Text | None = Field(
        default=None, description=f"openai, mock, or a provider litellm knows (default openai). {_INHERITED}"
    )
    api_key: Text | None = Field(default=None, description=f"The upstream's key. {_INHERITED}")
    base_url: Text | None = Field(
        default=None, description=f"The upstream's URL; default: the provider's. {_INHERITED}"
    )
    override_params: Params | None = Field(
        default=None, description=f"Request fields set for the upstream. {_INHERITED}"
    )
    headers: Headers | None = Field(default=None, description=f"Headers sent to the upstream. {_INHERITED}")
    provider_params: Params | None = Field(
        default=None,
        description=f"The provider's own settings (awsRegionName, apiVersion, ...). {_INHERITED}",
    )
    timeout: PositiveSeconds | None = Field(
        default=None, description=f"Seconds an upstream request may take (default 600). {_INHERITED}"
    )
    stream_idle_timeout: PositiveSeconds | None = Field(
        default=None, description=f"Seconds a stream may stay silent (default 120). {_INHERITED}"
    )
    responses_api: Annotated[ResponsesApi, Chosen(blank_is_default=True)] | None = Field(
        default=None,
        description=f"How /v1/responses reaches an openai target: native or translate. {_INHERITED}",
    )
    retry: Retry | None = Field(default=None, description=f"Retries of a target. {_INHERITED}")
    breaker: Breaker | None = Field(default=None, description=f"A target's circuit breaker. {_INHERITED}")
    mock: Mock | None = Field(default=None, description=f"A mock target's script. {_INHERITED}")
    strategy: Strategy | None = Field(default=None, description="Makes this a strategy node over targets.")
    targets: Annotated[list[Node], ListOf(non_empty=True)] | None = Field(
        default=None, description="The strategy's targets."
    )


class Route(Node):
    """A route: what requests for its model name go to, a target or a strategy node."""

    expected = "must be a mapping (a target or a strategy node)"

    memory: Window | None = Field(
        default=None, description="This route's memory window (default: memory.defaults)."
    )
    limits: RouteLimits | None = Field(default=None, description=RouteLimits.__doc__)


class ConfigFile(Section):
    """The gateway's configuration file."""

    model_config = ConfigDict(json_schema_extra={"required": ["routes"]})

    server: Server = Field(default_factory=Server.model_construct, description=Server.__doc__)
    auth: Auth = Field(default_factory=Auth.model_construct, description=Auth.__doc__)
    cors: Cors = Field(default_factory=Cors.model_construct, description=Cors.__doc__)
    metrics: Metrics = Field(default_factory=Metrics.model_construct, description=Metrics.__doc__)
    breakers: Breakers = Field(default_factory=Breakers.model_construct, description=Breakers.__doc__)
    request_config: RequestConfig = Field(
        default_factory=RequestConfig.model_construct, description=RequestConfig.__doc__
    )
    memory: Memory = Field(default_factory=Memory.model_construct, description=Memory.__doc__)
    limits: RateLimiting = Field(default_factory=RateLimiting.model_construct, description=RateLimiting.__doc__)
    default_route: Text | None = Field(
        default=None, description="The route of requests whose model names no route."
    )
    routes: Annotated[dict[str, Route], MappingOf()] = Field(
        default_factory=dict,
        description="Routes by the model name clients ask for.",
        json_schema_extra={"minProperties": 1},
    )
