"""Two `gateway serve` replicas on one real redis-server: a replica killed mid-turn leaves no conversation locked.

The killed replica holds 20 conversations, each turn waiting on the upstream; the other replica,
whose lock wait is 5 s (lockTimeoutSeconds: a longer wait is a 409), must serve each of them,
and every stored history must hold whole turns, each once.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.memory_turns import stored
from tests.support.processes import free_port, spawn_gateway, stopped_at_exit, wait_ready
from tests.support.redis_replicas import ask, client_of, replica_config
from tests.support.servers import RedisProcess, redis_server
from tests.support.waiting import eventually

CONVERSATIONS = 20


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_server(tmp_path) as server:
        yield server


async def test_a_killed_replicas_conversations_are_served_by_the_other(
    tmp_path: Path, upstream: FakeUpstream, redis: RedisProcess
) -> None:
    config = replica_config(tmp_path / "gateway.yaml", upstream, redis)
    ids = [f"conv-{index}" for index in range(CONVERSATIONS)]
    never = asyncio.Event()  # the killed replica's turns wait on it: their answers never come
    with stopped_at_exit() as processes:
        ports = [free_port(), free_port()]
        for port in ports:
            processes.append(spawn_gateway(config, port, output=subprocess.DEVNULL))
        for port, process in zip(ports, processes, strict=True):
            await wait_ready(port, process)
        doomed, survivor = client_of(ports[0]), client_of(ports[1])
        try:
            upstream.default = Step(body=chat_completion("first answer"))
            await asyncio.gather(*(ask(doomed, memory_id, "first") for memory_id in ids))
            upstream.then(*[Step(body=chat_completion("lost answer"), gate=never) for _ in ids])
            upstream.default = Step(body=chat_completion("second answer"))
            in_flight = [asyncio.create_task(ask(doomed, memory_id, "cut off")) for memory_id in ids]
            await eventually(lambda: upstream.calls == 2 * CONVERSATIONS, what="20 turns held upstream")
            processes[0].send_signal(signal.SIGKILL)
            processes[0].wait(10)
            for cut in await asyncio.gather(*in_flight, return_exceptions=True):
                assert isinstance(cut, openai.APIConnectionError), cut
            answers = await asyncio.gather(*(ask(survivor, memory_id, "second") for memory_id in ids))
            assert answers == ["second answer"] * CONVERSATIONS
            for memory_id in ids:
                status, body = await stored(survivor, memory_id)
                assert status == 200
                assert body["messages"] == [
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "first answer"},
                    {"role": "user", "content": "second"},
                    {"role": "assistant", "content": "second answer"},
                ]
        finally:
            never.set()
            await doomed.close()
            await survivor.close()
