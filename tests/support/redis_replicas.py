"""`gateway serve` replicas sharing a real redis-server's memory, and the turns a test asks of them."""

from __future__ import annotations

from pathlib import Path

import openai

from tests.support.fakes import FakeUpstream
from tests.support.servers import RedisProcess


def replica_config(
    path: Path, upstream: FakeUpstream, redis: RedisProcess, *, lock_timeout: float = 5
) -> Path:
    """A config at `path`: memory on `redis` (a longer lock wait is a 409), route `chat` to `upstream`."""
    path.write_text(f"""
memory: {{store: redis, url: '{redis.url}', lockTimeoutSeconds: {lock_timeout:g}}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: k}}
""")
    return path


def client_of(port: int, *, timeout: float = 30) -> openai.AsyncOpenAI:
    """The OpenAI SDK on the replica at `port`, without retries."""
    return openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=timeout)


async def ask(client: openai.AsyncOpenAI, memory_id: str, text: str) -> str | None:
    """One turn on conversation `memory_id` of route `chat`: the answer's text."""
    answer = await client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": text}], extra_headers={"memoryId": memory_id}
    )
    return answer.choices[0].message.content
