"""YAML configuration → frozen, typed objects.

Loading has two phases: `${VAR}` / `${VAR:-default}` interpolation over the raw document, then a
strict read that rejects unknown keys and reports every problem with its dotted path, e.g.
`routes.smart.targets[1].weight: must be >= 0, got -1`. Inherited settings of the strategy tree
are resolved here, once, so nothing on the request path merges settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml
from yarl import URL

from gateway.config.providers import kind_of
from gateway.config.redis_urls import redis_url_problems
from gateway.core.hosts import allowed_host_problems
from gateway.core.kinds import KINDS, ProviderKind
from gateway.core.masks import mask_userinfo, show_references
from gateway.core.memory.settings import MEMORY_TYPES, MemoryConfig, MemorySettings
from gateway.core.settings import (
    ApiKey,
    BreakersConfig,
    Config,
    CorsConfig,
    MetricsConfig,
    RequestConfigSettings,
    ServerConfig,
)
from gateway.core.tree import (
    RESPONSES_API_MODES,
    BreakerPolicy,
    Fallback,
    LoadBalance,
    MockOptions,
    Node,
    RetryPolicy,
    Route,
    Single,
    Target,
)

DEFAULT_OPENAI_BASE_URL: Final = KINDS["openai"].default_base_url
MODES: Final = ("single", "fallback", "loadbalance")
OTHER_ROUTE: Final = "other"  # the metrics' route label for requests that resolve to no route
# Bounds on every duration and count: no wait needs more than 10 years nor any count more than a
# billion, and past them a clock's or a store's arithmetic overflows (a datetime, a SQLite integer).
MAX_SECONDS: Final = 10 * 365 * 24 * 3600.0
MAX_COUNT: Final = 10**9

# Portkey spells these in snake_case; any snake_case key is read as its camelCase twin.
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigError(Exception):
    """The configuration is invalid; `errors` holds every path-qualified problem."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(self.errors))






































# ---------------------------------------------------------------- loading


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
    errors: list[str] = []
    refs: dict[str, str] = {}
    try:
        document = _interpolate(document, "", os.environ if env is None else env, errors, refs)
        if not isinstance(document, dict):
            raise ConfigError([*errors, f"top level: must be a mapping, got {_kind(document)}"])
        config = _read_config(_Section(document, "", errors))
    except RecursionError:
        raise ConfigError(["top level: nested too deeply"]) from None
    if errors:
        # a message may quote a value; one from the environment is shown as its reference (numbers
        # and booleans aside: they are settings, not secrets, and would garble every message), also
        # where the message quotes it with repr (a token read from a file ends in an escaped newline)
        quoted = _longest_first(
            {form: ref for value, ref in refs.items() if _is_text(value) for form in (value, repr(value)[1:-1])}
        )
        raise ConfigError([show_references(error, quoted) for error in errors])
    assert config is not None
    return config


class _Interpolated(str):
    """A string produced by `${...}`; number fields accept it when it parses as a number.

    `refs` maps each non-empty value the environment gave it to its reference as written.
    """

    refs: Mapping[str, str]


