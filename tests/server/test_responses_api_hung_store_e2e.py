"""POST /v1/responses while the Redis memory store hangs (SIGSTOP): a stateless answer does not wait for its record.

A response's record (which target produced it; on a translated route, its turn) is bookkeeping:
the answer waits for it a second at most, then the store is skipped a few seconds
(gateway.server.bookkeeping). The client's timeout, 8 s, is below the store's own 10 s for a
reply: an answer that waited for the store would not arrive. With two tenants a continuation
needs its record: 503 while the store is skipped, then 404 for a response whose record was skipped.
A memory read waits for the store once (10 s), not once per retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.support.fakes import FakeUpstream, Step, chat_completion
from tests.support.fakes_responses import FakeResponses, start_responses
from tests.support.gateway import GATEWAY_KEY, Gateway, start_upstream
from tests.support.openai_errors import error_object
from tests.support.redis_hangs import hung
from tests.support.servers import RedisProcess, redis_server
from tests.support.waiting import eventually

BEFORE_THE_STORE_GIVES_UP = 8.0  # the client's timeout: below the Redis store's 10 s for a reply
ONE_WAIT_NOT_FOUR = 30.0  # past the store's one 10 s wait, before four of them


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    with redis_server(tmp_path) as started:
        yield started


def config(responses: FakeResponses, chat: FakeUpstream, url: str) -> str:
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}, {{name: team-b, key: gw-other-key}}]}}
memory: {{store: redis, url: "{url}"}}
routes:
  native: {{name: up, provider: openai, baseUrl: "{responses.url}", apiKey: key-up}}
  translated: {{name: chat, provider: openai, baseUrl: "{chat.url}", apiKey: key-chat, responsesApi: translate}}
"""


async def refusal(call: Any) -> openai.APIStatusError:
    """The error the SDK raised for `call` (it must fail with a status)."""
    with pytest.raises(openai.APIStatusError) as caught:
        await call
    return caught.value


async def test_stateless_answers_go_on_while_the_store_hangs_and_what_they_lose(
    gateway: Gateway, aiohttp_server: Any, server: RedisProcess
) -> None:
    responses = await start_responses(aiohttp_server)
    chat = await start_upstream(aiohttp_server, Step(body=chat_completion("translated")))
    client = await gateway(config(responses, chat, server.url), timeout=BEFORE_THE_STORE_GIVES_UP)
    await client.responses.create(model="native", input="connect")  # the store's connections are open
    with hung(server):
        plain = await client.responses.create(model="native", input="q")
        events = [event async for event in await client.responses.create(model="native", input="q", stream=True)]
        streamed = events[-1]
        assert streamed.type == "response.completed"
        translated = await client.responses.create(model="translated", input="q")
        assert (plain.output_text, translated.output_text) == ("Hello from Responses", "translated")
        # its own record, still being written, is waited for a few seconds (a store slow for a moment), then a 503
        patient = client.with_options(timeout=30)
        skipped = await refusal(patient.responses.create(model="native", input="next", previous_response_id=streamed.response.id))
        assert skipped.status_code == 503 and error_object(skipped)["code"] == "memory_unavailable"

    async def settled(response_id: str, model: str) -> bool:
        """Whether continuing `response_id` is no longer refused for the store: its record found (written late), or a
        404 (its write failed: Redis hung past its 10 s)."""
        try:
            await client.responses.create(model=model, input="next", previous_response_id=response_id)
        except openai.APIStatusError as error:
            if error.status_code == 503:
                return False
            assert error.status_code == 404 and error_object(error)["param"] == "previous_response_id", error
        return True

    await eventually(lambda: settled(streamed.response.id, "native"), seconds=30, what="the pause ended")
    await eventually(lambda: settled(translated.id, "translated"), seconds=30, what="the pause ended")


async def test_a_memory_read_on_a_hung_store_is_a_503_after_one_wait(
    gateway: Gateway, aiohttp_server: Any, server: RedisProcess
) -> None:
    responses = await start_responses(aiohttp_server)
    chat = await start_upstream(aiohttp_server, Step(body=chat_completion("translated")))
    client = await gateway(config(responses, chat, server.url))
    await client.responses.create(model="native", input="connect")
    base, key = str(client.base_url).rstrip("/"), {"Authorization": f"Bearer {GATEWAY_KEY}"}
    timeout = aiohttp.ClientTimeout(total=ONE_WAIT_NOT_FOUR)
    with hung(server):
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(f"{base}/memory/m1", headers=key) as read:
            body = await read.json()
    assert read.status == 503 and set(body) == {"error"} and body["error"]["code"] == "memory_unavailable", body
