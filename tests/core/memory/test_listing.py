"""A page of conversations: which ids it asks for, how it is cut, what a turn is."""

from __future__ import annotations

from gateway.core.memory.listing import Listed, Listing, Page, count_turns


def test_a_listing_wants_ids_after_its_cursor_with_its_prefix() -> None:
    listing = Listing(prefix="chat-", after="chat-b")
    assert [listing.wants(i) for i in ("chat-a", "chat-b", "chat-c", "notes")] == [False, False, True, False]
    assert Listing().wants("anything")


def test_first_ids_are_the_smallest_wanted_and_one_more() -> None:
    ids = ["d", "b", "x-1", "a", "c", "e"]
    assert Listing(limit=2).first_ids(ids) == ["a", "b", "c"]
    assert Listing(limit=2, after="c").first_ids(ids) == ["d", "e", "x-1"]
    assert Listing(limit=5, prefix="x").first_ids(ids) == ["x-1"]
    assert Listing(limit=2).first_ids(Listing(limit=2).first_ids(ids[:3]) + ids[3:]) == ["a", "b", "c"]  # batch by batch


def test_a_page_holds_up_to_its_limit_and_says_when_more_follow() -> None:
    found = [Listed(name, 1, 0.0) for name in "abc"]
    assert Page.of(found, Listing(limit=2)) == Page(found[:2], has_more=True)
    assert Page.of(found, Listing(limit=3)) == Page(found, has_more=False)


def test_turns_are_user_messages() -> None:
    assert count_turns([{"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {"role": "user"}]) == 2
    assert count_turns([]) == 0
