"""A page of a tenant's conversations as the memory API lists them: what is asked, what is shown. Pure, no I/O.

Conversations are listed by memoryId in code point order (the ids are ASCII: byte order, as
SQLite and Redis compare them), a page starting after the id `after`, so a page's last id is the
next page's `after` whatever was written or deleted meanwhile.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.core.errors import InvalidRequestError

MOST_LISTED: Final = 100  # a page's most conversations, as OpenAI's lists allow
LISTED_BY_DEFAULT: Final = 20
_DIGITS: Final = re.compile(r"[0-9]{1,6}")


def page_limit(query: Mapping[str, str]) -> int:
    """A list's `limit` query parameter (LISTED_BY_DEFAULT when absent); a 400 when it is not 1 to MOST_LISTED."""
    limit_text = query.get("limit", str(LISTED_BY_DEFAULT))
    if not _DIGITS.fullmatch(limit_text):
        raise InvalidRequestError("'limit' must be an integer.", param="limit", code="invalid_type")
    limit = int(limit_text)
    if not 1 <= limit <= MOST_LISTED:
        raise InvalidRequestError(f"'limit' must be 1 to {MOST_LISTED}, got {limit}.", param="limit", code="invalid_value")
    return limit


@dataclass(frozen=True, slots=True)
class Listing:
    """Which conversations a page asks for: ids starting with `prefix`, after `after`, at most `limit`."""

    prefix: str = ""
    after: str = ""
    limit: int = LISTED_BY_DEFAULT

    def wants(self, memory_id: str) -> bool:
        return memory_id > self.after and memory_id.startswith(self.prefix)

    def first_ids(self, ids: Iterable[str]) -> list[str]:
        """The ids this page shows, in order, and the one after them when there is one (it says the page has more)."""
        return heapq.nsmallest(self.limit + 1, (memory_id for memory_id in ids if self.wants(memory_id)))


@dataclass(frozen=True, slots=True)
class Listed:
    """A conversation as a list shows it: its id, its turns (user messages) and its last write (unix seconds)."""

    memory_id: str
    turns: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class Page:
    """The conversations a Listing found, in id order; `has_more`: more follow the last."""

    conversations: Sequence[Listed]
    has_more: bool

    @classmethod
    def of(cls, found: Sequence[Listed], listing: Listing) -> Page:
        """The page of `found` (in id order, up to one past the limit: see Listing.first_ids)."""
        return cls(found[: listing.limit], has_more=len(found) > listing.limit)


def count_turns(messages: Iterable[Mapping[str, Any]]) -> int:
    """A conversation's turns: its user messages."""
    return sum(1 for message in messages if message.get("role") == "user")
