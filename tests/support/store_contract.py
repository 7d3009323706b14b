"""The MemoryStore contract's fixture: `make_store` makes stores of each kind (in-process, SQLite three ways, a real redis-server).

Contract test modules import it by name (pytest finds a fixture among a module's globals).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.memory.redis import RedisStore
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import InProcessStore, MemoryStore
from tests.support.memory_stores import Clock
from tests.support.servers import flush_redis as flush

StoreFactory = Callable[..., MemoryStore]


@pytest.fixture(params=["memory", "sqlite", "sqlite-uncached", "sqlite-shared", "redis"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    stores: list[MemoryStore] = []
    kind = request.param
    url = ""
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        await flush(url)

    def make(*, ttl: float = 3600, cap: int = 1000, lock_timeout: float = 5, clock: Clock | None = None) -> MemoryStore:
        options: dict[str, Any] = {"ttl_seconds": ttl, "max_messages": cap, "lock_timeout": lock_timeout}
        if kind == "redis":
            store: MemoryStore = RedisStore(url, **options)
        elif kind.startswith("sqlite"):
            cache = {"cache_entries": 0} if kind == "sqlite-uncached" else {"shared": True} if kind == "sqlite-shared" else {}
            store = SQLiteStore(str(tmp_path / "db" / "memory.db"), **options, **cache, **({"clock": clock} if clock else {}))
        else:
            store = InProcessStore(**options, **({"clock": clock} if clock else {}))
        stores.append(store)
        return store

    make.kind = kind  # type: ignore[attr-defined]
    make.url = url  # type: ignore[attr-defined]
    yield make
    for store in stores:
        await store.close()


