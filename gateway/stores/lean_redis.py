"""A Redis client for a store's hot scripts alone: one shared connection (`resp`), no pool, packing and reading in C.

Why: a script call through redis-py's asyncio client takes a pooled connection and gives it back,
packs the command in Python and runs retry, timeout and observability wrappers around it: 60-65 µs
of CPU a script call (8 callers at once, uvloop, hiredis, pinned to one CPU), against 11-18 here.
A memory turn makes two such calls; in `bench/memory_cpu.py` a Redis turn went from 2.3-2.7x a
request without memory to 1.8x.

What it keeps of the redis-py client's behaviour: the login (AUTH with the username and password,
SELECT of the database) on every new connection; 5 s to connect and log in, 10 s for a reply
(`Patience`); a call that finds the connection lost (or lost while it waited) tried again on a
new one, at once and then with redis-py's `Retry` (its backoff and number of retries), as is a
LOADING reply; NOSCRIPT loading the script and running it again; error replies as redis-py's
exceptions. A reply that never comes fails every call on the connection at once, and is not
retried: the Redis hangs, and each retry would wait as long again before the 503. Where it
connects is asked anew for each connection: one Redis' address, or Sentinel's primary
(redis-py's `Sentinel.discover_master`), so after a failover the next connection reaches the
new primary.

The scripts a store runs here must be safe to run twice: a lost connection may have lost a reply
whose script ran.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import hiredis
from redis import exceptions
from redis.asyncio.retry import Retry
from redis.typing import EncodableT, KeyT

from gateway.stores.resp import RespConnection

Find = Callable[[], Awaitable[tuple[str, int]]]  # where to connect: asked before each new connection


@dataclass(frozen=True, slots=True)
class Login:
    """What a new connection sends before any call: AUTH with `password` (and `username`), SELECT `db`."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)  # passwords must never reach a log
    db: int = 0

    def commands(self) -> list[tuple[EncodableT, ...]]:
        """The commands a new connection sends first, in order.

        AUTH names the user, `default` when none is given, as redis-py's `HELLO 3 AUTH` does: a
        Redis whose default user needs no password then takes any, where `AUTH password` is an error.
        """
        commands: list[tuple[EncodableT, ...]] = []
        if self.password is not None:
            commands.append(("AUTH", self.username or "default", self.password))
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


class LeanRedis:
    """Calls on one shared connection to the Redis `find` names, opened at the first call and again after a loss."""

    def __init__(
        self, find: Find, *, login: Login, reply_seconds: float, connect_seconds: float, retry: Retry
    ) -> None:
        self._find = find
        self._login = login
        self._reply_seconds = reply_seconds
        self._connect_seconds = connect_seconds
        self._retry = retry
        self._connection: RespConnection | None = None
        self._connecting: asyncio.Future[RespConnection] | None = None
        self._closed = False

    def register_script(self, source: str) -> LeanScript:
        """`source` as a script to call by its SHA1 (as redis-py's `register_script`)."""
        return LeanScript(self, source)

    async def call(self, command: tuple[EncodableT, ...]) -> Any:
        """Send `command` and return its reply (an error reply raised); a lost connection is retried on a new one.

        On an open connection the call goes without the retry machinery. A call lost with it is
        sent again at once on a new connection, then as `retry` says (its backoff and count).
        """
        packed = pack(command)
        connection = self._connection
        if connection is not None and connection.open:
            try:
                return await connection.send(packed)
            except exceptions.ConnectionError:
                if self._closed:
                    raise
        return await self._retry.call_with_retry(
            functools.partial(self._send, packed), _after_loss, is_retryable=self._retryable
        )

    def _retryable(self, error: Exception) -> bool:
        """A lost connection is tried again; a late reply (the Redis hangs) and a closed client are not."""
        return isinstance(error, exceptions.ConnectionError) and not self._closed

    async def _send(self, packed: bytes) -> Any:
        connection = self._connection
        if connection is None or not connection.open:
            connection = await self._connect()
        return await connection.send(packed)

    async def _connect(self) -> RespConnection:
        """The connection, opened once for every caller that finds none (a caller that leaves does not stop it)."""
        if self._closed:
            raise exceptions.ConnectionError("the Redis store is closed")
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
            self._connecting.add_done_callback(self._opened)
        return await asyncio.shield(self._connecting)

    def _opened(self, opening: asyncio.Future[RespConnection]) -> None:
        self._connecting = None
        if opening.cancelled() or opening.exception() is not None:  # each caller that waited has it
            return
        connection = opening.result()
        if self._closed:
            connection.lose(exceptions.ConnectionError("the Redis store is closed"))
        else:
            self._connection = connection

    async def _open(self) -> RespConnection:
        """A new connection to where `find` says, logged in; TimeoutError past `connect_seconds` in all.

        Cancelled by `close`: ConnectionError for the callers waiting on it (they were not cancelled).
        """
        where = "redis"
        try:
            async with asyncio.timeout(self._connect_seconds):
                host, port = await self._find()
                where = f"redis at {host}:{port}"
                opening = functools.partial(RespConnection, name=f"{host}:{port}", reply_seconds=self._reply_seconds)
                _, connection = await asyncio.get_running_loop().create_connection(opening, host, port)
                try:
                    await self._log_in(connection)
                except BaseException:
                    connection.lose(exceptions.ConnectionError(f"logging in to {where} failed"))
                    raise
        except TimeoutError:
            raise exceptions.TimeoutError(f"connecting to {where} took more than {self._connect_seconds:g}s") from None
        except OSError as exc:
            raise exceptions.ConnectionError(f"connecting to {where} failed: {exc}") from exc
        except asyncio.CancelledError:
            if self._closed:
                raise exceptions.ConnectionError("the Redis store is closed") from None
            raise
        return connection

    async def _log_in(self, connection: RespConnection) -> None:
        """Send the login's commands at once and read their replies (an error reply raised: not retried)."""
        await asyncio.gather(*(connection.send(pack(command)) for command in self._login.commands()))

    async def close(self) -> None:
        """Fail the calls in flight and close the connection; calls after this fail at once."""
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.lose(exceptions.ConnectionError("the Redis store is closed"))
            await connection.gone


def pack(command: tuple[EncodableT, ...]) -> bytes:
    """`command` as Redis reads it (RESP), packed by hiredis."""
    packed: bytes = hiredis.pack_command(command)  # type: ignore[arg-type]  # its stub types the tuple as one element long
    return packed


async def _after_loss(error: Exception) -> None:
    """Nothing to undo after a failed try: the connection that failed has ended, the next try opens another."""


class LeanScript:
    """A Lua script called by its SHA1 (EVALSHA), loaded (SCRIPT LOAD) and called again when Redis does not have it."""

    __slots__ = ("_redis", "_sha", "_source")

    def __init__(self, redis: LeanRedis, source: str) -> None:
        self._redis = redis
        self._source = source.encode()
        self._sha = hashlib.sha1(self._source).hexdigest().encode()  # Redis names scripts by SHA1

    async def __call__(self, keys: Sequence[KeyT] | None = None, args: Iterable[EncodableT] | None = None) -> Any:
        keys = keys or ()
        command = (b"EVALSHA", self._sha, len(keys), *keys, *(args or ()))
        try:
            return await self._redis.call(command)
        except exceptions.NoScriptError:  # a restarted Redis, or SCRIPT FLUSH
            await self._redis.call((b"SCRIPT", b"LOAD", self._source))
            return await self._redis.call(command)
