"""gateway.stores.resp: one connection shared by many callers, on a real redis-server (through a relay where a test holds replies back)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import hiredis
import pytest
import redis
import redis.exceptions

from gateway.stores.resp import RespConnection, refined
from tests.support.servers import redis_server
from tests.support.tcp_relay import relay_to


def address(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("redis://").partition("/")[0].rpartition(":")
    return host, int(port)


@contextlib.asynccontextmanager
async def connected(url: str, *, reply_seconds: float = 10) -> AsyncIterator[RespConnection]:
    host, port = address(url)
    opening = functools.partial(RespConnection, name=f"{host}:{port}", reply_seconds=reply_seconds)
    _, connection = await asyncio.get_running_loop().create_connection(opening, host, port)
    try:
        yield connection
    finally:
        connection.lose(redis.exceptions.ConnectionError("test over"))
        await connection.gone


def call(connection: RespConnection, *command: Any) -> asyncio.Future[Any]:
    return connection.send(hiredis.pack_command(command))


NESTED = "return {1, {2, 'two', {false, 'deep'}}, 'bulk', {}}"


async def test_replies_of_every_shape(redis_url: str) -> None:
    async with connected(redis_url) as connection:
        assert await call(connection, "EVAL", NESTED, 0) == [1, [2, b"two", [None, b"deep"]], b"bulk", []]
        assert await call(connection, "GET", "resp:never-set") is None
        assert await call(connection, "SET", "resp:n", "41") == b"OK"
        assert await call(connection, "INCR", "resp:n") == 42
        assert await call(connection, "ECHO", b"\x00\r\nbinary") == b"\x00\r\nbinary"
        with pytest.raises(redis.exceptions.ResponseError) as error:
            await call(connection, "EVAL", "return redis.error_reply('LOCKLOST gone')", 0)
        assert type(error.value) is redis.exceptions.ResponseError and str(error.value) == "LOCKLOST gone"
        with pytest.raises(redis.exceptions.NoScriptError):
            await call(connection, "EVALSHA", "0" * 40, 0)
        assert await call(connection, "PING") == b"PONG"  # an error reply leaves the connection usable


def test_error_replies_are_the_exceptions_redis_py_raises() -> None:
    assert type(refined(redis.exceptions.ResponseError("NOSCRIPT No matching script"))) is redis.exceptions.NoScriptError
    loading = refined(redis.exceptions.ResponseError("LOADING Redis is loading the dataset in memory"))
    assert isinstance(loading, redis.exceptions.ConnectionError)  # retried, as redis-py does
    lost = redis.exceptions.ResponseError("LOCKLOST the lock is gone")
    assert refined(lost) is lost


async def test_many_callers_at_once_each_get_their_own_reply(redis_url: str) -> None:
    async with connected(redis_url) as connection:

        async def echo(n: int) -> bytes:
            reply: bytes = await call(connection, "ECHO", f"caller-{n}")
            return reply

        replies = await asyncio.gather(*(echo(n) for n in range(500)))
        assert replies == [f"caller-{n}".encode() for n in range(500)]


async def test_a_caller_that_leaves_keeps_the_replies_in_step(redis_url: str) -> None:
    async with relay_to(redis_url) as relay, connected(relay.url) as connection:
        relay.replies.clear()
        leaving = asyncio.ensure_future(call(connection, "ECHO", "for the one who left"))
        await relay.arrived(b"for the one who left")
        leaving.cancel()
        staying = call(connection, "ECHO", "for the one who stayed")
        await relay.arrived(b"for the one who stayed")
        relay.replies.set()
        assert await staying == b"for the one who stayed"
        assert await call(connection, "ECHO", "next") == b"next"


async def test_a_late_reply_ends_the_connection_for_every_call_on_it(redis_url: str) -> None:
    async with relay_to(redis_url) as relay, connected(relay.url, reply_seconds=0.2) as connection:
        relay.replies.clear()
        first, second = call(connection, "ECHO", "a"), call(connection, "ECHO", "b")
        for late in (first, second):
            with pytest.raises(redis.exceptions.TimeoutError, match=r"sent no reply within 0\.2s"):
                await late
        assert not connection.open
        with pytest.raises(redis.exceptions.ConnectionError):
            call(connection, "PING")


async def test_a_killed_connection_fails_every_call_in_flight(redis_url: str) -> None:
    async with connected(redis_url) as connection:
        own_id = await call(connection, "CLIENT", "ID")
        blocked = call(connection, "BLPOP", "resp:never-pushed", 0)  # waits in redis-server until killed
        behind = call(connection, "PING")
        with redis.Redis.from_url(redis_url) as other:
            other.execute_command("CLIENT", "KILL", "ID", own_id)
        for call_in_flight in (blocked, behind):
            with pytest.raises(redis.exceptions.ConnectionError, match="was lost"):
                await call_in_flight
        await connection.gone


async def test_a_write_to_a_replica_ends_the_connection(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        with redis.Redis.from_url(server.url) as admin:
            admin.execute_command("REPLICAOF", "127.0.0.1", "1")  # a primary never reached: read-only all the same
        async with connected(server.url) as connection:
            read = call(connection, "GET", "resp:k")
            write = call(connection, "SET", "resp:k", "v")
            behind = call(connection, "PING")
            assert await read is None
            with pytest.raises(redis.exceptions.ConnectionError, match="read-only replica"):
                await write
            with pytest.raises(redis.exceptions.ConnectionError):
                await behind
            assert not connection.open


class Recorded(asyncio.Transport):
    """A transport that keeps what is written to it: the protocol's own logic, without a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def abort(self) -> None:
        pass


async def test_commands_sent_in_one_pass_of_the_loop_go_out_in_one_write() -> None:
    connection = RespConnection(name="recorded:0", reply_seconds=10)
    transport = Recorded()
    connection.connection_made(transport)
    replies = [call(connection, "ECHO", str(n)) for n in range(3)]
    assert transport.writes == []  # not yet: more may come in this pass
    await asyncio.sleep(0)  # one pass of the loop
    assert transport.writes == [b"".join(hiredis.pack_command(("ECHO", str(n))) for n in range(3))]
    connection.data_received(b"$1\r\n0\r\n$1\r\n1\r\n$1\r\n2\r\n")
    assert [await reply for reply in replies] == [b"0", b"1", b"2"]
    ping = call(connection, "PING")
    await asyncio.sleep(0)
    assert transport.writes[1:] == [b"*1\r\n$4\r\nPING\r\n"]
    connection.lose(redis.exceptions.ConnectionError("test over"))
    with pytest.raises(redis.exceptions.ConnectionError):
        await ping


async def test_a_reply_nobody_asked_for_ends_the_connection(redis_url: str) -> None:
    async with connected(redis_url) as connection:
        connection.data_received(b"+surprise\r\n")
        assert not connection.open
        await connection.gone
