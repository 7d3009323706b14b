"""What a real redis-server was asked, as MONITOR shows it: each client command, and each a script ran."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio as aioredis


@dataclass
class Seen:
    """Commands the server ran while watched: `sent` by clients (one round trip each), `scripted` by scripts."""

    sent: list[str] = field(default_factory=list)
    scripted: list[str] = field(default_factory=list)

    def sent_naming(self, text: str) -> list[str]:
        return [command for command in self.sent if text in command]

    def scripted_naming(self, text: str) -> list[str]:
        return [command for command in self.scripted if text in command]


@asynccontextmanager
async def watched(url: str) -> AsyncIterator[Seen]:
    """Watch the server at `url` for the block's time; on leaving, every command it ran before is in Seen.

    The end is a marker command sent on leaving: MONITOR shows commands in the order they ran.
    """
    seen = Seen()
    marker = f"end-of-watch-{uuid.uuid4().hex}"
    client = aioredis.Redis.from_url(url)
    started = asyncio.Event()

    async def listen() -> None:
        async with client.monitor() as monitor:
            started.set()
            async for info in monitor.listen():
                command = info["command"]
                if marker in command:
                    return
                (seen.scripted if info["client_type"] == "lua" else seen.sent).append(command)

    listening = asyncio.create_task(listen())
    try:
        await asyncio.wait_for(started.wait(), 10)
        yield seen
        await client.echo(marker)
        await asyncio.wait_for(listening, 10)
    finally:
        listening.cancel()
        await client.aclose()
