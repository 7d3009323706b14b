"""A stored conversation as a turn reads it."""

from __future__ import annotations

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry


def test_a_conversation_read_whole_has_nothing_older_and_lists_its_messages() -> None:
    said = [Entry({"role": "user", "content": "q"}), Entry({"role": "assistant", "content": "a"})]
    conversation = Conversation([{"role": "system", "content": "s"}], said, 10.0)
    assert (conversation.older, conversation.plain) == (0, None)
    assert conversation.messages == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


def test_a_cached_copy_follows_a_write_dropping_past_the_cap_the_oldest_not_read_first() -> None:
    def entry(text: str) -> Entry:
        return Entry({"role": "user", "content": text}, {"o200k_base": 1})

    conversation = Conversation([], [entry("a"), entry("b")], 1.0, older=2)
    conversation.append([entry("c")], cap=4, system=[{"role": "system", "content": "s"}], updated_at=2.0)
    assert conversation.older == 1 and [e.message["content"] for e in conversation.entries] == ["a", "b", "c"]
    conversation.append([entry("d"), entry("e")], cap=4, system=None, updated_at=3.0)
    assert conversation.older == 0 and [e.message["content"] for e in conversation.entries] == ["b", "c", "d", "e"]
    assert conversation.system == [{"role": "system", "content": "s"}] and conversation.updated_at == 3.0
