"""Strategy trees from their validated schema: inherited settings resolved once, names and targets checked.

What a node sets, the targets below it inherit (deeper values win), so nothing on the request
path merges settings. Checks that need what a target inherits (its provider's params, its base
URL) or the whole tree (names, weights) are made here, each problem at its dotted path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from gateway.config.access import rate_limits
from gateway.config.checks import (
    NAME_EXPECTED,
    base_url_problem,
    check_headers,
    check_json,
    check_override_types,
    header_value_problem,
    provider_params,
)
from gateway.config.interpolation import Interpolated, env_refs, longest_first
from gateway.config.problems import ConfigError, Loc, Problems, describe, path_of
from gateway.config.providers import kind_of
from gateway.config.schema import Breaker, Limits, Mock, Node, Retry, Route
from gateway.config.section import Section
from gateway.config.validation import validated
from gateway.core.governance import UNLIMITED
from gateway.core.memory.settings import MemorySettings, MemoryType
from gateway.core.tree import (
    BreakerPolicy,
    Fallback,
    LoadBalance,
    MockOptions,
    ResponsesMode,
    RetryPolicy,
    Single,
    Target,
)
from gateway.core.tree import Node as TreeNode
from gateway.core.tree import Route as TreeRoute

OTHER_ROUTE: Final = "other"  # the metrics' route label for requests that resolve to no route


@dataclass(frozen=True, slots=True)
class Inherited:
    """Settings a strategy node hands down to its descendants (deeper values win)."""

    provider: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    override_params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    stream_idle_timeout: float = 120.0
    retry: RetryPolicy = RetryPolicy()
    breaker: BreakerPolicy = BreakerPolicy()
    responses_api: ResponsesMode = ResponsesMode.NATIVE
    mock: MockOptions = MockOptions()
    provider_params: Mapping[str, tuple[Any, Loc]] = field(default_factory=dict)  # key → (value, where set)
    # per setting (apiKey, baseUrl, headers.X-Team, overrideParams.user, ...): its values from the
    # environment → their references; a node that sets a setting replaces its entry
    env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # False in a client's inline tree, whose keys and names server.inline holds to stricter rules
    from_file: bool = True


def route_name_problem(name: str) -> str | None:
    """Why `name` cannot name a route, or None."""
    if not name.isprintable():
        return f"a route name {NAME_EXPECTED}"
    if name == OTHER_ROUTE:
        return (
            f"the name {OTHER_ROUTE!r} is reserved (metrics count requests that resolve to no route under it)"
        )
    return None


def read_route(
    name: str, route: Route, loc: Loc, *, problems: Problems, memory_defaults: MemorySettings
) -> TreeRoute:
    """The route `name` of the config file, at `loc`."""
    memory = memory_defaults if route.memory is None else merged_window(route.memory, memory_defaults)
    names: dict[str, Loc] = {}
    root = read_node(route, loc, name, inherited=Inherited(), names=names, problems=problems)
    for node_name, at in names.items():  # an inline tree's names are held to stricter rules (server.inline)
        if not node_name.isprintable():
            problems.add((*at, "name"), f"{NAME_EXPECTED}, got {node_name!r}")
    limits = UNLIMITED if route.limits is None else rate_limits(route.limits)
    return TreeRoute(name=name, root=root, memory=memory, limits=limits)


def merged_window(window: Limits, base: MemorySettings) -> MemorySettings:
    """A memory window's given settings over `base`'s."""
    given = _given(window)
    if "memory_type" in given:
        given["memory_type"] = MemoryType(given["memory_type"])
    return dataclasses.replace(base, **given)


def read_node(
    node: Node, loc: Loc, position: str, *, inherited: Inherited, names: dict[str, Loc], problems: Problems
) -> TreeNode:
    """A target or strategy node at `loc`; `position` (e.g. `smart.targets[1]`) is its default name."""
    name = node.name or position
    if isinstance(node.name, Interpolated) and node.name.refs:
        # a name is shown in answer headers, metrics labels, logs and /v1/gateway/health
        problems.add(
            (*loc, "name"),
            "must be written out, not taken from the environment (it is shown in headers and metrics)",
        )
    if name in names:
        problems.add((*loc, "name"), f"duplicate target name {name!r} (also at {path_of(names[name])})")
    names[name] = loc
    inherited = inherit(node, loc, inherited, problems=problems)
    # a node that names a strategy or targets is a strategy node, even when they were refused
    named = {"strategy": node.strategy, "targets": node.targets}
    if all(value is None and not problems.is_refused((*loc, key)) for key, value in named.items()):
        return build_target(node, loc, name, inherited=inherited, problems=problems)
    mode, codes = "single", None
    if node.strategy is None:
        problems.add(
            (*loc, "strategy"), "is required when targets is given (mode: single, fallback or loadbalance)"
        )
    else:
        mode = node.strategy.mode
        codes = None if node.strategy.on_status_codes is None else frozenset(node.strategy.on_status_codes)
    if node.targets is None:
        problems.add((*loc, "targets"), "must be a non-empty list")
    children = tuple(
        read_node(child, (*loc, "targets", i), f"{position}.targets[{i}]", inherited=inherited, names=names, problems=problems)
        for i, child in enumerate(node.targets or ())
        if not problems.is_refused((*loc, "targets", i))
    )
    if mode == "loadbalance" and children and all(c.weight == 0 for c in children):
        problems.add((*loc, "targets"), "a loadbalance needs at least one target with weight > 0")
    if mode == "fallback":
        return Fallback(name, node.weight, children, on_status_codes=codes)
    if mode == "loadbalance":
        return LoadBalance(name, node.weight, children, on_status_codes=codes)
    return Single(name, node.weight, children)


def inherit(node: Node, loc: Loc, parent: Inherited, *, problems: Problems) -> Inherited:
    """What `node` hands down: its own settings over its parent's."""
    override = node.override_params or {}
    headers = node.headers or {}
    if parent.from_file:
        check_headers(headers, (*loc, "headers"), problems)
    params = node.provider_params or {}
    provider = parent.provider if node.provider is None else node.provider
    # providerParams belong to a provider: a node that names another one starts afresh
    inherited_params = parent.provider_params if provider == parent.provider else {}
    api_key = parent.api_key if node.api_key is None else node.api_key
    if parent.from_file and api_key is not None and api_key != parent.api_key:
        problem = header_value_problem(api_key)
        if problem is not None:
            problems.add((*loc, "apiKey"), f"{problem} (it is sent in a header)")
    check_json(override, (*loc, "overrideParams"), problems)
    check_override_types(override, (*loc, "overrideParams"), problems)
    env = dict(parent.env)
    if provider != parent.provider:  # their values from the environment go with the providerParams
        env = {setting: found for setting, found in env.items() if not setting.startswith("providerParams.")}
    env.update(
        {
            key: env_refs(value)
            for key, value in (("apiKey", node.api_key), ("baseUrl", node.base_url))
            if value is not None
        }
    )
    for setting, values in (("overrideParams", override), ("headers", headers), ("providerParams", params)):
        env.update({f"{setting}.{key}": env_refs(value) for key, value in values.items()})
    return Inherited(
        provider=provider,
        api_key=api_key,
        base_url=parent.base_url if node.base_url is None else node.base_url,
        override_params={**parent.override_params, **override},
        headers={**parent.headers, **headers},
        timeout=parent.timeout if node.timeout is None else node.timeout,
        stream_idle_timeout=parent.stream_idle_timeout
        if node.stream_idle_timeout is None
        else node.stream_idle_timeout,
        retry=parent.retry if node.retry is None else _retry(node.retry, parent.retry),
        breaker=parent.breaker
        if node.breaker is None
        else _breaker(node.breaker, (*loc, "breaker"), parent.breaker, problems=problems),
        responses_api=ResponsesMode(node.responses_api) if node.responses_api else parent.responses_api,
        mock=parent.mock if node.mock is None else _mock(node.mock, parent.mock),
        provider_params={
            **inherited_params,
            **{key: (value, (*loc, "providerParams")) for key, value in params.items()},
        },
        env=env,
        from_file=parent.from_file,
    )


