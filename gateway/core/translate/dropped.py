"""What a translation leaves out of a request because a chat upstream cannot take it, told to the log.

Agent clients send options on every request that only Anthropic's or OpenAI's own service acts on
(Claude Code's `thinking` and `context_management`, Codex's `include` and `client_metadata`). Each
is told once per process at INFO, when a client first sends it, then at DEBUG: the operator learns
what a translated route leaves out without a line per request. A client names some of these
fields itself (any unknown top-level key), so what is remembered is bounded, and a name that is
long or not printable is shown cut and quoted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger("gateway.translate")

MAX_TOLD = 256  # fields remembered as told; past them every drop is told at DEBUG
MAX_NAME = 80  # characters of a field's name shown


class DropLog:
    """Logs what translations drop: each (API, field) at INFO the first time, at DEBUG after."""

    def __init__(self) -> None:
        self.told: set[tuple[str, str]] = set()

    def dropped(self, api: str, fields: Iterable[str]) -> None:
        """Tell that a request of `api` lost `fields` (names, or dotted paths without indexes)."""
        for name in sorted(set(fields)):
            shown = name if name.isprintable() and len(name) <= MAX_NAME else repr(name[:MAX_NAME])
            first = (api, shown) not in self.told and len(self.told) < MAX_TOLD
            if first:
                self.told.add((api, shown))
            log.log(
                logging.INFO if first else logging.DEBUG,
                "%s request: %s left out for a chat completions target%s",
                api, shown, " (told once; from now on at debug level)" if first else "",
            )


DROPS = DropLog()