def _interpolate(value: Any, path: str, env: Mapping[str, str], errors: list[str], refs: dict[str, str]) -> Any:
    """`value` with every `${VAR}` substituted; every value taken from `env` is also added to `refs`."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        taken: dict[str, str] = {}

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = env.get(name)
            if found is None or (found == "" and default is not None):
                if default is None:
                    errors.append(f"{path}: environment variable {name} is not set")
                    return ""
                return default  # written in the file: not a secret
            if found:
                taken.setdefault(found, match.group(0))
            return found

        result = _Interpolated(_ENV_REF.sub(substitute, value))
        result.refs = MappingProxyType(taken)
        for found, reference in taken.items():
            refs.setdefault(found, reference)
        return result
    if isinstance(value, dict):
        return {k: _interpolate(v, _join(path, str(k)), env, errors, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, f"{path}[{i}]", env, errors, refs) for i, v in enumerate(value)]
    return value


def _env_refs(value: Any) -> dict[str, str]:
    """Every value from the environment inside `value` (a string, or a list or mapping of them) → its reference."""
    if isinstance(value, _Interpolated):
        return dict(value.refs)
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(_env_refs(key))
            found.update(_env_refs(item))
    elif isinstance(value, list):
        for item in value:
            found.update(_env_refs(item))
    return found


def _is_text(value: str) -> bool:
    """Whether `value` reads as text, not as a number, a boolean or null."""
    return not _SCALAR.fullmatch(value.strip().lower())


_SCALAR: Final = re.compile(r"[-+]?(\d[\d_]*(\.\d*)?|\.\d+)(e[-+]?\d+)?|[-+]?\.?inf|\.?nan|true|false|yes|no|on|off|null|~")


def _longest_first(refs: Mapping[str, str]) -> Mapping[str, str]:
    """`refs` ordered so that a value is replaced before any shorter value inside it."""
    return MappingProxyType(dict(sorted(refs.items(), key=lambda item: len(item[0]), reverse=True)))








def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"{value!r}"
    if isinstance(value, str):
        return f"{value!r}" if len(value) <= 40 else "a string"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_MISSING: Final = object()


class _Section:
    """A mapping read strictly: each key taken once, unknown keys reported at `finish`."""

    def __init__(self, data: dict[Any, Any], path: str, errors: list[str]) -> None:
        self.path = path
        self.errors = errors
        self.data: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = _camel(str(raw_key))
            if key in self.data:
                self.error(key, "given twice (snake_case and camelCase spellings of one key)")
            self.data[key] = value
        self.taken: set[str] = set()

    def at(self, key: str) -> str:
        return _join(self.path, key)

    def error(self, key: str, message: str) -> None:
        self.errors.append(f"{self.at(key)}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def take(self, key: str) -> Any:
        self.taken.add(key)
        return self.data.get(key, _MISSING)

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.take(key)
        if value is _MISSING or value is None:
            if required:
                self.error(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(key, f"must be a string, got {_kind(value)}")
            return default
        return str(value)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean; `true`/`false` text from `${VAR}` interpolation counts too."""
        value = self.take(key)
        if value is _MISSING or value is None:
            return default
        if isinstance(value, _Interpolated) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {_kind(value)}")
            return default
        return value

    def number(self, key: str, default: float, *, minimum: float = 0.0, positive: bool = False) -> float:
        value = self._numeric(key, float)
        if value is None:
            return default
        if value < minimum or (positive and value <= 0):
            self.error(key, f"must be {'> 0' if positive else f'>= {minimum:g}'}, got {value:g}")
            return default
        return float(value)

    def seconds(self, key: str, default: float, *, positive: bool = False) -> float:
        """A duration, at most MAX_SECONDS."""
        value = self.number(key, default, positive=positive)
        if value > MAX_SECONDS:
            self.error(key, f"must be at most {MAX_SECONDS:g} seconds (10 years), got {value:g}")
            return default
        return value

    def integer(self, key: str, default: int, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
        value = self._numeric(key, int)
        if value is None:
            return default
        if value < minimum or value > maximum:
            if maximum != MAX_COUNT:
                bound = f"between {minimum} and {maximum}"
            else:
                bound = f">= {minimum}" if value < minimum else f"at most {MAX_COUNT} (a billion)"
            self.error(key, f"must be {bound}, got {value}")
            return default
        return int(value)

    def _numeric(self, key: str, kind: type[int] | type[float]) -> float | int | None:
        value = self.take(key)
        if value is _MISSING or value is None:
            return None
        if isinstance(value, _Interpolated):
            with contextlib.suppress(yaml.YAMLError):
                value = yaml.safe_load(value)
        wanted = "an integer" if kind is int else "a number"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.error(key, f"must be {wanted}, got {_kind(value)}")
            return None
        if isinstance(value, float) and not (math.isfinite(value) and (kind is float or value.is_integer())):
            self.error(key, f"must be {wanted}, got {value!r}")
            return None
        if kind is float and abs(value) > sys.float_info.max:
            self.error(key, f"must be {wanted} within a float's range, got a {len(str(abs(value)))}-digit integer")
            return None
        return kind(value)

    def status_codes(self, key: str) -> frozenset[int] | None:
        value = self.take(key)
        if value is _MISSING or value is None:
            return None
        if not isinstance(value, list):
            self.error(key, f"must be a list of HTTP status codes, got {_kind(value)}")
            return None
        codes: set[int] = set()
        for i, code in enumerate(value):
            if not _is_status(code):
                self.errors.append(f"{self.at(key)}[{i}]: {_STATUS_EXPECTED}, got {_kind(code)}")
            else:
                codes.add(code)
        return frozenset(codes)

    def mapping(self, key: str) -> dict[str, Any] | None:
        """A free-form mapping whose keys are taken as they are (body params, headers)."""
        value = self.take(key)
        if value is _MISSING or value is None:
            return None
        if not isinstance(value, dict):
            self.error(key, f"must be a mapping, got {_kind(value)}")
            return None
        return {str(k): v for k, v in value.items()}

    def section(self, key: str) -> _Section | None:
        value = self.mapping(key)
        return None if value is None else _Section(value, self.at(key), self.errors)

    def sections(self, key: str, *, required: bool = False) -> list[_Section] | None:
        value = self.take(key)
        if value is _MISSING or value is None:
            if required:
                self.error(key, "must be a non-empty list")
            return None
        if not isinstance(value, list) or not value:
            self.error(key, f"must be a non-empty list, got {_kind(value)}")
            return None
        out = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                out.append(_Section(item, f"{self.at(key)}[{i}]", self.errors))
            else:
                self.errors.append(f"{self.at(key)}[{i}]: must be a mapping, got {_kind(item)}")
        return out

    def finish(self) -> None:
        for key in self.data:
            if key not in self.taken:
                expected = ", ".join(sorted(self.taken))
                self.error(key, f"unknown key (expected one of: {expected})")


def _read_config(root: _Section) -> Config | None:
    server = _read_server(root.section("server"))
    cors = _read_cors(root.section("cors"))
    metrics = _read_metrics(root.section("metrics"))
    breakers = _read_breakers(root.section("breakers"))
    request_config = _read_request_config(root.section("requestConfig"))
    api_keys = _read_auth(root.section("auth"))
    memory = MemoryConfig()
    memory_section = root.section("memory")
    if memory_section is not None:
        memory = _read_memory(memory_section)
    default_route = root.string("defaultRoute")
    routes: dict[str, Route] = {}
    route_map = root.mapping("routes")
    if not route_map:
        root.error("routes", "must be a mapping with at least one route")
    else:
        for name, body in route_map.items():
            if not name.isprintable():
                root.errors.append(f"{_join(root.at('routes'), repr(name))}: a route name {_NAME_EXPECTED}")
                continue
            if name == OTHER_ROUTE:
                root.errors.append(
                    f"{_join(root.at('routes'), name)}: the name {OTHER_ROUTE!r} is reserved "
                    "(metrics count requests that resolve to no route under it)"
                )
                continue
            route = _read_route(name, body, root.at("routes"), root.errors, memory.defaults)
            if route is not None:
                routes[name] = route
    if default_route is not None and route_map and default_route not in route_map:
        root.error("defaultRoute", f"no route named {default_route!r} (routes: {', '.join(route_map)})")
    root.finish()
    return Config(
        routes=MappingProxyType(routes),
        server=server,
        api_keys=api_keys,
        default_route=default_route,
        memory=memory,
        cors=cors,
        metrics=metrics,
        breakers=breakers,
        request_config=request_config,
    )


# names go out in the x-gateway-route and x-gateway-target headers and in log lines
_NAME_EXPECTED: Final = "must be printable text, without control characters (it is sent in a response header)"


def read_inline_route(data: Any, *, name: str, memory: MemorySettings) -> Route:
    """A strategy tree a client sent (`x-gateway-config`), read like a route of the config file.

    Nothing is interpolated (`${VAR}` stays text: a client never reads the environment), and
    errors are path-qualified from the tree's top (`targets[0].weight: ...`). Raises ConfigError.
    """
    errors: list[str] = []
    if not isinstance(data, dict):
        raise ConfigError([f"top level: must be a mapping (a target or a strategy node), got {_kind(data)}"])
    root = _read_node(_Section(data, "", errors), name, _Inherited(from_file=False), {})
    if errors or root is None:
        raise ConfigError(errors or ["top level: not a target or a strategy node"])
    return Route(name=name, root=root, memory=memory)


def _read_breakers(section: _Section | None) -> BreakersConfig:
    if section is None:
        return BreakersConfig()
    store = section.string("store")
    if store is not None and store not in ("local", "redis"):
        section.error("store", f"must be local or redis, got {store!r}")
        store = None
    config = BreakersConfig(store=store, url=section.string("url") or None)
    for problem in redis_url_problems(config.url) if config.url is not None else ():
        section.error("url", problem)
    section.finish()
    return config


def _read_request_config(section: _Section | None) -> RequestConfigSettings:
    if section is None:
        return RequestConfigSettings()
    defaults = RequestConfigSettings()
    hosts = tuple(host.lower() for host in _read_strings(section, "allowedHosts"))
    for problem in allowed_host_problems(hosts):
        section.errors.append(f"{section.at('allowedHosts')}{problem}")
    config = RequestConfigSettings(enabled=section.flag("enabled", defaults.enabled), allowed_hosts=hosts)
    section.finish()
    return config


_RESERVED_PATHS = ("/v1/", "/healthz", "/readyz")
_SEGMENT = r"[A-Za-z0-9._~!$&'()*+,;=:@-]+"
_METRICS_PATH: Final = re.compile(rf"/({_SEGMENT}(/{_SEGMENT})*/?)?")


def _read_metrics(section: _Section | None) -> MetricsConfig:
    if section is None:
        return MetricsConfig()
    defaults = MetricsConfig()
    metrics = MetricsConfig(
        enabled=section.flag("enabled", defaults.enabled),
        path=section.string("path", defaults.path) or defaults.path,
        require_auth=section.flag("requireAuth", defaults.require_auth),
        stream_usage=section.flag("streamUsage", defaults.stream_usage),
    )
    path = metrics.path
    if not _METRICS_PATH.fullmatch(path) or path.startswith(_RESERVED_PATHS):
        # a query, a fragment or an empty segment is never matched; aiohttp reads braces as a pattern
        section.error(
            "path", f"must be an absolute path of plain segments outside /v1/, /healthz and /readyz, got {path!r}"
        )
    section.finish()
    return metrics


def _read_server(section: _Section | None) -> ServerConfig:
    if section is None:
        return ServerConfig()
    defaults = ServerConfig()
    server = ServerConfig(
        host=section.string("host", defaults.host) or defaults.host,
        port=section.integer("port", defaults.port, maximum=65535),
        max_body_bytes=section.integer("maxBodyBytes", defaults.max_body_bytes, minimum=1),
        max_response_bytes=section.integer("maxResponseBytes", defaults.max_response_bytes, minimum=1),
        body_read_timeout_seconds=section.seconds(
            "bodyReadTimeoutSeconds", defaults.body_read_timeout_seconds, positive=True
        ),
        backlog=section.integer("backlog", defaults.backlog, minimum=1, maximum=65535),
        drain_seconds=section.seconds("drainSeconds", defaults.drain_seconds),
        max_messages=section.integer("maxMessages", defaults.max_messages, minimum=1),
        max_connections=section.integer("maxConnections", defaults.max_connections),
    )
    section.finish()
    return server


def _read_cors(section: _Section | None) -> CorsConfig:
    if section is None:
        return CorsConfig()
    defaults = CorsConfig()
    cors = CorsConfig(
        allow_origins=_read_strings(section, "allowOrigins"),
        allow_headers=tuple(h.lower() for h in _read_strings(section, "allowHeaders")),
        max_age_seconds=section.integer("maxAgeSeconds", defaults.max_age_seconds),
    )
    for i, header in enumerate(cors.allow_headers):
        if header != "*" and not _HEADER_NAME.fullmatch(header):
            # sent back in Access-Control-Allow-Headers, which a control character would break
            section.errors.append(f"{section.at('allowHeaders')}[{i}]: must be '*' or a header name, got {header!r}")
    for i, origin in enumerate(cors.allow_origins):
        try:
            url = URL(origin)
            host = url.host  # decoded when read: a label that is not IDNA raises UnicodeError here
        except ValueError:  # yarl refuses a port out of range, an unclosed IPv6 bracket, 'xn--a', ...
            url, host = URL(), None
        if origin != "*" and (url.scheme not in ("http", "https") or not host or url.path not in ("", "/")):
            section.errors.append(
                f"{section.at('allowOrigins')}[{i}]: must be '*' or an origin like https://app.example.com, got {origin!r}"
            )
    section.finish()
    return cors


def _read_strings(section: _Section, key: str) -> tuple[str, ...]:
    value = section.take(key)
    if value is _MISSING or value is None:
        return ()
    if not isinstance(value, list):
        section.error(key, f"must be a list of strings, got {_kind(value)}")
        return ()
    out: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, str) and item:
            out.append(item.rstrip("/") if item != "*" else item)
        else:
            section.errors.append(f"{section.at(key)}[{i}]: must be a non-empty string, got {_kind(item)}")
    return tuple(out)