def build_target(node: Node, loc: Loc, name: str, *, inherited: Inherited, problems: Problems) -> Target:
    """The target `node` is, with every inherited setting resolved."""
    provider = inherited.provider or "openai"  # a bare apiKey target is OpenAI-compatible
    kind = kind_of(provider)
    params: dict[str, Any] = {}
    secrets: tuple[str, ...] = ()
    if kind is None:
        problems.add(
            (*loc, "provider"),
            f"unknown provider {provider!r} (openai, mock, or a provider litellm knows: anthropic, gemini, ...)",
        )
    else:
        params, secrets = provider_params(kind, inherited.provider_params, problems)
    base_url = inherited.base_url or (kind.default_base_url if kind is not None else "")
    if base_url:
        problem = base_url_problem(base_url)
        if problem is not None:
            problems.add((*loc, "baseUrl"), problem)
    refs = _target_env_refs(inherited.env)
    return Target(
        name=name,
        provider=provider,
        base_url=base_url.rstrip("/"),
        api_key=inherited.api_key or "",
        weight=node.weight,
        override_params=MappingProxyType(dict(inherited.override_params)),
        headers=MappingProxyType(dict(inherited.headers)),
        timeout=inherited.timeout,
        stream_idle_timeout=inherited.stream_idle_timeout,
        retry=inherited.retry,
        breaker=inherited.breaker,
        responses_api=inherited.responses_api,
        mock=inherited.mock,
        provider_params=MappingProxyType(params),
        param_secrets=secrets,
        env_values=tuple(refs),
        env_refs=refs,
    )


