"""Whether a module of a library's private names takes them: on a release they were read against, unless switched off.

The gateway keeps each library's private names in one module per side: aiohttp's in
gateway.server.aiohttp_internals and gateway.upstream.aiohttp_internals, litellm's in
gateway.upstream.providers.litellm_internals. Each takes its private names only on a release
they were read against, and unless its environment variable says "off"; otherwise it takes the
library's public API, and says once, at INFO, when the release is why. Each keeps its own
release data (gateway.core.aiohttp_releases; litellm_internals.VERIFIED) and passes in the
check's result and the variable's value: the choice is made here, the same way for all of them.
"""

from __future__ import annotations

import enum
import functools
import logging
from dataclasses import dataclass

log = logging.getLogger("gateway")


class Mode(enum.Enum):
    """Which of a library's names a module uses."""

    PRIVATE = "private names, on a release they were read against"
    PUBLIC_CHOSEN = "public API only (switched off)"
    PUBLIC_UNVERIFIED = "public API only (a release the private names were not read against)"


def switched_off(setting: str | None) -> bool:
    """Whether a switch set to `setting` (None: unset) turns the private names off: "off", in any case, spaces aside."""
    return setting is not None and setting.strip().lower() == "off"


def mode_for(*, verified: bool, setting: str | None) -> Mode:
    """The mode on a release that was (`verified`) or was not read against, with the switch at `setting`."""
    if switched_off(setting):
        return Mode.PUBLIC_CHOSEN
    return Mode.PRIVATE if verified else Mode.PUBLIC_UNVERIFIED


@dataclass(frozen=True, slots=True)
class Internals:
    """The private names of `library` in one module: the release installed, the module's switch, and its mode."""

    library: str
    release: str | None  # None: the library is not installed
    switch: str  # the environment variable whose "off" keeps the module to the public API
    mode: Mode

    @property
    def private(self) -> bool:
        """Whether the private names are used."""
        return self.mode is Mode.PRIVATE

    @property
    def reason(self) -> str:
        """The mode, named: "aiohttp's public API only (GATEWAY_AIOHTTP_INTERNALS=off)"."""
        match self.mode:
            case Mode.PRIVATE:
                return f"{self.library}'s private names, on a release they were read against"
            case Mode.PUBLIC_CHOSEN:
                return f"{self.library}'s public API only ({self.switch}=off)"
            case Mode.PUBLIC_UNVERIFIED:
                return f"{self.library}'s public API only (a release its private names were not read against)"


def choose(*, library: str, release: str | None, switch: str, verified: bool, setting: str | None) -> Internals:
    """The Internals of a module of `library`'s names: `verified` says whether `release` was read against."""
    return Internals(library=library, release=release, switch=switch, mode=mode_for(verified=verified, setting=setting))


@functools.cache
def announce(internals: Internals, fallback: str) -> None:
    """Log once per process, at INFO, that `internals` keep to the public API because of the release: `fallback` says what then."""
    if internals.mode is Mode.PUBLIC_UNVERIFIED:
        log.info("%s %s: %s", internals.library, internals.release, fallback)
