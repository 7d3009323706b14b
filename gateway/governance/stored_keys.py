"""Gateway keys issued at run time (POST /v1/gateway/keys): kept in the limits' store, seen by every process.

Each process holds a snapshot of the stored keys, refreshed within a second of a change made by any
process or replica (a generation number read every 0.5 s); the authenticator and the governor
read the snapshot, never the store, on the request path. A store keeps a key as `encode_key`
writes it: its SHA-256 digest, never the key, with its routes, limits and creation time. A record
`decode_key` cannot read (written by hand, or by a newer version) is skipped where keys are listed,
never the end of a listing.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from pydantic import ValidationError

from gateway.config.access import rate_limits
from gateway.config.governance import KeyLimits
from gateway.core.errors import GatewayError
from gateway.core.governance import RateLimits

KEY_PREFIX: Final = "gk-"
_RECORD_FIELDS: Final = frozenset({"sha256", "routes", "limits", "created_at"})
_DIGEST_HEX: Final = 64
# A limit's field in the API's and the stored JSON, as the config spells it.
_LIMIT_FIELDS: Final = {
    "requestsPerMinute": "requests_per_minute",
    "tokensPerMinute": "tokens_per_minute",
    "concurrentRequests": "concurrent_requests",
}


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A key issued through the API: kept as its SHA-256 digest, never as the key."""

    name: str
    sha256: bytes = field(repr=False)
    routes: frozenset[str] | None = None
    limits: RateLimits | None = None
    created_at: int = 0


@dataclass(slots=True)
class StoredKeys:
    """The stored keys this process knows now, by digest and by name; replaced whole on each refresh.

    `awaiting_store`: a store keeps keys this snapshot has not read yet (from the key refresher's
    creation to its first read), so a key it lacks may be a valid one.
    """

    by_digest: Mapping[bytes, StoredKey] = field(default_factory=dict)
    by_name: Mapping[str, StoredKey] = field(default_factory=dict)
    generation: int = 0
    awaiting_store: bool = False


@dataclass(frozen=True, slots=True)
class KeyListing:
    """Every key a store keeps that can be read, by name, and why each record that cannot be read was skipped (by name)."""

    keys: list[StoredKey]
    unreadable: dict[str, str] = field(default_factory=dict)


class KeyStoreUnavailable(Exception):
    """A key store could not be read or written (unreachable, a file it cannot open): the message says why."""


class UnreadableKey(Exception):
    """A record of a store that is no key as encode_key writes one (not JSON, another format): the message says why."""


class KeyStoreUnavailableError(GatewayError):
    """The key store cannot answer: for the keys API, or for a key the process could not look up yet."""

    status = 503
    type = "server_error"
    code = "key_store_unavailable"


def new_key() -> str:
    """A new gateway key: "gk-" and 32 random bytes, URL-safe base64."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def digest_of(key: str) -> bytes:
    """The SHA-256 digest a key is kept and looked up by."""
    return hashlib.sha256(key.encode()).digest()


def limits_json(limits: RateLimits) -> dict[str, Any]:
    """`limits` as the config writes them (camelCase), those not set left out."""
    shown: dict[str, Any] = {}
    for name, attribute in _LIMIT_FIELDS.items():
        value = getattr(limits, attribute)
        if value is not None:
            shown[name] = value
    if limits.budget is not None:
        shown["budget"] = {"usd": limits.budget.usd, "period": limits.budget.period.value}
    return shown


def limits_of(shown: Any) -> RateLimits:
    """The limits `shown` as the config writes them (a key's `limits`), checked as the config checks them.

    Raises pydantic's ValidationError, each error worded as the config's problems are.
    """
    return rate_limits(KeyLimits.model_validate(shown))


def encode_key(key: StoredKey) -> bytes:
    """`key` as a store keeps it beside its name: JSON of its digest (hex), routes, limits and creation time."""
    return orjson.dumps({
        "sha256": key.sha256.hex(),
        "routes": None if key.routes is None else sorted(key.routes),
        "limits": None if key.limits is None else limits_json(key.limits),
        "created_at": key.created_at,
    })  # fmt: skip


def decode_key(name: str, stored: bytes | str) -> StoredKey:
    """The key `name` that a store kept as `stored` (from encode_key); UnreadableKey when it is no such record."""
    try:
        fields = orjson.loads(stored)
    except orjson.JSONDecodeError as exc:
        raise UnreadableKey(f"not JSON ({exc})") from None
    if not isinstance(fields, dict) or fields.keys() != _RECORD_FIELDS:
        raise UnreadableKey(f"not a record of {', '.join(sorted(_RECORD_FIELDS))}")
    digest, routes, limits, created_at = fields["sha256"], fields["routes"], fields["limits"], fields["created_at"]
    if not (isinstance(digest, str) and len(digest) == _DIGEST_HEX and _is_hex(digest)):
        raise UnreadableKey("sha256 is not a SHA-256 digest in hex")
    if routes is not None and not (isinstance(routes, list) and all(isinstance(route, str) for route in routes)):
        raise UnreadableKey("routes is not a list of names")
    if isinstance(created_at, bool) or not isinstance(created_at, int):
        raise UnreadableKey("created_at is not an integer")
    try:
        read_limits = None if limits is None else limits_of(limits)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UnreadableKey(f"limits.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return StoredKey(
        name=name,
        sha256=bytes.fromhex(digest),
        routes=None if routes is None else frozenset(routes),
        limits=read_limits,
        created_at=created_at,
    )


def readable_key(name: str, stored: bytes | str) -> StoredKey | None:
    """The key `name` kept as `stored`, or None when decode_key cannot read it (as when listed, it is no key)."""
    try:
        return decode_key(name, stored)
    except UnreadableKey:
        return None


def listing_of(records: Iterable[tuple[str | bytes, bytes | str]]) -> KeyListing:
    """The keys of a store's (name, record) pairs, by name; a record decode_key cannot read is skipped, and why kept."""
    keys: list[StoredKey] = []
    unreadable: dict[str, str] = {}
    for raw_name, record in records:
        try:
            name = raw_name.decode() if isinstance(raw_name, bytes) else raw_name
        except UnicodeDecodeError:
            unreadable[repr(raw_name)] = "its name is not UTF-8"
            continue
        try:
            keys.append(decode_key(name, record))
        except UnreadableKey as exc:
            unreadable[name] = str(exc)
    keys.sort(key=lambda key: key.name)
    return KeyListing(keys, unreadable)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def snapshot_of(keys: list[StoredKey], generation: int) -> StoredKeys:
    """A snapshot of `keys` as of `generation`, with maps of its own."""
    return StoredKeys(
        by_digest={key.sha256: key for key in keys}, by_name={key.name: key for key in keys}, generation=generation
    )
