"""A stored conversation as a turn reads it."""

from __future__ import annotations

from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry


def test_a_conversation_read_whole_has_nothing_older_and_lists_its_messages() -> None:
    said = [Entry({"role": "user", "content": "q"}), Entry({"role": "assistant", "content": "a"})]
    conversation = Conversation([{"role": "system", "content": "s"}], said, 10.0)
    assert (conversation.older, conversation.plain) == (0, None)
    assert conversation.messages == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
