"""The aiohttp releases the two aiohttp_internals modules (server and upstream) were read against.

Both take their private fast paths only on these releases and unless GATEWAY_AIOHTTP_INTERNALS
is "off" (gateway.core.internals decides); otherwise they use aiohttp's public API. Pure: the
version and the setting are passed in.
"""

from __future__ import annotations

import re
from typing import Final

from gateway.core.internals import Internals, choose

SWITCH: Final = "GATEWAY_AIOHTTP_INTERNALS"  # "off": aiohttp's public API only
VERIFIED_FROM: Final = (3, 14, 0)
VERIFIED_TO: Final = (3, 14, 5)
VERIFIED_RANGE: Final = f"{'.'.join(map(str, VERIFIED_FROM))} to {'.'.join(map(str, VERIFIED_TO))}"
_RELEASE: Final = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def verified(version: str) -> bool:
    """Whether aiohttp `version` is a release the private parts were read against (a pre-release is not)."""
    release = _RELEASE.fullmatch(version)
    return release is not None and VERIFIED_FROM <= tuple(map(int, release.groups())) <= VERIFIED_TO


def internals_for(version: str, setting: str | None) -> Internals:
    """Whether aiohttp's private parts are used with aiohttp `version` and GATEWAY_AIOHTTP_INTERNALS at `setting` (None: unset)."""
    return choose(library="aiohttp", release=version, switch=SWITCH, verified=verified(version), setting=setting)
