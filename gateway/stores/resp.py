"""One connection to Redis that many callers share at once: commands go out as they come, replies come back in order.

Redis answers a connection's commands in the order it read them, so a call needs no connection
of its own: it writes its packed command (`hiredis.pack_command`) and waits for the reply in its
place in the line; hiredis reads the replies (`hiredis.Reader`). The commands sent in one pass of
the event loop go out in one write at its end (`_write`): on loopback a write costs the sender
the receiver's side of TCP as well, and a gateway at 8 connections sends ~3.8 commands a write
(`bench/send.py`'s memory turns on Redis). Error replies are redis-py's exceptions, as its client
would raise them for a script: `ResponseError` with Redis' text, `NoScriptError` for NOSCRIPT,
`BusyLoadingError` for LOADING.

Only the oldest waiting call is timed: while it waits, every call behind it waits too, and when
it is late the connection is dead for all of them (each fails with TimeoutError). A lost
connection fails every call in flight with ConnectionError; so does a READONLY reply, which says
the server became a replica (after a failover: the next connection asks for the primary). A
caller that leaves (cancelled) keeps its place: its reply is read and dropped, so the stream
stays in step.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Final, cast

import hiredis
from redis import exceptions

NOT_YET: Final = object()  # hiredis' answer while no whole reply is buffered
# Error replies whose first word redis-py raises as its own exception; any other is a ResponseError.
# LOADING (a restarted Redis still reading its data) is a ConnectionError to redis-py: retried.
_REFINED: Final[dict[str, type[exceptions.RedisError]]] = {
    "NOSCRIPT": exceptions.NoScriptError, "LOADING": exceptions.BusyLoadingError,
}  # fmt: skip


def refined(error: exceptions.ResponseError) -> exceptions.RedisError:
    """`error` (an error reply, as hiredis made it) as the exception redis-py raises for it."""
    text = str(error)
    code, _, rest = text.partition(" ")
    kind = _REFINED.get(code)
    return error if kind is None else kind(rest)


class RespConnection(asyncio.Protocol):
    """A connection to the Redis at `name` (host:port, in errors), shared by every caller; replies are due within `reply_seconds`."""

    def __init__(self, *, name: str, reply_seconds: float) -> None:
        self.name = name
        self._reply_seconds = reply_seconds
        self._loop = asyncio.get_running_loop()
        self._reader = hiredis.Reader(replyError=exceptions.ResponseError, notEnoughData=NOT_YET)
        self._waiting: deque[tuple[asyncio.Future[Any], float]] = deque()  # each call's reply and deadline
        self._unsent: list[bytes] = []  # commands sent in this pass of the loop, written at its end
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._lost: exceptions.RedisError | None = None  # why the connection ended; None while it is open
        self.gone: asyncio.Future[None] = self._loop.create_future()  # done once the transport is closed

    @property
    def open(self) -> bool:
        return self._lost is None and self._transport is not None

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """Write `command` (packed); the future of its reply. ConnectionError when the connection has ended."""
        if self._lost is not None or self._transport is None:
            raise exceptions.ConnectionError(f"the connection to redis at {self.name} has ended")
        reply = self._loop.create_future()
        deadline = self._loop.time() + self._reply_seconds
        self._waiting.append((reply, deadline))
        if not self._unsent:
            self._loop.call_soon(self._write)
        self._unsent.append(command)
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._check_oldest)
        return reply

    def _write(self) -> None:
        """Write the commands sent in this pass of the loop, in one write."""
        unsent, self._unsent = self._unsent, []
        if self._lost is None and self._transport is not None:
            self._transport.write(b"".join(unsent))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            while (reply := self._reader.gets()) is not NOT_YET:
                waiter, _ = self._waiting.popleft()
                if isinstance(reply, exceptions.ResponseError):
                    if str(reply).startswith("READONLY"):
                        self._answer_read_only(waiter)
                        return
                    reply = refined(reply)
                    if not waiter.done():
                        waiter.set_exception(reply)
                elif not waiter.done():  # else its caller left: the reply is dropped, the line moves on
                    waiter.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # unreadable, or a reply nobody asked for
            self.lose(exceptions.ConnectionError(f"redis at {self.name} sent what cannot be read ({exc})"))

    def _answer_read_only(self, waiter: asyncio.Future[Any]) -> None:
        """A write reached a replica: this call and every other one fail as on a lost connection, and are retried."""
        read_only = exceptions.ConnectionError(f"redis at {self.name} is a read-only replica now")
        if not waiter.done():
            waiter.set_exception(read_only)
        self.lose(read_only)

    def _check_oldest(self) -> None:
        """The oldest call's deadline came: the connection is dead if it is still waiting, else look again at the next."""
        self._timer = None
        if not self._waiting:
            return
        deadline = self._waiting[0][1]
        if self._loop.time() < deadline:
            self._timer = self._loop.call_at(deadline, self._check_oldest)
            return
        self.lose(exceptions.TimeoutError(f"redis at {self.name} sent no reply within {self._reply_seconds:g}s"))

    def lose(self, reason: exceptions.RedisError) -> None:
        """End the connection: every call in flight fails with (a copy of) `reason`."""
        if self._lost is None:
            self._lost = reason
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.abort()
        waiting, self._waiting = self._waiting, deque()
        for waiter, _ in waiting:
            if not waiter.done():
                waiter.set_exception(type(reason)(*reason.args))

    def connection_lost(self, exc: Exception | None) -> None:
        cause = f": {exc}" if exc is not None else ""
        self.lose(exceptions.ConnectionError(f"the connection to redis at {self.name} was lost{cause}"))
        if not self.gone.done():
            self.gone.set_result(None)
