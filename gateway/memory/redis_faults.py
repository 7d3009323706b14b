"""How the Redis store's client failures reach its callers: as StoreUnavailable, without a password."""

from __future__ import annotations

from types import TracebackType

from gateway.core.stores import RedisConnection
from gateway.memory.store import StoreUnavailable
from gateway.stores.redis import masked


class Unavailable:
    """`with` it around a client's call: any failure is the store being unavailable, its text without `connection`'s passwords.

    Not only RedisError and OSError: an option the connection does not take is a TypeError at the
    first command, and an unreachable Redis never fails a request. One is made per store and
    entered on every call (a plain class: no generator to start each time).
    """

    __slots__ = ("_connection",)

    def __init__(self, connection: RedisConnection) -> None:
        self._connection = connection

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:  # never swallows the exception
        if isinstance(exc, Exception) and not isinstance(exc, StoreUnavailable):
            raise StoreUnavailable(f"redis store: {masked(str(exc), self._connection)}") from exc
