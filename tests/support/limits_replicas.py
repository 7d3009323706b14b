"""Gateway replicas sharing one key's limits on Redis, and what each answers a chat request (tests/server/test_limits_*)."""

from __future__ import annotations

from pathlib import Path

import openai

from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY

HELLO = [{"role": "user", "content": "hello there"}]


def replica_config(upstream: FakeUpstream, tmp_path: Path, *, limits: str, redis: str) -> str:
    """A replica's config: key team-a under `limits`, counted on the Redis `redis` names (limits' own keys, as YAML)."""
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}, limits: {limits}}}]}}
limits: {{store: redis, {redis}}}
memory: {{store: sqlite, path: "{tmp_path / 'memory.db'}"}}
routes:
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: up-key}}
"""


async def outcome(client: openai.AsyncOpenAI) -> int:
    """The status the gateway answered one chat request with (any other error than a 429 fails the test)."""
    try:
        await client.chat.completions.create(model="chat", messages=HELLO)  # type: ignore[arg-type]
    except openai.RateLimitError:
        return 429
    return 200