def _read_auth(section: _Section | None) -> tuple[ApiKey, ...]:
    if section is None:
        return ()
    keys: list[ApiKey] = []
    for item in section.sections("keys") or []:
        name = item.string("name", required=True)
        # the name is the tenant in memory keys ({tenant:memoryId}); no ':' or braces keeps them unambiguous
        if name is not None and not re.fullmatch(r"[A-Za-z0-9._@-]{1,64}", name):
            item.error("name", f"must be 1-64 letters, digits or ._@- (it names the tenant), got {name[:40]!r}")
        key = item.string("key")
        digest = item.string("keySha256")
        if (key is None) == (digest is None):
            item.errors.append(f"{item.path}: needs exactly one of key or keySha256")
        elif key is not None:
            if not key:
                item.error("key", "must not be empty")
            elif not (key.isascii() and key.isprintable()) or key != key.strip():
                # a Bearer token is printable ASCII without surrounding spaces; any other key could never match
                item.error("key", "must be printable ASCII without leading or trailing spaces")
            else:
                keys.append(ApiKey(name or "", hashlib.sha256(key.encode()).digest()))
        elif digest is not None:
            if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                item.error("keySha256", "must be 64 hex characters (a SHA-256 digest)")
            else:
                keys.append(ApiKey(name or "", bytes.fromhex(digest)))
        item.finish()
    section.finish()
    return tuple(keys)


