"""The gateway key check remembers headers that held a valid key, and only those."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.core.errors import AuthenticationError
from gateway.core.settings import ApiKey
from gateway.server import middlewares
from gateway.server.middlewares import Authenticator

KEY = "sk-team-a-0123456789"


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The tokens hashed, in order."""
    seen: list[bytes] = []

    def counting(data: bytes) -> Any:
        seen.append(data)
        return hashlib.sha256(data)

    monkeypatch.setattr(middlewares, "sha256", counting)
    return seen


def authenticator() -> Authenticator:
    return Authenticator([ApiKey(name="team-a", sha256=hashlib.sha256(KEY.encode()).digest())])


def ask(auth: Authenticator, authorization: str) -> str:
    return auth.tenant(
        make_mocked_request("POST", "/v1/chat/completions", headers={"Authorization": authorization})
    )


def test_a_valid_header_is_hashed_once(digests: list[bytes]) -> None:
    auth = authenticator()
    assert [ask(auth, f"Bearer {KEY}") for _ in range(3)] == ["team-a"] * 3
    assert digests == [KEY.encode()]


def test_a_wrong_key_is_checked_every_time_and_never_remembered(digests: list[bytes]) -> None:
    auth = authenticator()
    for _ in range(3):
        with pytest.raises(AuthenticationError):
            ask(auth, "Bearer sk-wrong")
    assert len(digests) == 3
    assert ask(auth, f"Bearer {KEY}") == "team-a"


def test_a_key_spelled_another_way_is_checked_each_time(digests: list[bytes]) -> None:
    """Only the plain spelling is remembered; the others keep their trimming and checks."""
    auth = authenticator()
    assert ask(auth, f"bearer   {KEY} ") == "team-a"
    assert ask(auth, f"bearer   {KEY} ") == "team-a"
    assert len(digests) == 2


def test_the_remembered_headers_are_bounded(digests: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(middlewares, "_KNOWN_HEADERS", 1)
    other = "sk-team-b-9876543210"
    auth = Authenticator(
        [
            ApiKey(name="team-a", sha256=hashlib.sha256(KEY.encode()).digest()),
            ApiKey(name="team-b", sha256=hashlib.sha256(other.encode()).digest()),
        ]
    )
    assert [ask(auth, f"Bearer {KEY}") for _ in range(2)] == ["team-a"] * 2
    assert [ask(auth, f"Bearer {other}") for _ in range(2)] == ["team-b"] * 2
    assert digests == [KEY.encode(), other.encode(), other.encode()]  # the second key found no room
