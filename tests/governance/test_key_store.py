"""Which key store a config has: none without admin keys, else the limits' store (SQLite file or Redis)."""

from __future__ import annotations

from pathlib import Path

from gateway.config.loader import parse_config
from gateway.core.governance import LimitStoreKind
from gateway.core.settings import Config, limit_store
from gateway.governance.key_store import open_key_store
from gateway.governance.key_store_redis import RedisKeyStore
from gateway.governance.key_store_sqlite import SQLiteKeyStore

ADMIN = "auth: {adminKeys: [{name: ops, key: admin-key}]}\n"
ROUTES = "routes: {m: {provider: mock}}\n"


def config(text: str) -> Config:
    return parse_config(text + ROUTES, env={})


def test_no_admin_key_no_store() -> None:
    assert open_key_store(config("auth: {keys: [{name: team-a, key: k}]}\n")) is None


def test_local_limits_keep_keys_in_the_sqlite_file_of_limits_path(tmp_path: Path) -> None:
    store = open_key_store(config(f"{ADMIN}limits: {{store: local, path: '{tmp_path / 'k.db'}'}}\n"))
    assert isinstance(store, SQLiteKeyStore) and store.path == str(tmp_path / "k.db")
    assert not (tmp_path / "k.db").exists()  # opened at the first call


def test_redis_limits_keep_keys_in_redis() -> None:
    assert isinstance(open_key_store(config(f"{ADMIN}limits: {{store: redis, url: 'redis://127.0.0.1:1/0'}}\n")), RedisKeyStore)


def test_the_store_follows_memory_when_limits_name_none() -> None:
    assert limit_store(config(ADMIN)) == LimitStoreKind.LOCAL
    assert limit_store(config(f"{ADMIN}memory: {{store: redis, url: 'redis://127.0.0.1:1/0'}}\n")) == LimitStoreKind.REDIS
    assert limit_store(config(f"{ADMIN}memory: {{store: redis, url: 'redis://127.0.0.1:1/0'}}\nlimits: {{store: local}}\n")) == LimitStoreKind.LOCAL