def _read_memory_settings(section: _Section, base: MemorySettings, *, typed: bool = True) -> MemorySettings:
    memory_type = (section.string("memoryType", base.memory_type) if typed else None) or base.memory_type
    if memory_type not in MEMORY_TYPES:
        section.error("memoryType", f"must be one of {', '.join(MEMORY_TYPES)}, got {memory_type!r}")
        memory_type = base.memory_type
    settings = MemorySettings(
        memory_type=memory_type,
        max_messages=section.integer("maxMessages", base.max_messages, minimum=1),
        max_tokens=section.integer("maxTokens", base.max_tokens, minimum=1),
        max_rounds=section.integer("maxRounds", base.max_rounds, minimum=1),
        max_chars=section.integer("maxChars", base.max_chars, minimum=1),
    )
    section.finish()
    return settings


def _read_memory(section: _Section) -> MemoryConfig:
    base = MemoryConfig()
    store = section.string("store", base.store) or base.store
    if store not in ("sqlite", "memory", "redis"):
        section.error("store", f"must be one of sqlite, memory, redis, got {store!r}")
        store = base.store
    defaults_section = section.section("defaults")
    defaults = base.defaults if defaults_section is None else _read_memory_settings(defaults_section, base.defaults)
    limits_section = section.section("limits")
    limits = base.limits if limits_section is None else _read_memory_settings(limits_section, base.limits, typed=False)
    url = section.string("url")
    if url:  # empty: an unset ${VAR}, already reported
        for problem in redis_url_problems(url):
            section.error("url", problem)
    path = section.string("path", base.path) or base.path
    config = MemoryConfig(
        store=store,
        path=path,
        shown_path=show_references(path, _env_refs(section.data.get("path"))),
        url=url or base.url,
        ttl_seconds=section.seconds("ttlSeconds", base.ttl_seconds, positive=True),
        max_stored_messages=section.integer("maxStoredMessages", base.max_stored_messages, minimum=1),
        lock_timeout_seconds=section.seconds("lockTimeoutSeconds", base.lock_timeout_seconds, positive=True),
        defaults=defaults,
        limits=limits,
    )
    section.finish()
    return config


