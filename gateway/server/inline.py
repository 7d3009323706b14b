"""`x-gateway-config`: a route a client names, or a strategy tree it sends, used in place of the model's route.

Off unless `requestConfig.enabled`; off, the header is refused (400), never ignored. A tree is
read like a route of the config file (`read_inline_route`: no `${VAR}` interpolation, so it can
never carry an operator's key), then held to what a client may choose: `openai` targets whose
baseUrl host `requestConfig.allowedHosts` admits (gateway.core.hosts; the addresses a name resolves to
are checked when the target is called, gateway.upstream.guarded) and `mock` targets; at most
MAX_TARGETS targets; no headers that change where or how the request travels; no
`overrideParams` that would redirect the upstream or carry credentials. Trees are cached by
their text in a bounded LRU, so a client repeating one config parses it once.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import orjson
from aiohttp import web
from yarl import URL

from gateway.config.loader import OTHER_ROUTE, ConfigError, read_inline_route
from gateway.core.errors import InvalidRequestError
from gateway.core.hosts import HostPolicy
from gateway.core.memory.settings import MemorySettings
from gateway.core.nesting import nests_deeper
from gateway.core.settings import Config, RequestConfigSettings
from gateway.core.tree import Node, Route, Target
from gateway.server.parsing import is_redirect_field
from gateway.upstream.guarded import INLINE_PROVIDERS

HEADER: Final = "x-gateway-config"
# Metrics label routes and targets from the config only: an inline tree counts under the
# reserved route 'other', its targets under no target, so client-chosen names never become labels.
INLINE_ROUTE: Final = OTHER_ROUTE
CACHE_SIZE: Final = 256
MAX_TARGETS: Final = 16  # one request never fans out to more upstreams than this (retries aside)
MAX_DEPTH: Final = 32  # JSON nesting; the tree reader recurses per level
MAX_LISTED_ERRORS: Final = 10
# Headers that would change where the request goes or how it is framed, not what it says.
FORBIDDEN_HEADERS: Final = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
    "trailer", "expect", "proxy-authorization", "proxy-connection", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
})  # fmt: skip
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP field name (RFC 9110 5.6.2)
_NAME: Final = re.compile(r"[A-Za-z0-9._:@\[\]-]{1,64}")  # names reach x-gateway-target and log lines


def _invalid(message: str, code: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=HEADER, code=code)


def _listed(errors: Sequence[str]) -> str:
    shown = "; ".join(errors[:MAX_LISTED_ERRORS])
    more = len(errors) - MAX_LISTED_ERRORS
    return shown + (f"; and {more} more" if more > 0 else "")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _printable(value: str) -> bool:
    return value.isascii() and value.isprintable()


def _target_refusals(target: Target, path: str, policy: HostPolicy) -> Iterator[str]:
    """What a client may not ask of `target` (at `path` in its tree), each path-qualified."""
    if target.provider not in INLINE_PROVIDERS:
        yield (
            f"{_join(path, 'provider')}: {target.provider!r} is not allowed in {HEADER} "
            "(openai, for any OpenAI-compatible upstream, or mock)"
        )
        return
    if target.provider == "openai":
        url = URL(target.base_url)
        if url.user is not None or url.password is not None or url.query_string or url.fragment:
            yield f"{_join(path, 'baseUrl')}: must not carry credentials, a query or a fragment"
        reason = policy.refuse_host(url.raw_host or "")
        if reason is not None:
            yield f"{_join(path, 'baseUrl')}: {reason}"
    if not _printable(target.api_key):
        yield f"{_join(path, 'apiKey')}: must be printable ASCII"
    for name, value in target.headers.items():
        at = f"{_join(path, 'headers')}.{name}"
        if not _TOKEN.fullmatch(name) or name.lower() in FORBIDDEN_HEADERS:
            yield f"{at}: not a header a client may set"
        elif not _printable(value):
            yield f"{at}: must be printable ASCII"
    for key in target.override_params:
        if is_redirect_field(key):
            yield f"{_join(path, 'overrideParams')}.{key}: not allowed (it would redirect the upstream or carry credentials)"


def _refusals(node: Node, path: str, policy: HostPolicy) -> Iterator[str]:
    if not _NAME.fullmatch(node.name):
        yield f"{_join(path, 'name')}: must be 1-64 letters, digits or ._:@[]-"
    if isinstance(node, Target):
        yield from _target_refusals(node, path, policy)
        return
    for index, child in enumerate(node.children):
        yield from _refusals(child, _join(path, f"targets[{index}]"), policy)


def _count_targets(node: Node) -> int:
    return 1 if isinstance(node, Target) else sum(_count_targets(child) for child in node.children)


def read_tree(text: str, policy: HostPolicy) -> Node:
    """The strategy tree in `text`, checked against `policy`; a 400 listing every problem otherwise."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise _invalid(f"{HEADER} is not valid JSON ({exc}).", "invalid_config") from None
    if nests_deeper(data, MAX_DEPTH):
        raise _invalid(f"{HEADER}: the tree nests deeper than {MAX_DEPTH} levels.", "invalid_config")
    try:
        root = read_inline_route(data, name="inline", memory=MemorySettings()).root
    except ConfigError as exc:
        raise _invalid(f"{HEADER} is not a valid strategy tree: {_listed(exc.errors)}", "invalid_config") from None
    if _count_targets(root) > MAX_TARGETS:
        raise _invalid(f"{HEADER}: a tree may have at most {MAX_TARGETS} targets.", "config_not_allowed")
    refusals = list(_refusals(root, "", policy))
    if refusals:
        raise _invalid(f"{HEADER} asks for what this gateway does not allow: {_listed(refusals)}", "config_not_allowed")
    return root


