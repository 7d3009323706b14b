"""The Redis memory store as its tests make it, and the entries they store."""

from __future__ import annotations

from typing import Any

from gateway.core.memory.entries import Entry
from gateway.memory.redis import RedisStore


def entry(role: str, text: str) -> Entry:
    return Entry({"role": role, "content": text}, {"o200k_base": 3})


def redis_store(url: str, **options: Any) -> RedisStore:
    settings: dict[str, Any] = {"ttl_seconds": 60, "max_messages": 100, "lock_timeout": 5, **options}
    return RedisStore(url, **settings)