def _target_env_refs(env: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """A target's values from the environment → their references, longest first, from its settings'."""
    refs: dict[str, str] = {}
    for setting, found in env.items():
        for value, reference in found.items():
            refs.setdefault(value, reference)
            if setting == "baseUrl" and value.rstrip("/") not in ("", value):  # the URL is kept without it
                refs.setdefault(value.rstrip("/"), reference)
    return longest_first(refs)


def _given(section: Section) -> dict[str, Any]:
    """The settings a section of the schema gives (those it leaves None are inherited)."""
    return {key: value for key, value in section if value is not None}


def _retry(retry: Retry, base: RetryPolicy) -> RetryPolicy:
    given = _given(retry)
    if retry.on_status_codes is not None:
        given["on_status_codes"] = frozenset(retry.on_status_codes)
    return dataclasses.replace(base, **given)


def _breaker(breaker: Breaker, loc: Loc, base: BreakerPolicy, *, problems: Problems) -> BreakerPolicy:
    policy = dataclasses.replace(base, **_given(breaker))
    if policy.max_cooldown_seconds < policy.cooldown_seconds:
        problems.add((*loc, "maxCooldownSeconds"), "must be >= cooldownSeconds")
    return policy


def _mock(mock: Mock, base: MockOptions) -> MockOptions:
    return dataclasses.replace(base, **_given(mock))


def read_inline_route(data: Any, *, name: str, memory: MemorySettings) -> TreeRoute:
    """A strategy tree a client sent (`x-gateway-config`), read like a route of the config file.

    Nothing is interpolated (`${VAR}` stays text: a client never reads the environment), and
    errors are path-qualified from the tree's top (`targets[0].weight: ...`). Raises ConfigError.
    """
    if not isinstance(data, dict):
        raise ConfigError(
            [f"top level: must be a mapping (a target or a strategy node), got {describe(data)}"]
        )
    problems = Problems()
    node = validated(Node, data, problems)
    root = None if node is None else read_node(node, (), name, inherited=Inherited(from_file=False), names={}, problems=problems)
    if problems.messages or root is None:
        raise ConfigError(problems.messages or ["top level: not a target or a strategy node"])
    return TreeRoute(name=name, root=root, memory=memory)
