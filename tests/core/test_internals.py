"""gateway.core.internals: the mode a module of private names takes, from its release check and its switch, and its one announcement."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from gateway.core.internals import Internals, Mode, announce, choose, mode_for, switched_off


@pytest.mark.parametrize(("setting", "off"), [(None, False), ("", False), ("on", False), ("0", False), ("off", True), (" OFF\n", True), ("Off", True)])
def test_only_off_switches_the_private_names_off(setting: str | None, off: bool) -> None:
    assert switched_off(setting) is off


@pytest.mark.parametrize(
    ("verified", "setting", "mode"),
    [
        (True, None, Mode.PRIVATE),
        (True, "on", Mode.PRIVATE),
        (True, "off", Mode.PUBLIC_CHOSEN),
        (False, "off", Mode.PUBLIC_CHOSEN),  # the switch is the reason given, whatever the release
        (False, None, Mode.PUBLIC_UNVERIFIED),
        (False, "", Mode.PUBLIC_UNVERIFIED),
    ],
)
def test_the_private_names_only_on_a_verified_release_unless_switched_off(verified: bool, setting: str | None, mode: Mode) -> None:
    assert mode_for(verified=verified, setting=setting) is mode
    chosen = choose(library="lib", release="1.2.3", switch="LIB_INTERNALS", verified=verified, setting=setting)
    assert chosen == Internals(library="lib", release="1.2.3", switch="LIB_INTERNALS", mode=mode)
    assert chosen.private is (mode is Mode.PRIVATE)


def test_the_reason_names_the_library_and_its_switch() -> None:
    reasons = {mode: Internals("aiohttp", "3.15.0", "GATEWAY_AIOHTTP_INTERNALS", mode).reason for mode in Mode}
    assert reasons == {
        Mode.PRIVATE: "aiohttp's private names, on a release they were read against",
        Mode.PUBLIC_CHOSEN: "aiohttp's public API only (GATEWAY_AIOHTTP_INTERNALS=off)",
        Mode.PUBLIC_UNVERIFIED: "aiohttp's public API only (a release its private names were not read against)",
    }


@pytest.fixture
def fresh_announcements() -> Iterator[None]:
    announce.cache_clear()
    yield
    announce.cache_clear()


@pytest.mark.usefixtures("fresh_announcements")
@pytest.mark.parametrize(("mode", "logged"), [(Mode.PUBLIC_UNVERIFIED, True), (Mode.PUBLIC_CHOSEN, False), (Mode.PRIVATE, False)])
def test_only_an_unverified_release_is_announced_and_once(mode: Mode, logged: bool, caplog: pytest.LogCaptureFixture) -> None:
    internals = Internals("lib", "9.9", "LIB_INTERNALS", mode)
    with caplog.at_level(logging.INFO, logger="gateway"):
        announce(internals, "read on 1.0 only; working without them")
        announce(internals, "read on 1.0 only; working without them")
    expected = [("INFO", "lib 9.9: read on 1.0 only; working without them")] if logged else []
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == expected


@pytest.mark.usefixtures("fresh_announcements")
def test_each_module_announces_its_own(caplog: pytest.LogCaptureFixture) -> None:
    first, second = (Internals(name, None, "X", Mode.PUBLIC_UNVERIFIED) for name in ("one", "two"))
    with caplog.at_level(logging.INFO, logger="gateway"):
        for internals in (first, second, first, second):
            announce(internals, "public API only")
    assert [record.getMessage() for record in caplog.records] == ["one None: public API only", "two None: public API only"]
