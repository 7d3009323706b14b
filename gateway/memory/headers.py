"""Memory request headers: `memoryId` turns memory on; the rest choose and size the window.

Each header is also accepted in kebab case with an `x-memory-` prefix (`x-memory-max-tokens`),
and in any case. Of two spellings the plain one counts; of a header sent twice, the first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from multidict import CIMultiDictProxy, istr

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.settings import MEMORY_TYPES, MemorySettings, MemoryType

MEMORY_ID: Final = re.compile(r"[A-Za-z0-9._:@-]{1,256}")
# canonical name -> (its x-memory- spelling, and the MemorySettings field it sets); memoryId first
_HEADERS: Final = {
    "memoryId": ("x-memory-id", None),
    "memoryType": ("x-memory-type", "memory_type"),
    "maxMessages": ("x-memory-max-messages", "max_messages"),
    "maxTokens": ("x-memory-max-tokens", "max_tokens"),
    "maxRounds": ("x-memory-max-rounds", "max_rounds"),
    "maxChars": ("x-memory-max-chars", "max_chars"),
}
# Every accepted spelling, lower-cased, in pairs (plain, kebab) in _HEADERS' order: a request's
# memory headers are read as one value (or None) per spelling, in this order.
# As istr: aiohttp's case-insensitive lookups lower-case a plain str key on every lookup, an istr's once.
_SPELLINGS: Final = tuple(istr(spelling) for name, (kebab, _) in _HEADERS.items() for spelling in (name.lower(), kebab))
_MEMORY_ID, _KEBAB_ID = _SPELLINGS[0], _SPELLINGS[1]
_WINDOW_FIELDS: Final = tuple((name, kebab, field) for name, (kebab, field) in _HEADERS.items() if field is not None)
_NO_WINDOW: Final = (None,) * (2 * len(_WINDOW_FIELDS))
# A window header longer than this (zero-padded, say) is read each time, not cached: each of the
# cache's entries then holds at most ten values this long.
_CACHED_LENGTH: Final = 24
_CACHED_WINDOWS: Final = 1024
_WINDOWS: dict[tuple[str | None, ...], tuple[MemorySettings, MemorySettings, MemorySettings]] = {}


@dataclass(slots=True)  # not a NamedTuple: made on every memory request, and a NamedTuple is slower to make
class MemoryAsk:
    """The conversation a request asks for, and its window."""

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

    Two case-insensitive lookups in aiohttp's headers; one pass in C over the names of any other mapping.
    """
    if isinstance(headers, CIMultiDictProxy):
        return _MEMORY_ID in headers or _KEBAB_ID in headers
    return not {"memoryid", "x-memory-id"}.isdisjoint(map(str.lower, headers))


def read_memory_headers(
    headers: Mapping[str, str], defaults: MemorySettings, limits: MemorySettings
) -> MemoryAsk | None:
    """The memory the request asks for, or None without a memoryId; a 400 names any bad header."""
    if isinstance(headers, CIMultiDictProxy):
        # aiohttp's request headers, the fast path: one lookup per spelling, all in C (its
        # lookups ignore case, by `str.lower` as the scan does), nothing per header sent
        sent = tuple(map(headers.get, _SPELLINGS))
    else:
        sent = _sent_by_scan(headers)
    plain_id, kebab_id = sent[0], sent[1]
    if plain_id is not None:
        memory_id = check_memory_id(plain_id.strip())
    elif kebab_id is not None:
        memory_id = check_memory_id(kebab_id.strip(), "x-memory-id")
    else:
        return None
    return MemoryAsk(memory_id, _window_settings(defaults, limits, sent[2:]))


def _sent_by_scan(headers: Mapping[str, str]) -> tuple[str | None, ...]:
    """Each spelling's value (the first sent) or None, from any mapping: one look per header."""
    first: dict[str, str] = {}
    for header, value in headers.items():
        first.setdefault(header.lower(), value)
    return tuple(first.get(spelling) for spelling in _SPELLINGS)


def _window_settings(
    defaults: MemorySettings, limits: MemorySettings, window: tuple[str | None, ...]
) -> MemorySettings:
    """The settings the window headers choose, from `defaults` within `limits`."""
    if window == _NO_WINDOW:
        return defaults
    # Clients repeat the same few window headers: each is read once. Entries are keyed by the
    # values alone and serve the same defaults and limits objects only (a route's, parsed once):
    # hashing two MemorySettings (in Python) would cost more than the read.
    known = _WINDOWS.get(window)
    if known is not None and known[0] is defaults and known[1] is limits:
        return known[2]
    settings = _read_window(defaults, limits, window)
    if max(map(len, filter(None, window)), default=0) <= _CACHED_LENGTH:  # a long (zero-padded) value is not kept
        if len(_WINDOWS) >= _CACHED_WINDOWS:
            _WINDOWS.clear()
        _WINDOWS[window] = (defaults, limits, settings)
    return settings


def _read_window(defaults: MemorySettings, limits: MemorySettings, window: tuple[str | None, ...]) -> MemorySettings:
    """The settings the window headers choose (a value per spelling, in _SPELLINGS' order); a 400 names a bad one."""
    changes: dict[str, Any] = {}
    for (name, kebab, field), plain_value, kebab_value in zip(_WINDOW_FIELDS, window[::2], window[1::2], strict=True):
        header, raw = (name, plain_value) if plain_value is not None else (kebab, kebab_value)
        if raw is None:
            continue
        if field == "memory_type":
            if raw.strip() not in MEMORY_TYPES:
                raise _bad(header, f"must be one of {', '.join(MEMORY_TYPES)}, got {raw[:40]!r}")
            changes[field] = MemoryType(raw.strip())
        else:
            changes[field] = _window_size(header, raw, getattr(limits, field))
    return replace(defaults, **changes) if changes else defaults


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
