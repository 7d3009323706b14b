"""The aiohttp releases the two aiohttp_internals modules (server and upstream) were read against.

Both take their private fast paths only on these releases and unless GATEWAY_AIOHTTP_INTERNALS
is "off"; otherwise they use aiohttp's public API. Pure: the version and the setting are passed in.
"""

from __future__ import annotations

import re
from typing import Final

SWITCH: Final = "GATEWAY_AIOHTTP_INTERNALS"  # "off": aiohttp's public API only
VERIFIED_FROM: Final = (3, 14, 0)
VERIFIED_TO: Final = (3, 14, 5)
_RELEASE: Final = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def verified(version: str) -> bool:
    """Whether aiohttp `version` is a release the private parts were read against (a pre-release is not)."""
    release = _RELEASE.fullmatch(version)
    return release is not None and VERIFIED_FROM <= tuple(map(int, release.groups())) <= VERIFIED_TO


def switched_off(setting: str | None) -> bool:
    """Whether GATEWAY_AIOHTTP_INTERNALS's value (None: unset) turns the private parts off."""
    return setting is not None and setting.strip().lower() == "off"
