from __future__ import annotations

import pytest

from gateway.core.aiohttp_releases import switched_off, verified


@pytest.mark.parametrize("version", ["3.14.0", "3.14.3", "3.14.5"])
def test_the_releases_read_against_are_verified(version: str) -> None:
    assert verified(version)


@pytest.mark.parametrize("version", ["3.13.9", "3.14.6", "3.15.0", "3.14.5rc1", "3.14.0.dev0", "4", "x"])
def test_other_versions_and_pre_releases_are_not(version: str) -> None:
    assert not verified(version)


@pytest.mark.parametrize(("setting", "off"), [(None, False), ("", False), ("on", False), ("off", True), (" OFF ", True)])
def test_only_off_switches_the_private_parts_off(setting: str | None, off: bool) -> None:
    assert switched_off(setting) is off
