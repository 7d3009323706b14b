"""What a conversation is besides its messages: when it was created and its metadata (the Conversations API's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from gateway.core.errors import InvalidRequestError
from gateway.core.memory.conversation import Conversation


@dataclass(frozen=True, slots=True)
class About:
    """A conversation's creation time (unix seconds) and its metadata: up to 16 string pairs, set by the Conversations API."""

    created_at: float
    metadata: Mapping[str, str] = field(default_factory=dict)


def about_of(conversation: Conversation, *, created_at: float | None, metadata: str | bytes | None) -> About:
    """A conversation's About as a store keeps it: `created_at` and the metadata's JSON, either None when never set.

    A conversation its turns made (a memoryId's) was created when its oldest kept message was
    stored, or, with none of known time, at its last write.
    """
    if created_at is None:
        known = [entry.created_at for entry in conversation.entries[:1] if entry.created_at is not None]
        created_at = known[0] if known else conversation.updated_at
    return About(created_at, orjson.loads(metadata) if metadata else {})


MOST_METADATA_PAIRS: Final = 16  # OpenAI's limits on an object's metadata
LONGEST_METADATA_KEY: Final = 64
LONGEST_METADATA_VALUE: Final = 512


def checked_metadata(metadata: Any, param: str = "metadata") -> dict[str, str]:
    """`metadata` as sent (null: none), checked against OpenAI's limits; a 400 says which is broken."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise InvalidRequestError(f"'{param}' must be an object of strings.", param=param, code="invalid_type")
    if len(metadata) > MOST_METADATA_PAIRS:
        raise InvalidRequestError(
            f"'{param}' may hold at most {MOST_METADATA_PAIRS} pairs, got {len(metadata)}.", param=param, code="invalid_value"
        )
    for name, value in metadata.items():
        if len(name) > LONGEST_METADATA_KEY:
            raise InvalidRequestError(
                f"'{param}' keys must be at most {LONGEST_METADATA_KEY} characters.", param=param, code="invalid_value"
            )
        if not isinstance(value, str):
            raise InvalidRequestError(f"'{param}.{name[:64]}' must be a string.", param=f"{param}.{name}", code="invalid_type")
        if len(value) > LONGEST_METADATA_VALUE:
            raise InvalidRequestError(
                f"'{param}' values must be at most {LONGEST_METADATA_VALUE} characters.", param=f"{param}.{name}", code="invalid_value"
            )
    return dict(metadata)