class InlineConfigs:
    """The trees clients sent, read once per distinct text and kept in an LRU of `size`."""

    def __init__(self, settings: RequestConfigSettings, *, size: int = CACHE_SIZE) -> None:
        self.enabled = settings.enabled
        self.policy = HostPolicy.parse(settings.allowed_hosts)
        self.size = size
        self.parses = 0  # trees read so far: a repeated text is not read again
        self._trees: OrderedDict[str, Node] = OrderedDict()

    def __len__(self) -> int:
        return len(self._trees)

    def tree(self, text: str) -> Node:
        root = self._trees.get(text)
        if root is not None:
            self._trees.move_to_end(text)
            return root
        self.parses += 1
        root = self._trees[text] = read_tree(text, self.policy)
        if len(self._trees) > self.size:
            self._trees.popitem(last=False)
        return root


INLINE_CONFIGS: Final = web.AppKey("inline_configs", InlineConfigs)


def route_from_header(values: Sequence[str], config: Config, *, configs: InlineConfigs | None, model: str) -> Route:
    """The route the `x-gateway-config` header asks for, in place of `model`'s; a 400 when it may not.

    A value that starts with `{` is a tree, anything else a route name. A tree keeps the memory
    settings of the route `model` names, or the config's memory defaults.
    """
    if configs is None or not configs.enabled:
        raise _invalid(
            f"The {HEADER} header is not enabled on this gateway (requestConfig.enabled is false); send the request without it.",
            "request_config_disabled",
        )
    if len(values) != 1:
        raise _invalid(f"The {HEADER} header must be given once, got {len(values)}.", "invalid_config")
    text = values[0].strip()
    if not text:
        raise _invalid(f"The {HEADER} header must be a route name or a JSON strategy tree, got an empty value.", "invalid_config")
    if not text.startswith("{"):
        return _named_route(config.routes, text)
    named = config.routes.get(model)
    memory = named.memory if named is not None else config.memory.defaults
    return Route(name=INLINE_ROUTE, root=configs.tree(text), memory=memory)


def _named_route(routes: Mapping[str, Route], name: str) -> Route:
    route = routes.get(name)
    if route is None:
        shown = name if len(name) <= 64 else name[:64] + "..."
        raise _invalid(
            f"{HEADER} names no route of this gateway: {shown!r} (routes: {', '.join(routes)}); "
            "send a route name or a JSON strategy tree.",
            "unknown_route",
        )
    return route
