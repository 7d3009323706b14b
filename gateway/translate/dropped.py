"""What a translation leaves out of a request because a chat upstream has no use for it, told to the log.

Agent clients send options on every request that only Anthropic's or OpenAI's own service acts on
(Claude Code's `thinking` and `context_management`, Codex's `include` and `client_metadata`). Each
is told once per process at INFO, when a client first sends it, then at DEBUG: the operator learns
what a translated route ignores without a line per request.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger("gateway.translate")


class DropLog:
    """Logs what translations drop: each (API, field) at INFO the first time, at DEBUG after."""

    def __init__(self) -> None:
        self.told: set[tuple[str, str]] = set()

    def dropped(self, api: str, fields: Iterable[str]) -> None:
        """Tell that a request of `api` lost `fields` (names, or dotted paths without indexes)."""
        for name in sorted(set(fields)):
            first = (api, name) not in self.told
            self.told.add((api, name))
            log.log(
                logging.INFO if first else logging.DEBUG,
                "%s request: %s left out for a chat completions target%s",
                api, name, " (told once; from now on at debug level)" if first else "",
            )


DROPS = DropLog()
