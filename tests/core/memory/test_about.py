"""A conversation's About: created_at (from its oldest message when not set) and metadata checked against OpenAI's limits."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.about import About, about_of, checked_metadata
from gateway.core.memory.conversation import Conversation
from gateway.core.memory.entries import Entry


def test_a_conversation_without_a_creation_time_was_created_with_its_oldest_message() -> None:
    conversation = Conversation([], [Entry({"role": "user"}, {}, 10.0), Entry({"role": "assistant"}, {}, 12.0)], 20.0)
    assert about_of(conversation, created_at=None, metadata=None) == About(10.0, {})
    assert about_of(Conversation([], [Entry({"role": "user"})], 20.0), created_at=None, metadata=None) == About(20.0, {})
    assert about_of(conversation, created_at=5.0, metadata=b'{"a": "b"}') == About(5.0, {"a": "b"})


def test_metadata_within_the_limits_is_taken() -> None:
    most = {f"k{n}": "v" * 512 for n in range(16)} | {"k" * 64: "v"}
    most.pop("k0")
    assert checked_metadata(most) == most
    assert checked_metadata(None) == {}


@pytest.mark.parametrize(
    ("metadata", "param", "code"),
    [
        ([], "metadata", "invalid_type"),
        ("a=b", "metadata", "invalid_type"),
        ({f"k{n}": "v" for n in range(17)}, "metadata", "invalid_value"),
        ({"k" * 65: "v"}, "metadata", "invalid_value"),
        ({"k": "v" * 513}, "metadata.k", "invalid_value"),
        ({"k": 1}, "metadata.k", "invalid_type"),
        ({"k": None}, "metadata.k", "invalid_type"),
    ],
)
def test_metadata_past_the_limits_is_a_400_naming_it(metadata: Any, param: str, code: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        checked_metadata(metadata)
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, param, code)
