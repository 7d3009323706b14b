"""A running gateway's logs and answers never carry a secret from its config: the memory URL's password, a
gateway key, a memory path from the environment.

What the loader and check-config show of such values is tested in tests/config/test_loader.py,
tests/config/test_tree.py and tests/cli/test_describe.py; a secret in a target's baseUrl in
test_secrets_e2e.py.
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import aiohttp
import pytest

from gateway.config.loader import parse_config
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.servers import free_port


@pytest.mark.parametrize("reachable", [True, False], ids=["redis", "closed-port"])
async def test_the_memory_urls_password_and_the_auth_keys_never_reach_logs_or_answers(
    reachable: bool, redis_url: str, gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = redis_url.split("://", 1)[1].split("/", 1)[0] if reachable else f"127.0.0.1:{free_port()}"
    env = {"REDIS_PASSWORD": "redis-pass-0005", "GATEWAY_KEY": GATEWAY_KEY}
    config = parse_config(
        textwrap.dedent(f"""
        memory: {{store: redis, url: "redis://:${{REDIS_PASSWORD}}@{host}/0"}}
        auth: {{keys: [{{name: ops, key: "${{GATEWAY_KEY}}"}}]}}
        routes: {{m: {{provider: mock}}}}
        """),
        env=env,
    )
    client = await gateway(config)
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "memoryId": "c1"}
    async with aiohttp.ClientSession() as session, session.post(
        f"{client.base_url}chat/completions", json=body, headers=headers
    ) as response:
        answer = await response.text()
    assert response.status == (200 if reachable else 503), answer
    for secret in ("redis-pass-0005", GATEWAY_KEY):
        assert secret not in answer and secret not in caplog.text


async def test_a_memory_path_from_the_environment_is_shown_as_its_reference_in_logs_and_answers(
    gateway: Gateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SQLite store's errors and log lines name `${MEMORY_DIR}/m.db`, never the directory it stands for."""
    import os

    import openai

    secret_dir = tmp_path / "dir-token-0009"
    config = parse_config(
        "memory: {store: sqlite, path: '${MEMORY_DIR}/m.db'}\nroutes:\n  m: {provider: mock}\n",
        env={"MEMORY_DIR": str(secret_dir)},
    )
    assert config.memory.path == f"{secret_dir}/m.db" and config.memory.shown_path == "${MEMORY_DIR}/m.db"
    client = await gateway(config)
    turn: dict = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "extra_headers": {"x-memory-id": "c"}}
    await client.chat.completions.create(**turn)
    os.remove(secret_dir / "m.db")  # found out by the next write: logged, and that turn refused
    with caplog.at_level(logging.DEBUG), pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(**turn)
    assert caught.value.status_code == 503
    told = str(caught.value.body) + "\n".join(record.getMessage() for record in caplog.records)
    assert "dir-token-0009" not in told
    assert "${MEMORY_DIR}/m.db" in "\n".join(record.getMessage() for record in caplog.records)


