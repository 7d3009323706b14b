"""A page of a conversation's items as the Conversations API lists them: `after` an item id, `limit`, `order`. Pure, no I/O."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.core.errors import InvalidRequestError, NotFoundError
from gateway.core.memory.listing import LISTED_BY_DEFAULT, page_limit


class Order(enum.StrEnum):
    """The order items are listed in: oldest first (asc) or newest first (desc, OpenAI's default)."""

    ASC = "asc"
    DESC = "desc"


@dataclass(frozen=True, slots=True)
class ItemListing:
    """Which items a page asks for: those after the item `after` ('' from the start) in `order`, at most `limit`."""

    after: str = ""
    limit: int = LISTED_BY_DEFAULT
    order: Order = Order.DESC

    @classmethod
    def of(cls, query: Mapping[str, str]) -> ItemListing:
        """The page a query string asks for; a 400 names a parameter that is not what it must be.

        `include` asks for outputs the gateway does not keep (sources, logprobs, encrypted
        reasoning...): any value is taken, and nothing is added.
        """
        limit = page_limit(query)
        order = query.get("order", Order.DESC.value)
        if order not in Order.__members__.values():
            raise InvalidRequestError("'order' must be 'asc' or 'desc'.", param="order", code="invalid_value")
        after = query.get("after", "")
        if len(after) > 256:
            raise InvalidRequestError("'after' must be an item id.", param="after", code="invalid_value")
        return cls(after=after, limit=limit, order=Order(order))


@dataclass(frozen=True, slots=True)
class ItemPage:
    """The items a listing found, in its order; `has_more`: more follow the last."""

    items: Sequence[Mapping[str, Any]]
    has_more: bool

    def as_list(self) -> dict[str, Any]:
        """The page as OpenAI's list object."""
        return {
            "object": "list",
            "data": list(self.items),
            "first_id": self.items[0]["id"] if self.items else None,
            "last_id": self.items[-1]["id"] if self.items else None,
            "has_more": self.has_more,
        }


def page_of(items: Sequence[Mapping[str, Any]], listing: ItemListing) -> ItemPage:
    """The page of `items` (oldest first) `listing` asks for; a 404 when `after` names no item of them."""
    ordered = list(items) if listing.order is Order.ASC else list(reversed(items))
    start = 0
    if listing.after:
        ids = [item["id"] for item in ordered]
        if listing.after not in ids:
            raise NotFoundError(f"No item '{listing.after}' in this conversation.", param="after", code="item_not_found")
        start = ids.index(listing.after) + 1
    shown = ordered[start : start + listing.limit]
    return ItemPage(shown, has_more=start + listing.limit < len(ordered))