@dataclass(frozen=True, slots=True)
class _Inherited:
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
    responses_api: str = "native"
    mock: MockOptions = MockOptions()
    provider_params: Mapping[str, tuple[Any, str]] = field(default_factory=dict)  # key → (value, where set)
    # per setting (apiKey, baseUrl, headers.X-Team, overrideParams.user, ...): its values from the
    # environment → their references; a node that sets a setting replaces its entry
    env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # False in a client's inline tree, whose keys and names server.inline holds to stricter rules
    from_file: bool = True


def _read_route(
    name: str, body: Any, parent: str, errors: list[str], memory_defaults: MemorySettings
) -> Route | None:
    path = _join(parent, name)
    if not isinstance(body, dict):
        errors.append(f"{path}: must be a mapping (a target or a strategy node), got {_kind(body)}")
        return None
    section = _Section(body, path, errors)
    memory = memory_defaults
    memory_section = section.section("memory")
    if memory_section is not None:
        memory = _read_memory_settings(memory_section, memory_defaults)
    names: dict[str, str] = {}
    root = _read_node(section, name, _Inherited(), names)
    for node_name, at in names.items():  # an inline tree's names are held to stricter rules (server.inline)
        if not node_name.isprintable():
            errors.append(f"{_join(at, 'name')}: {_NAME_EXPECTED}, got {node_name!r}")
    return None if root is None else Route(name=name, root=root, memory=memory)


