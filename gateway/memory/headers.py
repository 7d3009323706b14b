"""Memory request headers: `memoryId` turns memory on; the rest choose and size the window.

Each header is also accepted in kebab case with an `x-memory-` prefix (`x-memory-max-tokens`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from gateway.errors import InvalidRequestError
from gateway.memory.settings import MEMORY_TYPES, MemorySettings

MEMORY_ID: Final = re.compile(r"[A-Za-z0-9._:@-]{1,256}")
# canonical name -> (accepted spellings, lower-cased, and the MemorySettings field it sets)
_HEADERS: Final = {
    "memoryId": ("memoryid", "x-memory-id", None),
    "memoryType": ("memorytype", "x-memory-type", "memory_type"),
    "maxMessages": ("maxmessages", "x-memory-max-messages", "max_messages"),
    "maxTokens": ("maxtokens", "x-memory-max-tokens", "max_tokens"),
    "maxRounds": ("maxrounds", "x-memory-max-rounds", "max_rounds"),
    "maxChars": ("maxchars", "x-memory-max-chars", "max_chars"),
}
_BY_SPELLING: Final = {spelling: name for name, (*spellings, _) in _HEADERS.items() for spelling in spellings}
_MEMORY_ID_SPELLINGS: Final = frozenset(_HEADERS["memoryId"][:2])


@dataclass(frozen=True, slots=True)
class MemoryAsk:
    memory_id: str
    settings: MemorySettings


def _bad(header: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Header {header} {message}", param=header, code="invalid_header")


def check_memory_id(value: str, header: str = "memoryId") -> str:
    if not MEMORY_ID.fullmatch(value):
        raise _bad(header, "must be 1-256 characters of letters, digits and ._:@-")
    return value


def asks_for_memory(headers: Mapping[str, str]) -> bool:
    """Whether the request sends a memoryId, in any spelling: without one, the other memory headers mean nothing.

    One pass in C over the header names, for the many requests that send none.
    """
    return not _MEMORY_ID_SPELLINGS.isdisjoint(map(str.lower, headers))


def read_memory_headers(
    headers: Mapping[str, str], defaults: MemorySettings, limits: MemorySettings
) -> MemoryAsk | None:
    """The memory the request asks for, or None without a memoryId; a 400 names any bad header."""
    if not asks_for_memory(headers):
        return None
    given: dict[str, tuple[str, str]] = {}  # canonical name -> (the spelling errors name, value)
    for header, value in headers.items():
        lower = header.lower()
        name = _BY_SPELLING.get(lower)
        if name is not None and (name not in given or lower == name.lower()):  # the plain form wins
            given[name] = (lower if lower.startswith("x-memory-") else name, value)
    if "memoryId" not in given:
        return None
    header, value = given.pop("memoryId")
    memory_id = check_memory_id(value.strip(), header)
    changes: dict[str, Any] = {}
    for name, (header, raw) in given.items():
        field = _HEADERS[name][2]
        text = raw.strip()
        if field == "memory_type":
            if text not in MEMORY_TYPES:
                raise _bad(header, f"must be one of {', '.join(MEMORY_TYPES)}, got {raw[:40]!r}")
            changes[field] = text
            continue
        changes[str(field)] = _window_size(header, raw, getattr(limits, str(field)))
    return MemoryAsk(memory_id, _with_changes(defaults, tuple(changes.items())) if changes else defaults)


def _window_size(header: str, raw: str, limit: int) -> int:
    """A window header's positive integer, at most `limit`."""
    text = raw.strip()
    # isdigit() alone also passes '²' (which int() refuses) and '٣' (which it reads as 3).
    digits = text.lstrip("0") if text.isascii() and text.isdigit() else ""
    if not digits:
        raise _bad(header, f"must be a positive integer, got {raw[:40]!r}")
    # Lengths first: int() refuses over 4300 digits, and a number longer than the limit is above it.
    if len(digits) > len(str(limit)) or int(digits) > limit:
        got = digits if len(digits) <= 20 else f"a {len(digits)}-digit number"
        raise _bad(header, f"must be at most {limit} (the operator's limit), got {got}")
    return int(digits)


@functools.lru_cache(maxsize=1024)
def _with_changes(defaults: MemorySettings, changes: tuple[tuple[str, Any], ...]) -> MemorySettings:
    """Clients repeat the same few window headers: build each MemorySettings once."""
    return replace(defaults, **dict(changes))
