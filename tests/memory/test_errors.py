"""What a client sees when memory fails: a busy conversation, a store down, a lease lost, a store error under `with`."""

from __future__ import annotations

import logging

import pytest

from gateway.core.errors import ConflictError
from gateway.memory.errors import (
    MemoryUnavailableError,
    UnstorableReplyError,
    busy,
    store_errors,
    unavailable,
)
from gateway.memory.store import LockLost, LockTimeout, StoreUnavailable, Unconfirmed


def test_a_busy_conversation_is_a_409_that_names_it_and_says_not_to_retry() -> None:
    error = busy(("team-a", "chat-1"), LockTimeout("conversation busy for more than 2s"))
    assert isinstance(error, ConflictError)
    assert (error.status, error.code) == (409, "memory_busy")
    assert error.message == "Memory 'chat-1' is busy with another request: conversation busy for more than 2s."
    assert error.headers == {"x-should-retry": "false"}


def test_a_store_down_is_a_503_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="gateway.memory"):
        error = unavailable(StoreUnavailable("redis at ${REDIS_URL}: connection refused"))
    assert isinstance(error, MemoryUnavailableError)
    assert (error.status, error.type, error.code) == (503, "server_error", "memory_unavailable")
    assert error.message == "The memory store is unavailable; nothing was stored. Try again later."
    assert [r.getMessage() for r in caplog.records] == ["memory store unavailable: redis at ${REDIS_URL}: connection refused"]


def test_a_lease_lost_says_so() -> None:
    error = unavailable(LockLost("the lease passed to another holder"))
    assert (error.status, error.code) == (503, "memory_lock_lost")
    assert "the turn was not stored" in error.message


def test_a_write_not_confirmed_in_time_does_not_claim_nothing_was_stored() -> None:
    error = unavailable(Unconfirmed("redis at 127.0.0.1:6379 sent no reply within 10s"))
    assert (error.status, error.code) == (503, "memory_unavailable")
    assert "nothing was stored" not in error.message and "may still be stored" in error.message


def test_store_errors_turns_a_store_failure_into_the_503_and_lets_anything_else_through() -> None:
    with pytest.raises(MemoryUnavailableError) as caught, store_errors():
        raise StoreUnavailable("down")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no store details chained
    with pytest.raises(KeyError), store_errors():
        raise KeyError("not the store's")
    with store_errors():
        pass


def test_an_unstorable_reply_is_a_502_of_the_upstream() -> None:
    error = UnstorableReplyError("The upstream's answer has no choices[0].message; the turn was not stored.")
    assert (error.status, error.type, error.code) == (502, "upstream_error", "unstorable_reply")
