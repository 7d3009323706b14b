"""gateway.server.app: the memory store a config opens, and what create_app says of a config as it builds the gateway.

The routes it adds are exercised by every end to end file; its reload half (reloaded_app,
commit_reload) by tests/cli/test_reload.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.config.loader import parse_config
from gateway.memory.redis import RedisStore
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import InProcessStore
from gateway.server.app import commit_reload, create_app, open_store
from tests.support.gateway import KEYS

ROUTES = "routes: {m: {provider: mock}}"


@pytest.mark.parametrize(
    ("memory", "kind"),
    [("{store: memory}", InProcessStore), ("{store: sqlite, path: PATH}", SQLiteStore),
     ('{store: redis, url: "redis://127.0.0.1:1/0"}', RedisStore)],
    ids=["memory", "sqlite", "redis"],
)  # fmt: skip
async def test_the_configured_store_is_opened(memory: str, kind: type, tmp_path: Path) -> None:
    config = parse_config(f"memory: {memory.replace('PATH', str(tmp_path / 'm.db'))}\n{ROUTES}", env={})
    store = open_store(config.memory)
    try:
        assert type(store) is kind
    finally:
        await store.close()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gateway" and r.levelno == logging.WARNING]


ADMIN_KEYS = "auth: {adminKeys: [{name: root, key: admin-key}]}"


@pytest.mark.parametrize(("auth", "open_"), [("", True), (KEYS, False), (ADMIN_KEYS, False)], ids=["no-keys", "keys", "admin-keys"])
def test_a_gateway_without_keys_is_said_to_be_open(auth: str, open_: bool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway"):
        create_app(parse_config(f"{auth}\n{ROUTES}", env={}))
    said = [m for m in warnings(caplog) if "open to anyone" in m]
    assert said == (["auth.keys is empty: the gateway is open to anyone who can reach it"] if open_ else [])


@pytest.mark.parametrize(("store", "processes", "said"), [("memory", 2, True), ("memory", 1, False), ("sqlite", 2, False)])
def test_in_process_memory_across_processes_is_said_once_at_start(
    store: str, processes: int, said: bool, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = f", path: {tmp_path / 'm.db'}" if store == "sqlite" else ""
    config = parse_config(f"{KEYS}\nmemory: {{store: {store}{path}}}\n{ROUTES}", env={})
    with caplog.at_level(logging.WARNING, logger="gateway"):
        create_app(config, processes=processes)
    expected = [f"memory.store memory with {processes} processes: each process keeps its own conversations; "
                "use sqlite or redis to share them"]  # fmt: skip
    told = [m for m in warnings(caplog) if m.startswith("memory.store")]  # other start-up warnings aside
    assert told == (expected if said else [])


@pytest.mark.parametrize(("before", "said"), [(ADMIN_KEYS, True), ("", False)], ids=["admin-keys", "open"])
def test_a_reload_that_opens_the_gateway_says_so_once(before: str, said: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Admin keys alone turn auth on: a reload that drops them opens the gateway (an open one reloaded open is not news)."""
    replaced = create_app(parse_config(f"{before}\n{ROUTES}", env={}))
    app = create_app(parse_config(ROUTES, env={}))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gateway"):
        commit_reload(app, replaced)
    assert [m for m in warnings(caplog) if "open to anyone" in m] == (
        ["auth.keys is empty: the gateway is open to anyone who can reach it"] if said else []
    )
