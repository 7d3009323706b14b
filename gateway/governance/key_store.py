"""Where keys issued through /v1/gateway/keys are kept: the KeyStore protocol, and which store a config has.

A store keeps each key by name, as its SHA-256 digest with its routes, limits and creation time
(stored_keys.encode_key), and a generation number that every change moves on: each process reads
the generation every 0.5 s (governance.key_refresh) and reads the keys again only when it moved.
The limits' store decides which: a SQLite file (limits.path) when limits are local, Redis when they
are counted there. Keys are issued only by admin keys, so with no admin key there is no store.
"""

from __future__ import annotations

from typing import Protocol

from gateway.core.governance import LimitStoreKind
from gateway.core.settings import Config, limit_store
from gateway.governance.key_store_sqlite import SQLiteKeyStore
from gateway.governance.stored_keys import KeyListing, StoredKey


class KeyStore(Protocol):
    """Keys issued at run time, by name; every change moves the generation on.

    Each method raises stored_keys.KeyStoreUnavailable when the store cannot be reached.
    """

    async def create(self, key: StoredKey) -> bool:
        """Keep `key`; False (and nothing changes) when a key of its name is kept already."""
        ...

    async def get(self, name: str) -> StoredKey | None:
        """The key kept as `name`, or None (a record that cannot be read too: see stored_keys.decode_key)."""
        ...

    async def list(self) -> KeyListing:
        """Every key kept, by name, with the names of the records that cannot be read (skipped)."""
        ...

    async def update(self, key: StoredKey) -> bool:
        """Replace the key of `key.name` by `key`; False when there is none."""
        ...

    async def delete(self, name: str) -> bool:
        """Forget the key `name` (it stops working once each process refreshed); False when there is none."""
        ...

    async def generation(self) -> int:
        """The number every change moves on (a store never written: 0)."""
        ...

    async def close(self) -> None:
        """Let go of the file or the connection."""
        ...


def open_key_store(config: Config) -> KeyStore | None:
    """The store of keys issued through the API for `config`; None when it has no admin key (no one may issue one).

    Nothing is connected or opened yet: the first call does that.
    """
    if not config.admin_keys:
        return None
    if limit_store(config) is LimitStoreKind.REDIS:
        # imported here for start-up cost: redis-py loads only for a Redis store
        from gateway.governance.key_store_redis import RedisKeyStore

        return RedisKeyStore(config)
    return SQLiteKeyStore(config.limits.path)
