"""`gateway memory` on a real Redis Cluster of three primaries: a migrate into it, and an export that scans every primary."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.core.stores import RedisConnection
from gateway.memory.redis import RedisStore
from gateway.memory.redis_history import key_prefix
from tests.support.memory_transfer import fill, held, run_memory, sqlite_store
from tests.support.redis_cluster import Cluster, redis_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def test_a_migrate_into_a_cluster_and_an_export_from_it_take_every_conversation(tmp_path: Path, cluster: Cluster) -> None:
    keys = [("acme", f"c-{index}") for index in range(40)] + [("acme", "meta")]

    async def filled() -> None:
        store = sqlite_store(tmp_path / "a.db")
        await fill(store, tenant="acme", conversations=40)
        await store.close()

    asyncio.run(filled())
    migrated = run_memory("migrate", "--from", f"sqlite:{tmp_path / 'a.db'}", "--to", cluster.url, "--to-cluster")
    assert migrated.returncode == 0, migrated.stderr
    assert len({cluster.owner(f"{key_prefix(key)}:meta") for key in keys}) == 3  # the conversations are on every primary

    exported = run_memory("export", "--store", cluster.url, "--cluster")
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 41 and b"read 41 conversations (160 messages)" in exported.stderr

    async def compared() -> None:
        source = sqlite_store(tmp_path / "a.db")
        target = RedisStore(RedisConnection(url=cluster.url, cluster=True), ttl_seconds=3600, max_messages=1000, lock_timeout=5)
        for key in keys:
            assert await held(target, key) == await held(source, key)
        await source.close()
        await target.close()

    asyncio.run(compared())
