"""gateway.stores.lean_redis: scripts on one shared connection to a real redis-server, through its losses and hangs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff

from gateway.memory.store import StoreUnavailable
from gateway.stores.lean_redis import Find, LeanRedis, Login
from gateway.stores.redis import LEAN_SWITCH
from tests.support.processes import free_port
from tests.support.redis_hangs import hung
from tests.support.redis_stores import entry, redis_store
from tests.support.servers import RedisProcess, redis_server
from tests.support.tcp_relay import relay_to
from tests.support.waiting import eventually

COUNT = "return redis.call('INCR', KEYS[1])"


@pytest.fixture(autouse=True)
def lean_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the lean client: a run with GATEWAY_REDIS_LEAN=off (the fallback's) must not turn it off."""
    monkeypatch.delenv(LEAN_SWITCH, raising=False)


def at(url: str) -> Find:
    host, _, port = url.removeprefix("redis://").partition("/")[0].rpartition(":")

    async def find() -> tuple[str, int]:
        return host, int(port)

    return find


def lean(url: str, *, login: Login | None = None, reply_seconds: float = 10, connect_seconds: float = 5) -> LeanRedis:
    retry = Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.05), retries=3)
    return LeanRedis(
        at(url), login=login or Login(), reply_seconds=reply_seconds, connect_seconds=connect_seconds, retry=retry
    )


def commands_served(url: str, name: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))


def clients(url: str) -> list[dict[str, str]]:
    with redis.Redis.from_url(url) as admin:
        listed: list[dict[str, str]] = admin.client_list()
        return listed


async def test_a_call_killed_mid_flight_is_sent_again_on_a_new_connection(redis_url: str) -> None:
    key = f"lean:{uuid.uuid4().hex}"
    client = lean(redis_url)
    try:
        killed = await client.call(("CLIENT", "ID"))
        call = asyncio.ensure_future(client.call(("BLPOP", key, 0)))
        await eventually(lambda: any(c["cmd"] == "blpop" for c in clients(redis_url)), what="BLPOP waits")
        with redis.Redis.from_url(redis_url) as other:
            other.execute_command("CLIENT", "KILL", "ID", killed)
            await eventually(
                lambda: any(c["cmd"] == "blpop" and c["id"] != str(killed) for c in clients(redis_url)),
                what="BLPOP waits again, on a new connection",
            )
            other.lpush(key, "pushed")
        assert await call == [key.encode(), b"pushed"]
    finally:
        await client.close()


async def test_a_script_redis_lost_is_loaded_again(redis_url: str) -> None:
    client = lean(redis_url)
    try:
        count = client.register_script(COUNT)
        key = f"lean:{uuid.uuid4().hex}"
        await count(keys=[key])
        loads = commands_served(redis_url, "script|load")
        with redis.Redis.from_url(redis_url) as admin:
            admin.script_flush()
        assert await count(keys=[key]) == 2
        assert commands_served(redis_url, "script|load") == loads + 1
    finally:
        await client.close()


