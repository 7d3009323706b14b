"""YAML configuration → frozen, typed objects.

Loading has three steps: `${VAR}` / `${VAR:-default}` interpolation over the raw document
(gateway.config.interpolation), validation against the schema (gateway.config.schema), which
refuses unknown keys, then the checks that need more than one value and the strategy trees with
their inherited settings resolved (gateway.config.tree), once, so nothing on the request path
merges settings. Every problem of a file is reported at once, each with its dotted path, e.g.
`routes.smart.targets[1].weight: must be >= 0, got -1`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

from gateway.config.access import read_keys, read_limits
from gateway.config.checks import listed
from gateway.config.fields import MAX_COUNT, MAX_SECONDS, key_problem
from gateway.config.interpolation import env_refs, interpolate, secret_forms
from gateway.config.problems import ConfigError, Problems, describe
from gateway.config.schema import ConfigFile, Memory
from gateway.config.stores import check_redis
from gateway.config.summaries import check_summary_windows
from gateway.config.tree import OTHER_ROUTE, merged_window, read_inline_route, read_route, route_name_problem
from gateway.config.validation import validated
from gateway.core.kinds import KINDS
from gateway.core.masks import show_references
from gateway.core.memory.settings import MemoryConfig, StoreKind
from gateway.core.settings import (
    BreakersConfig,
    BreakerStoreKind,
    Config,
    CorsConfig,
    MetricsConfig,
    RequestConfigSettings,
    ServerConfig,
)

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "MAX_COUNT",
    "MAX_SECONDS",
    "OTHER_ROUTE",
    "ConfigError",
    "load_config",
    "parse_config",
    "read_config_text",
    "read_inline_route",
]

DEFAULT_OPENAI_BASE_URL: Final = KINDS["openai"].default_base_url


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a YAML config file."""
    return parse_config(read_config_text(path), env=env)


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The text of a config file; ConfigError when it cannot be read or is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from None
    except UnicodeDecodeError:
        raise ConfigError([f"{path}: cannot read (not UTF-8 text)"]) from None


def parse_config(text: str, env: Mapping[str, str] | None = None) -> Config:
    """Parse YAML text into a Config, or raise ConfigError listing every problem."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"invalid YAML: {exc}"]) from None
    except RecursionError:
        raise ConfigError(["invalid YAML: nested too deeply"]) from None
    problems = Problems()
    refs: dict[str, str] = {}
    try:
        document = interpolate(document, (), os.environ if env is None else env, problems=problems, refs=refs)
        if not isinstance(document, dict):
            raise ConfigError([*problems.messages, f"top level: must be a mapping, got {describe(document)}"])
        route_names = _route_names(document, problems)
        checked = validated(ConfigFile, document, problems)
        config = None if checked is None else _config(checked, route_names=route_names, problems=problems)
    except RecursionError:
        raise ConfigError(["top level: nested too deeply"]) from None
    if problems.messages or config is None:
        # a message may quote a value; one from the environment is shown as its reference
        quoted = secret_forms(refs)
        raise ConfigError([show_references(message, quoted) for message in problems.messages])
    return config


def _route_names(document: dict[str, Any], problems: Problems) -> list[str]:
    """The names of the file's routes; a route whose name cannot be one is refused, and its body left unread."""
    written = document.get("routes")
    if not isinstance(written, dict):
        return []
    refused = set()
    for name in written:
        problem = key_problem(name) or route_name_problem(str(name))
        if problem is not None:
            problems.refuse(("routes", str(name)), problem)
            refused.add(name)
    document["routes"] = {name: body for name, body in written.items() if name not in refused}
    return [str(name) for name in written]


def _config(checked: ConfigFile, *, route_names: list[str], problems: Problems) -> Config:
    """The gateway's settings from a validated file, with the checks that need more than one value."""
    breakers_sentinel = check_redis(checked.breakers, at="breakers", problems=problems)
    memory = _memory(checked.memory, given="memory" in checked.model_fields_set, problems=problems)
    routes = {
        name: read_route(name, route, ("routes", name), problems=problems, memory_defaults=memory.defaults)
        for name, route in checked.routes.items()
    }
    check_summary_windows(checked.memory.defaults, {name: route.memory for name, route in checked.routes.items()}, problems)
    if not route_names:
        problems.add(("routes",), "must be a mapping with at least one route")
    api_keys, admin_keys = read_keys(checked.auth, route_names=route_names, problems=problems)
    default_route = checked.default_route
    if default_route is not None and route_names and default_route not in route_names:
        problems.add(
            ("defaultRoute",), f"no route named {default_route!r} (routes: {', '.join(route_names)})"
        )
    return Config(
        routes=MappingProxyType(routes),
        server=ServerConfig(**dict(checked.server)),
        api_keys=api_keys,
        admin_keys=admin_keys,
        limits=read_limits(checked.limits, memory_store=memory.store, problems=problems),
        default_route=default_route,
        memory=memory,
        cors=CorsConfig(
            allow_origins=tuple(map(listed, checked.cors.allow_origins)),
            allow_headers=tuple(listed(header).lower() for header in checked.cors.allow_headers),
            max_age_seconds=checked.cors.max_age_seconds,
        ),
        metrics=MetricsConfig(**dict(checked.metrics)),
        breakers=BreakersConfig(
            store=_breaker_store(checked.breakers.store),
            url=checked.breakers.url,
            cluster=checked.breakers.cluster,
            sentinel=breakers_sentinel,
            timeout_seconds=checked.breakers.timeout_seconds,
        ),
        request_config=RequestConfigSettings(
            enabled=checked.request_config.enabled,
            allowed_hosts=tuple(listed(host).lower() for host in checked.request_config.allowed_hosts),
        ),
    )


def _breaker_store(store: str | None) -> BreakerStoreKind | None:
    return None if store is None else BreakerStoreKind(store)


def _memory(memory: Memory, *, given: bool, problems: Problems) -> MemoryConfig:
    base = MemoryConfig()
    sentinel = check_redis(memory, at="memory", problems=problems)
    return MemoryConfig(
        store=StoreKind(memory.store),
        path=memory.path,
        shown_path=show_references(memory.path, env_refs(memory.path)) if given else base.shown_path,
        url=memory.url or base.url,
        cluster=memory.cluster,
        sentinel=sentinel,
        wait_replicas=memory.wait_replicas,
        wait_timeout_seconds=memory.wait_timeout_seconds,
        ttl_seconds=memory.ttl_seconds,
        max_stored_messages=memory.max_stored_messages,
        lock_timeout_seconds=memory.lock_timeout_seconds,
        defaults=merged_window(memory.defaults, base.defaults),
        limits=merged_window(memory.limits, base.limits),
    )