def _read_node(section: _Section, position: str, inherited: _Inherited, names: dict[str, str]) -> Node | None:
    """Read a target or strategy node; `position` (e.g. `smart.targets[1]`) is its default name."""
    given = section.data.get("name")
    name = section.string("name", position) or position
    if isinstance(given, _Interpolated) and given.refs:
        # a name is shown in answer headers, metrics labels, logs and /v1/gateway/health
        section.error("name", "must be written out, not taken from the environment (it is shown in headers and metrics)")
    if name in names:
        section.error("name", f"duplicate target name {name!r} (also at {names[name]})")
    names[name] = section.path
    weight = section.number("weight", 1.0)
    inherited = _inherit(section, inherited)
    strategy = section.section("strategy")
    if strategy is None and not section.has("targets"):
        target = _build_target(section, name, weight, inherited)
        section.finish()
        return target

    mode, codes = "single", None
    if strategy is None:
        section.error("strategy", "is required when targets is given (mode: single, fallback or loadbalance)")
    else:
        mode = strategy.string("mode", required=True) or "single"
        if mode not in MODES:
            strategy.error("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        codes = strategy.status_codes("onStatusCodes")
        strategy.finish()
    children: list[Node] = []
    for i, child_section in enumerate(section.sections("targets", required=True) or []):
        child = _read_node(child_section, f"{position}.targets[{i}]", inherited, names)
        if child is not None:
            children.append(child)
    section.finish()
    if mode == "loadbalance" and children and all(c.weight == 0 for c in children):
        section.error("targets", "a loadbalance needs at least one target with weight > 0")
    if mode == "fallback":
        return Fallback(name, weight, tuple(children), codes)
    if mode == "loadbalance":
        return LoadBalance(name, weight, tuple(children), codes)
    return Single(name, weight, tuple(children))


def _inherit(section: _Section, parent: _Inherited) -> _Inherited:
    override = section.mapping("overrideParams") or {}
    headers = section.mapping("headers") or {}
    _check_headers(headers, section.at("headers"), section.errors, strict=parent.from_file)
    retry, mock, breaker = section.section("retry"), section.section("mock"), section.section("breaker")
    responses_api = section.string("responsesApi", parent.responses_api) or parent.responses_api
    if responses_api not in RESPONSES_API_MODES:
        section.error("responsesApi", f"must be native or translate, got {responses_api!r}")
        responses_api = parent.responses_api
    params = section.mapping("providerParams") or {}
    where = section.at("providerParams")
    provider = section.string("provider", parent.provider)
    # providerParams belong to a provider: a node that names another one starts afresh
    inherited_params = parent.provider_params if provider == parent.provider else {}
    api_key = section.string("apiKey", parent.api_key)
    if parent.from_file and api_key is not None and api_key != parent.api_key:
        problem = _header_value_problem(api_key)
        if problem is not None:
            section.error("apiKey", f"{problem} (it is sent in a header)")
    _check_json(override, section.at("overrideParams"), section.errors)
    _check_override_types(override, section.at("overrideParams"), section.errors)
    env = dict(parent.env)
    if provider != parent.provider:  # their values from the environment go with the providerParams
        env = {setting: found for setting, found in env.items() if not setting.startswith("providerParams.")}
    env.update({key: _env_refs(section.data[key]) for key in ("apiKey", "baseUrl") if section.has(key)})
    for setting, values in (("overrideParams", override), ("headers", headers), ("providerParams", params)):
        env.update({f"{setting}.{key}": _env_refs(value) for key, value in values.items()})
    return _Inherited(
        provider=provider,
        api_key=api_key,
        base_url=section.string("baseUrl", parent.base_url),
        override_params={**parent.override_params, **override},
        headers={**parent.headers, **{k: str(v) for k, v in headers.items()}},
        timeout=section.seconds("timeout", parent.timeout, positive=True),
        stream_idle_timeout=section.seconds("streamIdleTimeout", parent.stream_idle_timeout, positive=True),
        retry=parent.retry if retry is None else _read_retry(retry, parent.retry),
        breaker=parent.breaker if breaker is None else _read_breaker(breaker, parent.breaker),
        responses_api=responses_api,
        mock=parent.mock if mock is None else _read_mock(mock, parent.mock),
        provider_params={**inherited_params, **{str(k): (v, where) for k, v in params.items()}},
        env=env,
        from_file=parent.from_file,
    )


def _build_target(section: _Section, name: str, weight: float, inherited: _Inherited) -> Target | None:
    provider = inherited.provider or "openai"  # a bare apiKey target is OpenAI-compatible
    kind = kind_of(provider)
    if kind is None:
        section.error(
            "provider", f"unknown provider {provider!r} (openai, mock, or a provider litellm knows: anthropic, gemini, ...)"
        )
        return None
    params, secrets = _provider_params(kind, inherited.provider_params, section.errors)
    base_url = inherited.base_url or kind.default_base_url
    if base_url:
        problem = _base_url_problem(base_url)
        if problem is not None:
            section.error("baseUrl", problem)
    env_refs = _target_env_refs(inherited.env)
    return Target(
        name=name,
        provider=provider,
        base_url=base_url.rstrip("/"),
        api_key=inherited.api_key or "",
        weight=weight,
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
        env_values=tuple(env_refs),
        env_refs=env_refs,
    )


def _target_env_refs(env: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """A target's values from the environment → their references, longest first, from its settings'."""
    refs: dict[str, str] = {}
    for setting, found in env.items():
        for value, reference in found.items():
            refs.setdefault(value, reference)
            if setting == "baseUrl" and value.rstrip("/") not in ("", value):  # the URL is kept without it
                refs.setdefault(value.rstrip("/"), reference)
    return _longest_first(refs)


def _check_headers(headers: Mapping[str, Any], path: str, errors: list[str], *, strict: bool) -> None:
    """Report each header HTTP cannot carry; not `strict` (an inline tree), only those not strings.

    An inline tree's headers are held to server.inline's stricter rules, with its own messages.
    """
    for key, value in headers.items():
        at = f"{path}.{key}"
        if not isinstance(value, str):
            errors.append(f"{at}: must be a string, got {_kind(value)}")
            continue
        if not strict:
            continue
        if not _HEADER_NAME.fullmatch(key):
            errors.append(f"{at}: not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
        elif key.lower() in _FRAMING_HEADERS:
            errors.append(f"{at}: the HTTP client sets it (it frames the request), a target may not")
        if (problem := _header_value_problem(value)) is not None:
            errors.append(f"{at}: {problem}")


def _base_url_problem(base_url: str) -> str | None:
    """Why requests could never be sent to `base_url`, or None. Never quotes its userinfo."""
    shown = mask_userinfo(base_url)
    try:
        url = URL(base_url)
        host = url.host  # decoded when read: a label that is not IDNA raises UnicodeError here
    except ValueError:  # yarl refuses a port out of range, an unclosed IPv6 bracket, 'xn--a', ...
        return f"must be an http(s) URL, got {shown!r}"
    if url.scheme not in ("http", "https") or not host:
        return f"must be an http(s) URL, got {shown!r}"
    if url.explicit_port == 0:
        return f"port must be between 1 and 65535, got {shown!r}"
    if url.user is not None or url.password is not None:
        # aiohttp would send them as Basic auth, which clashes with the Bearer apiKey (every request
        # fails) and shows them in every URL logged: credentials go in apiKey or headers
        return "must not carry credentials (user:password@): put them in apiKey or headers"
    if url.query_string or url.fragment or "?" in base_url or "#" in base_url:
        return f"must not carry credentials, a query or a fragment: endpoint paths are appended to it, got {shown!r}"
    if any(ch.isspace() or not ch.isprintable() for ch in base_url):
        return f"must not contain spaces or control characters, got {shown!r}"
    return None


_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP field name (RFC 9110 5.6.2)
# Headers the HTTP client writes from the body and the connection: a target's own would break the framing.
_FRAMING_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect"}
)


def _header_value_problem(value: str) -> str | None:
    """Why `value` cannot be an HTTP header value, or None."""
    if any(ch != "\t" and (ord(ch) < 0x20 or ord(ch) == 0x7F) for ch in value):
        return "must not contain control characters (CR, LF, NUL, ...)"
    if not value.isascii():
        # RFC 9110 5.5 leaves other bytes obsolete; httpx-based clients (anthropic, litellm) refuse them
        return "must be ASCII text (header values are)"
    return None


_NUMBER: Final = (int, float)
# Request fields the gateway reads itself (to stream, to count tokens, to translate for other
# providers), with the types of OpenAI's API: an override of another type would break the request
# it merges into. null is the field's default, except for model and messages, which requests need.
_OVERRIDE_TYPES: Final[Mapping[str, tuple[str, tuple[type, ...]]]] = {
    "model": ("a non-empty string", (str,)),
    "messages": ("a non-empty list of messages (mappings with a role)", (list,)),
    "stream": ("true or false", (bool,)),
    "stream_options": ("a mapping", (dict,)),
    "n": ("an integer", (int,)),
    "max_tokens": ("an integer", (int,)),
    "max_completion_tokens": ("an integer", (int,)),
    "temperature": ("a number", _NUMBER),
    "top_p": ("a number", _NUMBER),
    "stop": ("a string or a list of strings", (str, list)),
    "user": ("a string", (str,)),
    "tools": ("a list", (list,)),
    "tool_choice": ("a string or a mapping", (str, dict)),
    "parallel_tool_calls": ("true or false", (bool,)),
    "response_format": ("a mapping", (dict,)),
    "logprobs": ("true or false", (bool,)),
    "metadata": ("a mapping", (dict,)),
}


def _check_override_types(override: Mapping[str, Any], path: str, errors: list[str]) -> None:
    """Report each override of a field the gateway reads whose type OpenAI's API would refuse."""
    for key, value in override.items():
        expected = _OVERRIDE_TYPES.get(key)
        if expected is None or (value is None and key not in ("model", "messages")):
            continue
        wanted, types = expected
        well_typed = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if key == "model":
            well_typed = well_typed and bool(value)
        elif key == "messages":
            well_typed = well_typed and bool(value) and all(
                isinstance(item, dict) and isinstance(item.get("role"), str) for item in value
            )
        elif key == "stop" and isinstance(value, list):
            well_typed = all(isinstance(item, str) for item in value)
        elif key == "stream_options" and well_typed:
            well_typed = isinstance(value.get("include_usage", False), (bool, type(None)))
            wanted = "a mapping whose include_usage is true or false"
        if not well_typed:
            errors.append(f"{_join(path, key)}: must be {wanted}, got {_kind(value)}")


def _check_json(value: Any, path: str, errors: list[str]) -> None:
    """Report each part of `value` that a JSON request body cannot carry."""
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            errors.append(f"{path}: an integer beyond 64 bits cannot be sent in a JSON body")
    elif isinstance(value, float):
        if not math.isfinite(value):
            errors.append(f"{path}: must be a finite number (JSON has no {value!r}), got {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{path}: keys must be strings, got {_kind(key)}")
                continue
            _check_json(item, _join(path, key), errors)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}[{index}]", errors)
    else:  # a date, bytes (!!binary), a set (!!set), ...
        errors.append(f"{path}: must be a JSON value (text, number, boolean, null, list or mapping), got {_kind(value)}")


def _provider_params(
    kind: ProviderKind, given: Mapping[str, tuple[Any, str]], errors: list[str]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`providerParams` checked against the provider's schema, as litellm arguments, and the secrets among them."""
    params: dict[str, Any] = {}
    secrets: list[str] = []
    for key, (value, where) in given.items():
        param = kind.param(_camel(key))
        if param is None:
            expected = ", ".join(p.key for p in kind.params) or "none"
            errors.append(f"{where}.{key}: unknown for provider {kind.name} (expected one of: {expected})")
            continue
        if param.kind is bool and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        elif param.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, param.kind) or (param.kind is not bool and isinstance(value, bool)):
            errors.append(f"{where}.{key}: must be {_TYPE_NAMES[param.kind]}, got {_kind(value)}")
            continue
        params[param.argument] = value
        if param.secret and isinstance(value, str):
            secrets.append(value)
    return params, tuple(secrets)


_TYPE_NAMES: Final[Mapping[type, str]] = {str: "a string", float: "a number", bool: "true or false"}


def _read_retry(section: _Section, base: RetryPolicy) -> RetryPolicy:
    codes = section.status_codes("onStatusCodes")
    policy = RetryPolicy(
        attempts=section.integer("attempts", base.attempts, maximum=10),
        on_status_codes=base.on_status_codes if codes is None else codes,
        backoff_seconds=section.seconds("backoffSeconds", base.backoff_seconds),
        max_backoff_seconds=section.seconds("maxBackoffSeconds", base.max_backoff_seconds),
        max_retry_after_seconds=section.seconds("maxRetryAfterSeconds", base.max_retry_after_seconds),
    )
    section.finish()
    return policy


def _read_breaker(section: _Section, base: BreakerPolicy) -> BreakerPolicy:
    policy = BreakerPolicy(
        enabled=section.flag("enabled", base.enabled),
        failures=section.integer("failures", base.failures, minimum=1),
        failure_rate=section.number("failureRate", base.failure_rate, positive=True),
        min_requests=section.integer("minRequests", base.min_requests, minimum=1),
        window_seconds=section.seconds("windowSeconds", base.window_seconds, positive=True),
        cooldown_seconds=section.seconds("cooldownSeconds", base.cooldown_seconds, positive=True),
        max_cooldown_seconds=section.seconds("maxCooldownSeconds", base.max_cooldown_seconds, positive=True),
    )
    if policy.failure_rate > 1:
        section.error("failureRate", f"must be a fraction between 0 and 1, got {policy.failure_rate:g}")
    if policy.max_cooldown_seconds < policy.cooldown_seconds:
        section.error("maxCooldownSeconds", "must be >= cooldownSeconds")
    section.finish()
    return policy


def _read_mock(section: _Section, base: MockOptions) -> MockOptions:
    options = MockOptions(
        latency=section.seconds("latency", base.latency),
        reply=section.string("reply", base.reply),
        statuses=_read_status_sequence(section, "statuses", base.statuses),
        chunk_size=section.integer("chunkSize", base.chunk_size, minimum=1),
        chunk_delay=section.seconds("chunkDelay", base.chunk_delay),
    )
    section.finish()
    return options


def _read_status_sequence(section: _Section, key: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """An ordered status list (repeats allowed), unlike the trigger sets."""
    value = section.take(key)
    if value is _MISSING or value is None:
        return default
    if not isinstance(value, list):
        section.error(key, f"must be a list of HTTP status codes, got {_kind(value)}")
        return default
    out: list[int] = []
    for i, code in enumerate(value):
        if _is_status(code):
            out.append(code)
        else:
            section.errors.append(f"{section.at(key)}[{i}]: {_STATUS_EXPECTED}, got {_kind(code)}")
    return tuple(out)


_STATUS_EXPECTED: Final = "must be a status code between 100 and 599"


def _is_status(code: Any) -> bool:
    return isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599
