"""The strategy tree: routes, their nodes and targets, with every inherited setting resolved.

A route's root is a closed set of node types (`Single`, `Fallback`, `LoadBalance`) over
`Target` leaves. Config loading builds them once; the routing walk, dispatch and metrics read them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from gateway.core.governance import UNLIMITED, RateLimits
from gateway.core.masks import mask_userinfo, show_references
from gateway.core.memory.settings import MemorySettings

DEFAULT_TRIGGER_CODES: Final = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 0
    on_status_codes: frozenset[int] = DEFAULT_TRIGGER_CODES
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0
    max_retry_after_seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a target's circuit opens: consecutive failures, or a failure rate over a window.

    A failure is what the parent node's triggers count as one. Open for `cooldown_seconds`,
    doubled on each trip in a row up to `max_cooldown_seconds`; then one trial request decides.
    """

    enabled: bool = True
    failures: int = 5
    failure_rate: float = 0.5
    min_requests: int = 10
    window_seconds: float = 30.0
    cooldown_seconds: float = 30.0
    max_cooldown_seconds: float = 300.0


class ResponsesMode(StrEnum):
    """How /v1/responses reaches an openai target: its own Responses API, or chat completions translated."""

    NATIVE = "native"
    TRANSLATE = "translate"


RESPONSES_API_MODES: Final = tuple(ResponsesMode)


@dataclass(frozen=True, slots=True)
class MockOptions:
    """The built-in mock model's script: latency, fixed reply, statuses to return in turn, chunking."""

    latency: float = 0.0
    reply: str | None = None
    statuses: tuple[int, ...] = ()
    chunk_size: int = 16
    chunk_delay: float = 0.0


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Target:
    """A leaf of the strategy tree with every inherited setting already resolved.

    Compared and hashed by identity, so providers can key per-target caches on it. Its repr names
    it and where it goes, never its keys, headers or values from the environment.
    """

    name: str
    provider: str
    base_url: str
    api_key: str = field(repr=False)
    weight: float = 1.0
    override_params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = 600.0
    stream_idle_timeout: float = 120.0
    retry: RetryPolicy = RetryPolicy()
    breaker: BreakerPolicy = BreakerPolicy()
    # How /v1/responses reaches an openai target (every other provider is translated)
    responses_api: ResponsesMode = ResponsesMode.NATIVE
    mock: MockOptions = MockOptions()
    # litellm arguments from `providerParams` (e.g. aws_region_name), and the values among them
    # that are secrets (masked like api_key)
    provider_params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    param_secrets: tuple[str, ...] = field(default=(), repr=False)
    # Every value in this target's settings that came from `${VAR}` (baseUrl path tokens among
    # them): masked wherever upstream text or the target's own settings could show them.
    env_values: tuple[str, ...] = field(default=(), repr=False)
    # The same values, each with the reference it came from as written (`${TENANT_TOKEN}`), longest
    # value first: what check-config shows in their place.
    env_refs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    def __repr__(self) -> str:
        shown = mask_userinfo(show_references(self.base_url, self.env_refs))
        return f"Target(name={self.name!r}, provider={self.provider!r}, base_url={shown!r})"

    @property
    def model(self) -> str | None:
        model = self.override_params.get("model")
        return model if isinstance(model, str) else None


@dataclass(frozen=True, slots=True)
class Single:
    name: str
    weight: float
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Fallback:
    name: str
    weight: float
    children: tuple[Node, ...]
    on_status_codes: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class LoadBalance:
    name: str
    weight: float
    children: tuple[Node, ...]
    on_status_codes: frozenset[int] | None = None


Node: TypeAlias = Target | Single | Fallback | LoadBalance


def iter_targets(node: Node) -> Iterator[Target]:
    """Every leaf under `node`, depth first, in configured order."""
    if isinstance(node, Target):
        yield node
        return
    for child in node.children:
        yield from iter_targets(child)


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    root: Node
    memory: MemorySettings
    limits: RateLimits = UNLIMITED  # the route as a whole, every key's requests together
    # The model a memory turn counts tokens for, when the route names one: its first target's
    # (depth first) overrideParams model. Found once, here, not by a walk per turn.
    memory_model: str | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        first = next(iter_targets(self.root), None)  # none only in a tree being refused
        object.__setattr__(self, "memory_model", first.model if first is not None else None)

    @property
    def first_target(self) -> Target:
        return next(iter_targets(self.root))
