"""The gateway key check with admin keys and keys issued through the API (the process's snapshot of them)."""

from __future__ import annotations

import hashlib
import logging

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.core.errors import AuthenticationError
from gateway.core.settings import ApiKey
from gateway.governance.stored_keys import (
    KeyStoreUnavailableError,
    StoredKey,
    StoredKeys,
    digest_of,
    snapshot_of,
)
from gateway.server.middlewares import SHARED_TENANT, Authenticator

TEAM_A, ADMIN, ISSUED = "sk-team-a-0123456789", "sk-admin-0123456789", "gk-issued-0123456789"


def api_key(name: str, key: str) -> ApiKey:
    return ApiKey(name=name, sha256=hashlib.sha256(key.encode()).digest())


def ask(auth: Authenticator, authorization: str) -> str:
    return auth.tenant(make_mocked_request("POST", "/v1/chat/completions", headers={"Authorization": authorization}))


def issued(name: str = "team-b", key: str = ISSUED) -> StoredKey:
    return StoredKey(name=name, sha256=digest_of(key))


def refresh(known: StoredKeys, keys: list[StoredKey]) -> None:
    """What the key refresher does on a change: the snapshot's maps replaced whole."""
    fresh = snapshot_of(keys, known.generation + 1)
    known.by_digest, known.by_name, known.generation = fresh.by_digest, fresh.by_name, fresh.generation


def test_an_admin_key_is_a_tenant_and_turns_auth_on_alone() -> None:
    auth = Authenticator([], admin_keys=[api_key("ops", ADMIN)])
    assert ask(auth, f"Bearer {ADMIN}") == "ops" and auth.is_admin("ops")
    with pytest.raises(AuthenticationError):
        ask(auth, "Bearer sk-anything")


def test_only_admin_keys_are_admins() -> None:
    auth = Authenticator([api_key("team-a", TEAM_A)], admin_keys=[api_key("ops", ADMIN)], stored=StoredKeys())
    assert ask(auth, f"Bearer {TEAM_A}") == "team-a" and not auth.is_admin("team-a")


def test_a_stored_key_is_a_tenant_and_turns_auth_on_alone() -> None:
    known = snapshot_of([issued()], 1)
    auth = Authenticator([], stored=known)
    assert ask(auth, f"Bearer {ISSUED}") == "team-b"
    assert ask(auth, f"bearer  {ISSUED} ") == "team-b"
    with pytest.raises(AuthenticationError):
        ask(auth, "Bearer sk-anything")
    assert Authenticator([], stored=StoredKeys()).tenant(make_mocked_request("GET", "/v1/models")) == SHARED_TENANT


def test_a_revoked_key_is_refused_at_the_next_request_after_the_refresh_though_its_header_was_remembered() -> None:
    known = snapshot_of([issued(), issued("team-c", "gk-other-key")], 1)
    auth = Authenticator([api_key("team-a", TEAM_A)], stored=known)
    assert [ask(auth, f"Bearer {ISSUED}") for _ in range(2)] == ["team-b"] * 2
    assert ask(auth, "Bearer gk-other-key") == "team-c"
    refresh(known, [issued("team-c", "gk-other-key")])
    with pytest.raises(AuthenticationError):
        ask(auth, f"Bearer {ISSUED}")
    assert ask(auth, "Bearer gk-other-key") == "team-c"
    assert ask(auth, f"Bearer {TEAM_A}") == "team-a"


def test_a_key_issued_after_start_works_at_once_after_the_refresh() -> None:
    known = StoredKeys()
    auth = Authenticator([api_key("team-a", TEAM_A)], stored=known)
    with pytest.raises(AuthenticationError):
        ask(auth, f"Bearer {ISSUED}")
    refresh(known, [issued()])
    assert ask(auth, f"Bearer {ISSUED}") == "team-b"


@pytest.mark.parametrize("configured", ["keys", "admin_keys"])
def test_an_issued_key_whose_name_the_config_gained_is_no_key_and_is_told_once_a_snapshot(
    configured: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "gateway")
    known = snapshot_of([issued("ops"), issued("team-c", "gk-other-key")], 1)
    names = {configured: [api_key("ops", ADMIN)]}
    auth = Authenticator(names.get("keys", []), admin_keys=names.get("admin_keys", []), stored=known)
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            ask(auth, f"Bearer {ISSUED}")  # the issued key named ops: neither ops' rights nor any tenant's
    assert ask(auth, f"Bearer {ADMIN}") == "ops" and ask(auth, "Bearer gk-other-key") == "team-c"

    def told() -> list[str]:
        return [r.getMessage() for r in caplog.records if "no longer authenticates" in r.getMessage()]

    assert len(told()) == 1 and "'ops'" in told()[0] and ISSUED not in caplog.text
    refresh(known, [issued("ops"), issued("team-c", "gk-other-key")])
    with pytest.raises(AuthenticationError):
        ask(auth, f"Bearer {ISSUED}")
    assert len(told()) == 2  # once for the new snapshot
    refresh(known, [issued("team-c", "gk-other-key")])
    with pytest.raises(AuthenticationError):
        ask(auth, f"Bearer {ISSUED}")
    assert len(told()) == 2


def test_a_key_found_nowhere_before_the_store_was_first_read_is_a_503_and_a_401_after() -> None:
    known = StoredKeys(awaiting_store=True)
    auth = Authenticator([api_key("team-a", TEAM_A)], admin_keys=[api_key("ops", ADMIN)], stored=known)
    assert ask(auth, f"Bearer {TEAM_A}") == "team-a" and ask(auth, f"Bearer {ADMIN}") == "ops"
    with pytest.raises(KeyStoreUnavailableError) as unavailable:
        ask(auth, f"Bearer {ISSUED}")
    assert (unavailable.value.status, unavailable.value.code) == (503, "key_store_unavailable")
    with pytest.raises(AuthenticationError):  # no key at all: no store could make it valid
        ask(auth, "Basic x")
    refresh(known, [issued()])
    known.awaiting_store = False
    assert ask(auth, f"Bearer {ISSUED}") == "team-b"
    with pytest.raises(AuthenticationError):
        ask(auth, "Bearer gk-wrong")
