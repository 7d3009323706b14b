"""Keys across config changes: an issued key whose name the config later gains (a reload, a restart) is no key and DELETE removes it; admin keys a reload adds manage keys."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.governance.key_store_sqlite import SQLiteKeyStore
from gateway.governance.stored_keys import StoredKey, digest_of
from tests.support.key_admin import ADMIN, ADMIN_KEY, TEAM_A, admin_config, call, start_replica
from tests.support.reloading import reloadable
from tests.support.waiting import eventually

ISSUED = "gk-issued-before-the-config-had-its-name"


def config_text(tmp_path: Path, *, admins: str) -> str:
    return (
        f"auth: {{keys: [{{name: team-a, key: sk-team-a-0123}}], adminKeys: [{admins}]}}\n"
        f"limits: {{store: local, path: '{tmp_path / 'keys.db'}'}}\nroutes: {{m: {{provider: mock}}}}\n"
    )


async def status_of(base: str, method: str, path: str, key: str, **options: Any) -> int:
    status, _ = await call(base, method, path, headers={"Authorization": f"Bearer {key}"}, **options)
    return status


async def test_an_issued_key_gains_no_admin_rights_when_a_reload_makes_its_name_an_admin_key(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "gateway")
    path = tmp_path / "gateway.yaml"
    path.write_text(config_text(tmp_path, admins=f"{{name: ops, key: {ADMIN_KEY}}}"))
    reloader, url = await reloadable(aiohttp_server, path)
    base = url.rstrip("/")
    status, issued = await call(base, "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "ops2"})
    assert status == 201
    key = issued["key"]
    await eventually(lambda: _answers(base, key, 403), what="the issued key known (no admin: 403 on the keys API)")

    path.write_text(config_text(tmp_path, admins=f"{{name: ops, key: {ADMIN_KEY}}}, {{name: ops2, key: sk-ops2-new}}"))
    assert await reloader.reload()
    assert await status_of(base, "GET", "/v1/gateway/keys", key) == 401
    assert await status_of(base, "POST", "/v1/gateway/keys", key, json={"name": "minted"}) == 401
    assert await status_of(base, "GET", "/v1/gateway/keys", "sk-ops2-new") == 200  # the configured ops2
    assert "'ops2'" in caplog.text and key not in caplog.text

    deleted = await call(base, "DELETE", "/v1/gateway/keys/ops2", headers=ADMIN)
    assert deleted == (200, {"object": "gateway.key.deleted", "name": "ops2", "deleted": True})
    assert (await call(base, "DELETE", "/v1/gateway/keys/ops2", headers=ADMIN))[1]["error"]["code"] == "key_in_config"
    assert await status_of(base, "GET", "/v1/gateway/keys", "sk-ops2-new") == 200


async def test_a_restart_with_the_name_configured_ignores_the_issued_key_and_delete_removes_only_it(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    store = SQLiteKeyStore(str(tmp_path / "keys.db"))
    assert await store.create(StoredKey(name="team-a", sha256=digest_of(ISSUED), created_at=1))
    await store.close()
    base = await start_replica(aiohttp_server, admin_config(f"{{store: local, path: '{tmp_path / 'keys.db'}'}}"))
    assert await status_of(base, "GET", "/v1/models", ISSUED) == 401
    assert (await call(base, "GET", "/v1/models", headers=TEAM_A))[0] == 200
    assert (await call(base, "DELETE", "/v1/gateway/keys/team-a", headers=ADMIN))[0] == 200
    reopened = SQLiteKeyStore(str(tmp_path / "keys.db"))
    assert (await reopened.list()).keys == []
    await reopened.close()
    assert (await call(base, "GET", "/v1/models", headers=TEAM_A))[0] == 200
    answer = await call(base, "DELETE", "/v1/gateway/keys/team-a", headers=ADMIN)
    assert (answer[0], answer[1]["error"]["code"]) == (409, "key_in_config")


async def _answers(base: str, key: str, status: int) -> bool:
    return await status_of(base, "GET", "/v1/gateway/keys", key) == status


async def test_admin_keys_a_reload_adds_manage_keys_at_once(aiohttp_server: Any, tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config_text(tmp_path, admins="").replace(", adminKeys: []", ""))
    reloader, url = await reloadable(aiohttp_server, path)
    path.write_text(config_text(tmp_path, admins=f"{{name: ops, key: {ADMIN_KEY}}}"))
    assert await reloader.reload()
    assert (await call(url.rstrip("/"), "POST", "/v1/gateway/keys", headers=ADMIN, json={"name": "team-c"}))[0] == 201
