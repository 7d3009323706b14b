"""gateway.stores.redis on a real Redis Cluster of three primaries and a real Sentinel-watched primary and replica.

Memory turns, conversation locks, response-id pins and shared breakers run on the Cluster
through a client seeded with one node (`MOVED` and `ASK` followed while a slot moves); on
Sentinel, a failover during a stream of turns is followed without a 500. With waitReplicas, a
turn is acknowledged once a replica has it.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis
import redis.exceptions

from gateway.config.loader import parse_config
from gateway.core.memory.entries import load_entry
from gateway.core.stores import RedisConnection, SentinelSettings
from gateway.core.tree import Fallback
from gateway.memory.redis import RedisStore, key_prefix
from gateway.stores.redis import LEAN_SWITCH, masked
from gateway.upstream.breakers.redis import RedisBreakers
from tests.support.breakers import FAIL, HELD, PATIENT, Clock, note, route, t
from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.fakes_responses import Answer, FakeResponses, openai_error, start_responses
from tests.support.gateway import KEYS, Gateway
from tests.support.memory_turns import stored, u
from tests.support.processes import free_port
from tests.support.redis_cluster import (
    MASTER_NAME,
    Cluster,
    Watched,
    redis_cluster,
    redis_replicated,
    redis_sentinels,
)
from tests.support.redis_stores import entry
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def chat_config(upstream: FakeUpstream, memory: str) -> str:
    return f"""{KEYS}
memory: {memory}
routes: {{chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}
"""


def on_cluster(cluster: Cluster) -> str:
    return f'{{store: redis, url: "{cluster.url}", cluster: true}}'


async def turn(client: openai.AsyncOpenAI, memory_id: str, text: str) -> None:
    await client.chat.completions.create(
        model="chat", messages=[u(text)], extra_headers={"memoryId": memory_id}  # type: ignore[list-item]
    )


def test_sentinel_and_url_passwords_are_masked() -> None:
    connection = RedisConnection(
        url="redis://:url-pw@h:1/0",
        sentinel=SentinelSettings(master_name="m", nodes=(("s", 1),), password="primary-pw", sentinel_password="watch-pw"),
    )
    assert masked("url-pw primary-pw watch-pw kept", connection) == "*** *** *** kept"


async def test_memory_turns_spread_over_every_primary(gateway: Gateway, make_upstream: Any, cluster: Cluster) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    client = await gateway(chat_config(upstream, on_cluster(cluster)))
    ids = [f"spread-{n}" for n in range(60)]
    await asyncio.gather(*(turn(client, memory_id, "first") for memory_id in ids))
    await asyncio.gather(*(turn(client, memory_id, "second") for memory_id in ids))
    for memory_id in ids:
        status, body = await stored(client, memory_id)
        assert status == 200 and [m["content"] for m in body["messages"]] == ["first", "noted", "second", "noted"]
    owners = {cluster.owner(f"{key_prefix(('team-a', memory_id))}:msgs") for memory_id in ids}
    assert owners == set(cluster.ports)  # the conversations live on all three primaries


async def test_turns_of_one_conversation_hold_its_lock_on_the_cluster(
    gateway: Gateway, make_upstream: Any, cluster: Cluster
) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("ok"), delay=0.02))
    client = await gateway(chat_config(upstream, on_cluster(cluster)))
    await asyncio.gather(*(turn(client, "locked", f"q{n}") for n in range(8)))
    status, body = await stored(client, "locked")
    assert status == 200 and len(body["messages"]) == 16
    # each request carried every turn before it: none ran beside another
    assert sorted(len(request.body["messages"]) for request in upstream.requests) == list(range(1, 16, 2))


async def test_a_moved_slot_is_followed(gateway: Gateway, make_upstream: Any, cluster: Cluster) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    client = await gateway(chat_config(upstream, on_cluster(cluster)))
    await turn(client, "moving", "before")
    key = f"{key_prefix(('team-a', 'moving'))}:msgs"
    before = cluster.owner(key)
    cluster.move_slot(key, to=next(port for port in cluster.ports if port != before))
    assert cluster.owner(key) != before
    await turn(client, "moving", "after")  # the client's map of slots is stale: MOVED
    status, body = await stored(client, "moving")
    assert status == 200 and [m["content"] for m in body["messages"]] == ["before", "noted", "after", "noted"]


async def test_a_key_half_way_through_a_move_is_asked_for_where_it_went(cluster: Cluster) -> None:
    store = RedisStore(RedisConnection(url=cluster.url, cluster=True), ttl_seconds=60, max_messages=10, lock_timeout=5)
    try:
        await store.put_value("response:asked", "here")
        key = "gw:value:response:asked"
        source = cluster.owner(key)
        target = next(port for port in cluster.ports if port != source)
        slot = cluster.start_move(key, to=target)
        cluster.migrate_keys(slot, source=source, to=target)
        with cluster.node(source) as old, pytest.raises(redis.exceptions.AskError):
            old.get(key)  # the source sends readers on: ASK
        assert await store.get_value("response:asked") == "here"
        cluster.finish_move(slot, to=target)
        assert await store.get_value("response:asked") == "here"
    finally:
        await store.close()


async def test_response_pins_live_on_the_cluster(gateway: Gateway, aiohttp_server: Any, cluster: Cluster) -> None:
    one, two = await start_responses(aiohttp_server, "one"), await start_responses(aiohttp_server, "two")
    one.then(Answer(503, openai_error(503)))  # the first answer falls back to two

    def target(fake: FakeResponses) -> str:
        return f'{{name: {fake.name}, provider: openai, baseUrl: "{fake.url}", apiKey: k}}'

    client = await gateway(f"""{KEYS}
memory: {on_cluster(cluster)}
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: [503]}}
    targets: [{target(one)}, {target(two)}]
