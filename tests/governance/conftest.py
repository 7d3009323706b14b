"""Fixtures of the governance layer's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from tests.support.servers import flush_redis


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client of the session's Redis, emptied."""
    await flush_redis(redis_url)
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()
