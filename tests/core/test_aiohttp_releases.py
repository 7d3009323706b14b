from __future__ import annotations

import pytest

from gateway.core.aiohttp_releases import SWITCH, VERIFIED_RANGE, internals_for, verified
from gateway.core.internals import Internals, Mode


@pytest.mark.parametrize("version", ["3.14.0", "3.14.3", "3.14.5"])
def test_the_releases_read_against_are_verified(version: str) -> None:
    assert verified(version)


@pytest.mark.parametrize("version", ["3.13.9", "3.14.6", "3.15.0", "3.14.5rc1", "3.14.0.dev0", "4", "x"])
def test_other_versions_and_pre_releases_are_not(version: str) -> None:
    assert not verified(version)


@pytest.mark.parametrize(
    ("version", "setting", "mode"),
    [("3.14.5", None, Mode.PRIVATE), ("3.14.5", " OFF ", Mode.PUBLIC_CHOSEN), ("3.15.0", None, Mode.PUBLIC_UNVERIFIED)],
)
def test_the_internals_are_aiohttp_s_with_its_switch(version: str, setting: str | None, mode: Mode) -> None:
    assert internals_for(version, setting) == Internals("aiohttp", version, "GATEWAY_AIOHTTP_INTERNALS", mode)
    assert SWITCH == "GATEWAY_AIOHTTP_INTERNALS" and VERIFIED_RANGE == "3.14.0 to 3.14.5"