""")
    first = await client.responses.create(model="chat", input="hello")
    assert first.id == "resp_two1"
    with cluster.node(cluster.owner("gw:value:response:resp_two1")) as node:
        assert node.get("gw:value:response:resp_two1") is not None
    again = await client.responses.create(model="chat", input="and?", previous_response_id=first.id)
    assert again.id == "resp_two2" and (one.calls, two.calls) == (1, 2)  # pinned: one was not asked


async def test_breakers_are_shared_on_the_cluster(cluster: Cluster) -> None:
    connection = RedisConnection(url=cluster.url, cluster=True)
    routes = {f"r{n}": route(t(f"a{n}", HELD), name=f"r{n}") for n in range(6)}  # hash tags on every primary
    assert {cluster.owner(f"gw:brk:{{r{n}}}:a{n}") for n in range(6)} == set(cluster.ports)
    clocks = [Clock(), Clock()]
    first, second = (RedisBreakers(routes, connection, clock=clock, timeout=PATIENT) for clock in clocks)
    try:
        for name, shared in routes.items():
            target = shared.first_target
            await note(first, target, FAIL)
            await note(second, target, FAIL)  # failures in a row, counted across processes
            assert not second.available(target), name
            clocks[0].now += 1.1
            first.health(shared)  # past its view's ttl: reads the shared state
            await first.settled()
            assert not first.available(target), name
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Watched]:
    """Asked for before the gateway, so it outlives the gateway's store (whose close still talks to Redis)."""
    with redis_sentinels(tmp_path) as running:
        yield running


async def test_a_sentinel_failover_is_followed_without_a_500(
    watched: Watched, gateway: Gateway, make_upstream: Any
) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    nodes = ", ".join(f"'{node}'" for node in watched.nodes)
    client = await gateway(chat_config(upstream, f"{{store: redis, sentinel: {{masterName: {MASTER_NAME}, nodes: [{nodes}]}}}}"))
    statuses: list[int] = []
    stored: list[str] = []  # the conversation of each turn answered 200, in order

    async def turns(until: asyncio.Event) -> None:
        n = 0
        while not until.is_set():
            n += 1
            try:
                await turn(client, f"during-{n % 5}", f"q{n}")
                statuses.append(200)
                stored.append(f"during-{n % 5}")
            except openai.APIStatusError as exc:
                statuses.append(exc.status_code)

    await turn(client, "before", "kept")
    stop = asyncio.Event()
    stream = asyncio.create_task(turns(stop))
    await eventually(lambda: len(statuses) >= 5, what="turns under way before the failover")
    old = await asyncio.to_thread(watched.fail_over)
    await eventually(lambda: watched.primary_port() != old, seconds=30, what="the sentinels promote the replica")
    promoted, stored_before = len(statuses), len(stored)
    await eventually(lambda: statuses[promoted:].count(200) >= 5, seconds=30, what="turns succeed on the new primary")
    stop.set()
    await stream
    assert set(statuses) <= {200, 503}, statuses  # a turn the store could not take is a 503, never a 500
    with watched.server(watched.primary_port()) as primary:
        # a conversation stored after the promotion (one stored just before may be lost with the old primary)
        assert primary.exists(f"{key_prefix(('team-a', stored[-1]))}:msgs"), (stored_before, stored)
        assert primary.info("replication")["role"] == "master"
    await turn(client, "after", "on the new primary")


