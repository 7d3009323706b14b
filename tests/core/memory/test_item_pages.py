"""Pages of a conversation's items: after an id, a limit, newest first by default; bad parameters are 400s."""

from __future__ import annotations

import pytest

from gateway.core.errors import InvalidRequestError, NotFoundError
from gateway.core.memory.item_pages import ItemListing, Order, page_of

ITEMS = [{"id": f"i{n}"} for n in range(5)]


def ids(listing: ItemListing) -> tuple[list[str], bool]:
    page = page_of(ITEMS, listing)
    return [item["id"] for item in page.items], page.has_more


def test_pages_run_newest_first_unless_asked_oldest_first() -> None:
    assert ids(ItemListing(limit=2)) == (["i4", "i3"], True)
    assert ids(ItemListing(after="i3", limit=2)) == (["i2", "i1"], True)
    assert ids(ItemListing(after="i1", limit=2)) == (["i0"], False)
    assert ids(ItemListing(order=Order.ASC, after="i2")) == (["i3", "i4"], False)
    shown = page_of(ITEMS, ItemListing(limit=2)).as_list()
    assert shown == {"object": "list", "data": [ITEMS[4], ITEMS[3]], "first_id": "i4", "last_id": "i3", "has_more": True}
    assert page_of([], ItemListing()).as_list() == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


def test_a_page_after_an_unknown_item_is_a_404() -> None:
    with pytest.raises(NotFoundError):
        page_of(ITEMS, ItemListing(after="gone"))


def test_a_query_is_read_with_defaults() -> None:
    assert ItemListing.of({}) == ItemListing(after="", limit=20, order=Order.DESC)
    assert ItemListing.of({"limit": "100", "order": "asc", "after": "i1", "include": "x"}) == ItemListing("i1", 100, Order.ASC)


@pytest.mark.parametrize(
    ("query", "param"),
    [({"limit": "0"}, "limit"), ({"limit": "101"}, "limit"), ({"limit": "x"}, "limit"), ({"order": "up"}, "order"), ({"after": "a" * 300}, "after")],
)
def test_bad_parameters_are_400s(query: dict[str, str], param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        ItemListing.of(query)
    assert caught.value.param == param
