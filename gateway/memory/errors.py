"""What a client sees when memory fails: a busy conversation (409), a store down (503), a reply memory cannot keep (502)."""

from __future__ import annotations

import logging
from types import TracebackType

from gateway.core.errors import ConflictError, GatewayError
from gateway.memory.store import Key, LockLost, LockTimeout, StoreUnavailable, Unconfirmed

log = logging.getLogger("gateway.memory")


class MemoryUnavailableError(GatewayError):
    status = 503
    type = "server_error"
    code = "memory_unavailable"


class UnstorableReplyError(GatewayError):
    """The upstream answered, but not with a reply memory can keep; nothing was stored."""

    status = 502
    type = "upstream_error"
    code = "unstorable_reply"


def busy(key: Key, exc: LockTimeout) -> ConflictError:
    """The 409 for a conversation another request held past the lock timeout."""
    return ConflictError(
        f"Memory '{key[1]}' is busy with another request: {exc}.",
        code="memory_busy",
        headers={"x-should-retry": "false"},
    )


def unavailable(exc: StoreUnavailable) -> MemoryUnavailableError:
    """The 503 for a store that failed (logged here, once)."""
    log.error("memory store unavailable: %s", exc)
    if isinstance(exc, LockLost):
        return MemoryUnavailableError(
            "The conversation's lock was lost while the answer was produced (the memory store was "
            "unreachable for longer than the lock's lease); the turn was not stored.",
            code="memory_lock_lost",
        )
    if isinstance(exc, Unconfirmed):
        return MemoryUnavailableError(
            "The memory store did not confirm the turn in time; it may still be stored when the store "
            "recovers. Read the conversation before sending the turn again."
        )
    return MemoryUnavailableError("The memory store is unavailable; nothing was stored. Try again later.")


class store_errors:
    """`with store_errors():` a failing store backend is a 503 for the client, never a 500."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        if isinstance(exc, StoreUnavailable):
            raise unavailable(exc) from None