async def test_a_store_writes_to_the_new_primary_once_the_old_one_is_a_replica(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lean client's connection to the old primary answers READONLY: dropped, and the next one asks the sentinels.

    Of the lean client alone: redis-py's pool may hand a retried call another connection to the
    old primary, each answering READONLY, until its retries run out (seen 1 run in 4).
    """
    monkeypatch.delenv(LEAN_SWITCH, raising=False)
    nodes = tuple(("127.0.0.1", port) for port in watched.sentinels)
    connection = RedisConnection(sentinel=SentinelSettings(master_name=MASTER_NAME, nodes=nodes))
    store = RedisStore(connection, ttl_seconds=60, max_messages=10, lock_timeout=5)
    key = ("team-a", "followed")
    try:
        await store.append(key, [entry("user", "before")], system=None)
        old = await asyncio.to_thread(watched.fail_over)
        await eventually(lambda: watched.demoted(old), seconds=30, what="the old primary is a replica")
        async with store.lock(key):  # the scripts' connection still goes to the old primary
            await store.append(key, [entry("user", "after")], system=None)
        with watched.server(watched.primary_port()) as primary:
            assert [load_entry(raw) for raw in primary.lrange(f"{key_prefix(key)}:msgs", -1, -1)] == [entry("user", "after")]
    finally:
        await store.close()


PASSWORDS = {"REDIS_PASSWORD": "primary-pw-0301", "SENTINEL_PASSWORD": "sentinel-pw-0302"}


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Watched]:
    """Sentinels and servers that require passwords, asked for before the gateway (as `watched`)."""
    passwords = {"password": PASSWORDS["REDIS_PASSWORD"], "sentinel_password": PASSWORDS["SENTINEL_PASSWORD"]}
    with redis_sentinels(tmp_path, **passwords) as running:
        yield running


async def test_sentinel_and_its_primary_take_their_passwords_from_the_environment(
    guarded: Watched, gateway: Gateway, make_upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    nodes = ", ".join(f"'{node}'" for node in guarded.nodes)
    sentinel = (
        f"{{masterName: {MASTER_NAME}, nodes: [{nodes}], password: '${{REDIS_PASSWORD}}', "
        "sentinelPassword: '${SENTINEL_PASSWORD}'}"
    )
    config = parse_config(textwrap.dedent(chat_config(upstream, f"{{store: redis, sentinel: {sentinel}}}")), env=PASSWORDS)
    client = await gateway(config)
    await turn(client, "guarded", "q")
    with guarded.server(guarded.primary) as primary:
        assert primary.exists(f"{key_prefix(('team-a', 'guarded'))}:msgs")
    assert not any(secret in caplog.text for secret in PASSWORDS.values())


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[tuple[int, int]]:
    ports = free_port(), free_port()
    with redis_replicated(tmp_path, primary=ports[0], replica=ports[1]):
        yield ports


def wait_calls(port: int) -> int:
    with redis.Redis(host="127.0.0.1", port=port) as client:
        return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


async def test_a_turn_is_acknowledged_once_a_replica_has_it(
    replicated: tuple[int, int], gateway: Gateway, make_upstream: Any
) -> None:
    primary, replica = replicated
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    # the default 1 s wait may run out on a loaded machine: the turn would stand without the replica's copy
    memory = f'{{store: redis, url: "redis://127.0.0.1:{primary}/0", waitReplicas: 1, waitTimeoutSeconds: 5}}'
    client = await gateway(chat_config(upstream, memory))
    for n in range(3):
        await turn(client, "confirmed", f"q{n}")
        with redis.Redis(host="127.0.0.1", port=replica) as copy:  # the replica had it before the answer
            assert copy.llen(f"{key_prefix(('team-a', 'confirmed'))}:msgs") == 2 * (n + 1)
    assert wait_calls(primary) == 3  # one WAIT per turn


async def test_a_turn_no_replica_confirms_stands_with_a_warning(
    replicated: tuple[int, int], gateway: Gateway, make_upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    primary, replica = replicated
    with redis.Redis(host="127.0.0.1", port=replica) as detached:
        detached.execute_command("REPLICAOF", "NO", "ONE")
    upstream: FakeUpstream = await make_upstream(Step(body=chat_completion("noted")))
    memory = f'{{store: redis, url: "redis://127.0.0.1:{primary}/0", waitReplicas: 1, waitTimeoutSeconds: 0.05}}'
    client = await gateway(chat_config(upstream, memory))
    await turn(client, "alone", "q")
    status, body = await stored(client, "alone")
    assert status == 200 and len(body["messages"]) == 2
    assert "a turn was confirmed by 0 of 1 replicas within 0.05s" in caplog.text


@pytest.mark.parametrize("name", ["}curly", ""])
async def test_a_routes_breakers_share_a_slot_whatever_its_name(cluster: Cluster, name: str) -> None:
    a, b = t("a", HELD), t("b", HELD)
    shared = route(Fallback("f", 1, (a, b)), name=name)
    clocks = [Clock(), Clock()]
    first, second = (RedisBreakers({name: shared}, RedisConnection(url=cluster.url, cluster=True), clock=clock, timeout=PATIENT) for clock in clocks)
    try:
        await note(first, b, FAIL)
        await note(second, b, FAIL)
        clocks[0].now += 1.1
        first.health(shared)  # one script over both targets' keys
        await first.settled()
        assert not first.available(b)
    finally:
        await first.close()
        await second.close()
