"""gateway.upstream.providers.commit: a Responses or Messages stream commits at its first output (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.upstream.providers.apis import MESSAGES_API, RESPONSES_API
from gateway.upstream.providers.base import TransportError
from gateway.upstream.providers.commit import CommitPoint
from tests.support.event_streams import Batches, events, named, read_all


async def test_opening_events_are_held_until_the_first_output() -> None:
    upstream = Batches(
        events(named("response.created", response={}), named("response.in_progress", response={})),
        events(named("response.output_text.delta", delta="Hi"), named("response.completed", response={})),
    )
    committed = CommitPoint(upstream, RESPONSES_API)
    assert await read_all(committed) == [
        b"response.created", b"response.in_progress", b"response.output_text.delta", b"response.completed",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("api", "opening", "failing", "status"),
    [
        (RESPONSES_API, [named("response.created", response={}), named("response.in_progress", response={})],
         named("error", code="rate_limit_exceeded", message="slow"), 429),
        (RESPONSES_API, [named("response.created", response={})],
         named("response.failed", response={"error": {"code": "server_error", "message": "boom"}}), 500),
        (MESSAGES_API, [named("message_start", message={}), named("ping")],
         named("error", error={"type": "overloaded_error", "message": "o"}), 529),
    ],
)  # fmt: skip
async def test_a_failure_before_the_first_output_fails_the_attempt_with_its_status(
    api: Any, opening: list[bytes], failing: bytes, status: int
) -> None:
    committed = CommitPoint(Batches(events(*opening), events(failing)), api)
    with pytest.raises(TransportError) as caught:
        await committed.next_batch()
    assert caught.value.status == status and caught.value.kind == "stream_error"


async def test_a_stream_that_ends_before_its_first_output_has_no_first_event() -> None:
    committed = CommitPoint(Batches(events(named("message_start", message={}), named("ping"))), MESSAGES_API)
    assert await committed.next_batch() == []


async def test_a_failure_after_the_first_output_is_left_to_the_relay() -> None:
    upstream = Batches(events(named("message_start", message={}), named("content_block_start", index=0),
                              named("error", error={"type": "overloaded_error", "message": "o"})))  # fmt: skip
    committed = CommitPoint(upstream, MESSAGES_API)
    assert await read_all(committed) == [b"message_start", b"content_block_start", b"error"]
