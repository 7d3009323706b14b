"""Gateway keys issued at run time (POST /v1/gateway/keys): kept in the limits' store, seen by every process.

Each process holds a snapshot of the stored keys, refreshed within a second of a change made by any
process or replica (a generation number read every 0.5 s); the authenticator and the governor
read the snapshot, never the store, on the request path. A store keeps a key as `encode_key`
writes it: its SHA-256 digest, never the key, with its routes, limits and creation time.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from gateway.core.governance import Budget, BudgetPeriod, RateLimits

KEY_PREFIX: Final = "gk-"
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
    """The stored keys this process knows now, by digest and by name; replaced whole on each refresh."""

    by_digest: Mapping[bytes, StoredKey] = field(default_factory=dict)
    by_name: Mapping[str, StoredKey] = field(default_factory=dict)
    generation: int = 0


class KeyStoreUnavailable(Exception):
    """A key store could not be read or written (unreachable, a file it cannot open): the message says why."""


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


def limits_of(shown: Mapping[str, Any]) -> RateLimits:
    """The limits `limits_json` wrote (trusted: checked before they were written)."""
    budget = shown.get("budget")
    return RateLimits(
        requests_per_minute=shown.get("requestsPerMinute"),
        tokens_per_minute=shown.get("tokensPerMinute"),
        concurrent_requests=shown.get("concurrentRequests"),
        budget=None if budget is None else Budget(usd=float(budget["usd"]), period=BudgetPeriod(budget["period"])),
    )


def encode_key(key: StoredKey) -> bytes:
    """`key` as a store keeps it beside its name: JSON of its digest (hex), routes, limits and creation time."""
    return orjson.dumps({
        "sha256": key.sha256.hex(),
        "routes": None if key.routes is None else sorted(key.routes),
        "limits": None if key.limits is None else limits_json(key.limits),
        "created_at": key.created_at,
    })  # fmt: skip


def decode_key(name: str, stored: bytes | str) -> StoredKey:
    """The key `name` that a store kept as `stored` (from encode_key)."""
    fields = orjson.loads(stored)
    routes, limits = fields["routes"], fields["limits"]
    return StoredKey(
        name=name,
        sha256=bytes.fromhex(fields["sha256"]),
        routes=None if routes is None else frozenset(routes),
        limits=None if limits is None else limits_of(limits),
        created_at=int(fields["created_at"]),
    )


def snapshot_of(keys: list[StoredKey], generation: int) -> StoredKeys:
    """A snapshot of `keys` as of `generation`, with maps of its own."""
    return StoredKeys(
        by_digest={key.sha256: key for key in keys}, by_name={key.name: key for key in keys}, generation=generation
    )