async def test_a_redis_that_is_gone_fails_the_store_without_its_password() -> None:
    store = redis_store(f"redis://:hidden-pw-7@127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(StoreUnavailable) as failure:
            await store.append(("t", "gone"), [entry("user", "q")], system=None)
        assert "hidden-pw-7" not in str(failure.value) and "127.0.0.1" in str(failure.value)
    finally:
        await store.close()


async def test_a_reply_that_never_comes_fails_the_call_without_retrying(redis_url: str) -> None:
    async with relay_to(redis_url) as relay:
        client = lean(relay.url, reply_seconds=0.2)

        async def answered() -> bool:
            """Whether a PING came back within the 0.2 s: on a loaded machine, not every one does."""
            try:
                await client.call(("PING",))
            except redis.exceptions.TimeoutError:
                return False
            return True

        try:
            await eventually(answered, what="a PING answered within 0.2 s")  # connected, logged in
            relay.replies.clear()
            with redis.Redis.from_url(redis_url) as admin:
                connections = admin.info("stats")["total_connections_received"]
                with pytest.raises(redis.exceptions.TimeoutError, match=r"no reply within 0\.2s"):
                    await client.call(("ECHO", "never answered"))
                assert admin.info("stats")["total_connections_received"] == connections  # not retried anew
        finally:
            await client.close()


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server that stops (SIGSTOP) once it accepted connections: it never answers."""
    with redis_server(tmp_path) as server, hung(server):
        yield server


async def test_a_stopped_redis_fails_the_login_within_the_connect_timeout(stopped: RedisProcess) -> None:
    client = lean(stopped.url, login=Login(password="pw"), connect_seconds=0.2)
    try:
        with pytest.raises(redis.exceptions.TimeoutError, match=r"took more than 0\.2s"):
            await client.call(("PING",))
    finally:
        await client.close()


async def test_a_user_with_a_password_on_database_5(redis_url: str) -> None:
    user, password = f"lean-{uuid.uuid4().hex[:8]}", "user-pw-31"
    with redis.Redis.from_url(redis_url) as admin:
        admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all"])
    host_port = redis_url.removeprefix("redis://").partition("/")[0]
    store = redis_store(f"redis://{user}:{password}@{host_port}/5")
    try:
        await store.append(("t", "acl"), [entry("user", "q")], system=None)
        assert [c["db"] for c in clients(redis_url) if c["user"] == user] == ["5"]  # the store's lean connection
        with redis.Redis.from_url(redis_url) as admin:
            admin.select(5)
            assert admin.exists("gw:mem:{t:acl}:msgs")
    finally:
        await store.close()
        with redis.Redis.from_url(redis_url) as admin:
            admin.acl_deluser(user)


async def test_a_password_given_to_a_redis_that_needs_none_is_taken(redis_url: str) -> None:
    """As with redis-py (HELLO 3 AUTH default ...): the default user without a password takes any."""
    client = lean(redis_url, login=Login(password="not-needed"))
    try:
        assert await client.call(("PING",)) == b"PONG"
    finally:
        await client.close()


async def test_a_wrong_password_is_refused_at_once_and_never_shown(redis_url: str) -> None:
    host_port = redis_url.removeprefix("redis://").partition("/")[0]
    store = redis_store(f"redis://nobody:wrong-pw-5@{host_port}/0")
    logins = commands_served(redis_url, "auth")
    try:
        with pytest.raises(StoreUnavailable) as failure:
            await store.append(("t", "refused"), [entry("user", "q")], system=None)
        assert "wrong-pw-5" not in str(failure.value) and "WRONGPASS" in str(failure.value)
        assert commands_served(redis_url, "auth") == logins + 1  # not retried
    finally:
        await store.close()


async def test_close_fails_the_calls_in_flight_and_every_call_after(redis_url: str) -> None:
    client = lean(redis_url)
    await client.call(("PING",))
    blocked = asyncio.ensure_future(client.call(("BLPOP", f"lean:{uuid.uuid4().hex}", 0)))
    await eventually(lambda: any(c["cmd"] == "blpop" for c in clients(redis_url)), what="BLPOP waits")
    await client.close()
    with pytest.raises(redis.exceptions.ConnectionError):
        await blocked
    with pytest.raises(redis.exceptions.ConnectionError, match="closed"):
        await client.call(("PING",))


async def test_close_while_connecting_fails_the_callers_waiting_for_the_connection() -> None:
    asked = asyncio.Event()

    async def never_answers() -> tuple[str, int]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("not reached")

    client = LeanRedis(never_answers, login=Login(), reply_seconds=1, connect_seconds=60, retry=Retry(NoBackoff(), 3))
    waiting = asyncio.ensure_future(client.call(("PING",)))
    await asked.wait()
    await client.close()
    with pytest.raises(redis.exceptions.ConnectionError, match="closed"):
        await waiting
