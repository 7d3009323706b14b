"""Gateway keys issued at run time (POST /v1/gateway/keys): kept in the limits' store, seen by every process.

Each process holds a snapshot of the stored keys, refreshed within a second of a change made by any
process or replica (a generation number read every 0.5 s); the authenticator and the governor
read the snapshot, never the store, on the request path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.core.governance import RateLimits


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
