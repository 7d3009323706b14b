"""Memory request headers: `memoryId` turns memory on; the rest choose and size the window.

Each header is also accepted in kebab case with an `x-memory-` prefix (`x-memory-max-tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from gateway.errors import InvalidRequestError
from gateway.memory.settings import MEMORY_TYPES, MemorySettings

MEMORY_ID: Final = re.compile(r"[A-Za-z0-9._:@-]{1,256}")
_WINDOW_HEADERS: Final = (
    ("maxMessages", "x-memory-max-messages", "max_messages"),
    ("maxTokens", "x-memory-max-tokens", "max_tokens"),
    ("maxRounds", "x-memory-max-rounds", "max_rounds"),
    ("maxChars", "x-memory-max-chars", "max_chars"),
)


@dataclass(frozen=True, slots=True)
class MemoryAsk:
    memory_id: str
    settings: MemorySettings


def _header(headers: Mapping[str, str], name: str, alias: str) -> tuple[str, str] | None:
    for key in (name, alias):
        value = headers.get(key)
        if value is not None:
            return key, value
    return None


def _bad(header: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Header {header} {message}", param=header, code="invalid_header")


def check_memory_id(value: str, header: str = "memoryId") -> str:
    if not MEMORY_ID.fullmatch(value):
        raise _bad(header, "must be 1-256 characters of letters, digits and ._:@-")
    return value


def read_memory_headers(
    headers: Mapping[str, str], defaults: MemorySettings, limits: MemorySettings
) -> MemoryAsk | None:
    """The memory the request asks for, or None without a memoryId; a 400 names any bad header."""
    found = _header(headers, "memoryId", "x-memory-id")
    if found is None:
        return None
    memory_id = check_memory_id(found[1].strip(), found[0])
    settings = defaults
    changes: dict[str, Any] = {}
    kind = _header(headers, "memoryType", "x-memory-type")
    if kind is not None:
        if kind[1].strip() not in MEMORY_TYPES:
            raise _bad(kind[0], f"must be one of {', '.join(MEMORY_TYPES)}, got {kind[1][:40]!r}")
        changes["memory_type"] = kind[1].strip()
    for name, alias, attribute in _WINDOW_HEADERS:
        given = _header(headers, name, alias)
        if given is None:
            continue
        header, raw = given
        text = raw.strip()
        if not text.isdigit() or int(text) <= 0:
            raise _bad(header, f"must be a positive integer, got {raw[:40]!r}")
        limit = getattr(limits, attribute)
        if int(text) > limit:
            raise _bad(header, f"must be at most {limit} (the operator's limit), got {text}")
        changes[attribute] = int(text)
    return MemoryAsk(memory_id, replace(settings, **changes))
