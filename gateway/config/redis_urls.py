"""Redis URLs checked at load time against what the installed redis-py accepts; Sentinel nodes' addresses."""

from __future__ import annotations

import inspect
import math
import re
from typing import Final
from urllib.parse import parse_qs, urlsplit

from gateway.core.masks import mask_password

# Options of a Redis URL's query that are text to the client (every other one it takes has a parser).
_REDIS_TEXT_OPTIONS: Final = frozenset({"username", "password", "client_name"})


_REDIS_TLS_TEXT_OPTIONS: Final = frozenset({
    "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_password", "ssl_ciphers",
})  # fmt: skip


_REDIS_SECONDS: Final = frozenset({"socket_timeout", "socket_connect_timeout", "timeout"})


def redis_url_problems(url: str) -> list[str]:
    """What keeps the Redis client from using `url`, each a sentence (none: it is usable).

    Scheme, host, port and database are checked here; query options against what the installed
    redis-py takes: its URL parsers (`URL_QUERY_ARGUMENT_PARSERS`) for the connection class the
    scheme picks, or one of a few text options. Last, the client builds (without connecting) a
    connection from it, which catches what the client itself refuses. Messages never show the password.
    """
    # Imported here for start-up cost: only a configuration that names a Redis URL needs the client.
    from redis.asyncio import ConnectionPool
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range or not a number, an unclosed IPv6 bracket
        return [f"cannot be read as a URL ({mask_password(str(exc), url)})"]
    if parts.scheme not in ("redis", "rediss", "unix"):
        return [f"must be a redis://, rediss:// or unix:// URL, got {parts.scheme + '://' if parts.scheme else 'no scheme'}"]
    problems: list[str] = []
    if parts.scheme == "unix":
        if not parts.path:
            problems.append("a unix:// URL needs the socket's path (unix:///run/redis.sock)")
    else:
        if not parts.hostname:
            problems.append("needs a host (redis://host:6379/0)")
        if port == 0:
            problems.append("port must be between 1 and 65535, got 0")
        if parts.path not in ("", "/") and not re.fullmatch(r"/\d+", parts.path):
            # not quoted: an unescaped '/' or '#' in a password would put its rest here
            problems.append("the path must be a database number like /0")
    taken = _redis_options_taken(parts.scheme)
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        value = values[0]
        parser = URL_QUERY_ARGUMENT_PARSERS.get(name)
        if name not in taken:
            problems.append(f"query option {name!r} is not one the Redis client takes ({', '.join(sorted(taken))})")
        elif not value:
            problems.append(f"query option {name!r} needs a value")
        elif name == "client_name" and any(ch.isspace() or not ch.isprintable() for ch in value):
            # sent as CLIENT SETNAME, which Redis refuses with spaces: every command would then fail
            problems.append("query option 'client_name' must not contain spaces or control characters")
        elif name in ("username", "password") and not value.isprintable():
            problems.append(f"query option {name!r} must not contain control characters")
        elif parser is not None:
            try:
                parsed = parser(value)
            except (TypeError, ValueError):
                problems.append(f"query option {name!r}: invalid value {mask_password(value, url)!r}")
                continue
            seconds = name in _REDIS_SECONDS
            if not isinstance(parsed, (int, float)) or isinstance(parsed, bool):
                continue
            if not math.isfinite(parsed) or parsed < 0 or (seconds and parsed == 0):
                wanted = "a positive" if seconds else "a non-negative"
                problems.append(f"query option {name!r}: must be {wanted} number, got {value!r}")
    if problems:
        return problems
    try:
        ConnectionPool.from_url(url).make_connection()  # type: ignore[no-untyped-call]  # unannotated in redis-py
    except Exception as exc:  # whatever else the client refuses (a protocol it does not speak, ...)
        return [f"the Redis client refuses it ({mask_password(str(exc), url)})"]
    return []


def _redis_options_taken(scheme: str) -> frozenset[str]:
    """The query options the installed redis-py takes for a URL of `scheme`."""
    from redis.asyncio import connection  # start-up cost, as above

    chosen = {"unix": connection.UnixDomainSocketConnection, "rediss": connection.SSLConnection}
    connection_class = chosen.get(scheme, connection.Connection)
    accepted: set[str] = set()
    for cls in (*connection_class.__mro__, connection.ConnectionPool):
        init = cls.__dict__.get("__init__")
        if init is not None:
            accepted.update(inspect.signature(init).parameters)
    offered = set(connection.URL_QUERY_ARGUMENT_PARSERS) | _REDIS_TEXT_OPTIONS
    if scheme == "rediss":
        offered |= _REDIS_TLS_TEXT_OPTIONS
    return frozenset(offered & accepted)


def node_problem(node: str) -> str | None:
    """What keeps `node` from being a host:port address (an IPv6 host in brackets), or None."""
    host, colon, port = node.rpartition(":")
    if not colon or not host or host in ("[]",):
        return f"must be host:port, got {node!r}"
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        return f"must be host:port (an IPv6 host in brackets: [::1]:26379), got {node!r}"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"the port must be between 1 and 65535, got {node!r}"
    return None


def node_address(node: str) -> tuple[str, int]:
    """The host and port of a node `node_problem` accepts."""
    host, _, port = node.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)
