"""What a value of the right type may still not be: URLs requests could never use, headers HTTP
cannot carry, override params a JSON body cannot carry or OpenAI's API would refuse, names that
cannot go out in a response header. Each check names the problem, or returns None.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from yarl import URL

from gateway.config.problems import Loc, Problems, describe
from gateway.config.section import camel
from gateway.core.hosts import entry_problem
from gateway.core.kinds import ProviderKind
from gateway.core.masks import mask_userinfo

HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP field name (RFC 9110 5.6.2)
# Headers the HTTP client writes from the body and the connection: a target's own would break the framing.
_FRAMING_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect"}
)
# names go out in the x-gateway-route and x-gateway-target headers and in log lines
NAME_EXPECTED: Final = "must be printable text, without control characters (it is sent in a response header)"
_RESERVED_PATHS: Final = ("/v1/", "/healthz", "/readyz")
_SEGMENT: Final = r"[A-Za-z0-9._~!$&'()*+,;=:@-]+"
_METRICS_PATH: Final = re.compile(rf"/({_SEGMENT}(/{_SEGMENT})*/?)?")


def base_url_problem(base_url: str) -> str | None:
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


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be an HTTP header value, or None."""
    if any(ch != "\t" and (ord(ch) < 0x20 or ord(ch) == 0x7F) for ch in value):
        return "must not contain control characters (CR, LF, NUL, ...)"
    if not value.isascii():
        # RFC 9110 5.5 leaves other bytes obsolete; httpx-based clients (anthropic, litellm) refuse them
        return "must be ASCII text (header values are)"
    return None


def check_headers(headers: Mapping[str, str], loc: Loc, problems: Problems) -> None:
    """Report each header of a config file's target that HTTP cannot carry.

    An inline tree's headers are held to server.inline's stricter rules, with its own messages.
    """
    for key, value in headers.items():
        if not HEADER_NAME.fullmatch(key):
            problems.add((*loc, key), "not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
        elif key.lower() in _FRAMING_HEADERS:
            problems.add((*loc, key), "the HTTP client sets it (it frames the request), a target may not")
        if (problem := header_value_problem(value)) is not None:
            problems.add((*loc, key), problem)


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


def check_override_types(override: Mapping[str, Any], loc: Loc, problems: Problems) -> None:
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
            well_typed = (
                well_typed
                and bool(value)
                and all(isinstance(item, dict) and isinstance(item.get("role"), str) for item in value)
            )
        elif key == "stop" and isinstance(value, list):
            well_typed = all(isinstance(item, str) for item in value)
        elif key == "stream_options" and well_typed:
            well_typed = isinstance(value.get("include_usage", False), (bool, type(None)))
            wanted = "a mapping whose include_usage is true or false"
        if not well_typed:
            problems.add((*loc, key), f"must be {wanted}, got {describe(value)}")


def check_json(value: Any, loc: Loc, problems: Problems) -> None:
    """Report each part of `value` that a JSON request body cannot carry."""
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            problems.add(loc, "an integer beyond 64 bits cannot be sent in a JSON body")
    elif isinstance(value, float):
        if not math.isfinite(value):
            problems.add(loc, f"must be a finite number (JSON has no {value!r}), got {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                problems.add(loc, f"keys must be strings, got {describe(key)}")
                continue
            check_json(item, (*loc, key), problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_json(item, (*loc, index), problems)
    else:  # a date, bytes (!!binary), a set (!!set), ...
        problems.add(
            loc, f"must be a JSON value (text, number, boolean, null, list or mapping), got {describe(value)}"
        )


_TYPE_NAMES: Final[Mapping[type, str]] = {str: "a string", float: "a number", bool: "true or false"}


def provider_params(
    kind: ProviderKind, given: Mapping[str, tuple[Any, Loc]], problems: Problems
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`providerParams` (each with where it was set) checked against the provider's, as litellm arguments, and the secrets among them."""
    params: dict[str, Any] = {}
    secrets: list[str] = []
    for key, (value, where) in given.items():
        param = kind.param(camel(key))
        if param is None:
            expected = ", ".join(p.key for p in kind.params) or "none"
            problems.add((*where, key), f"unknown for provider {kind.name} (expected one of: {expected})")
            continue
        if param.kind is bool and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        elif param.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, param.kind) or (param.kind is not bool and isinstance(value, bool)):
            problems.add((*where, key), f"must be {_TYPE_NAMES[param.kind]}, got {describe(value)}")
            continue
        params[param.argument] = value
        if param.secret and isinstance(value, str):
            secrets.append(value)
    return params, tuple(secrets)


def metrics_path_problem(path: str) -> str | None:
    # a query, a fragment or an empty segment is never matched; aiohttp reads braces as a pattern
    if not _METRICS_PATH.fullmatch(path) or path.startswith(_RESERVED_PATHS):
        return f"must be an absolute path of plain segments outside /v1/, /healthz and /readyz, got {path!r}"
    return None


def cors_header_problem(header: str) -> str | None:
    # sent back in Access-Control-Allow-Headers, which a control character would break
    header = listed(header).lower()
    if header != "*" and not HEADER_NAME.fullmatch(header):
        return f"must be '*' or a header name, got {header!r}"
    return None


def cors_origin_problem(origin: str) -> str | None:
    origin = listed(origin)
    try:
        url = URL(origin)
        host = url.host  # decoded when read: a label that is not IDNA raises UnicodeError here
    except ValueError:  # yarl refuses a port out of range, an unclosed IPv6 bracket, 'xn--a', ...
        url, host = URL(), None
    if origin != "*" and (url.scheme not in ("http", "https") or not host or url.path not in ("", "/")):
        return f"must be '*' or an origin like https://app.example.com, got {origin!r}"
    return None


def allowed_host_problem(entry: str) -> str | None:
    return entry_problem(listed(entry).lower())


def listed(entry: str) -> str:
    """An entry of allowOrigins, allowHeaders or allowedHosts as it is kept: without trailing slashes."""
    return entry.rstrip("/") if entry != "*" else entry


def tenant_problem(name: str) -> str | None:
    # the name is the tenant in memory keys ({tenant:memoryId}); no ':' or braces keeps them unambiguous
    if not re.fullmatch(r"[A-Za-z0-9._@-]{1,64}", name):
        return f"must be 1-64 letters, digits or ._@- (it names the tenant), got {name[:40]!r}"
    return None


def gateway_key_problem(key: str) -> str | None:
    if not key:
        return "must not be empty"
    if not (key.isascii() and key.isprintable()) or key != key.strip():
        # a Bearer token is printable ASCII without surrounding spaces; any other key could never match
        return "must be printable ASCII without leading or trailing spaces"
    return None


def digest_problem(digest: str) -> str | None:
    if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
        return "must be 64 hex characters (a SHA-256 digest)"
    return None
