"""The anthropic SDK (and openai's) on a gateway with keys on, and a fake Claude behind it: the Messages API tests' parts.

A test module gets the `start` and `claude` fixtures by importing `anthropic_gateway` and
`fake_claude` from here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message

from tests.support.fakes_anthropic import MODEL as CLAUDE_MODEL
from tests.support.fakes_anthropic import FakeAnthropic, start_anthropic
from tests.support.gateway import GATEWAY_KEY, KEYS, Gateway
from tests.support.tool_calls import QUESTION

CLAUDE_KEY = "sk-ant-operator-secret-0123456789"
HELLO = [{"role": "user", "content": "hello"}]
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@dataclass
class Clients:
    """Both SDKs pointed at one gateway, and its root URL."""

    openai_client: openai.AsyncOpenAI
    anthropic_client: anthropic.AsyncAnthropic
    root: str

    def new_client(self, **options: Any) -> anthropic.AsyncAnthropic:
        """Another anthropic client of this gateway (the caller closes it), e.g. with another key."""
        return anthropic.AsyncAnthropic(base_url=self.root, max_retries=0, timeout=20, **options)


Start = Callable[[str], Awaitable[Clients]]


@pytest.fixture(name="start")
async def anthropic_gateway(gateway: Gateway) -> AsyncIterator[Start]:
    """Start the gateway on a YAML config (gateway keys on); both clients use GATEWAY_KEY."""
    made: list[anthropic.AsyncAnthropic] = []

    async def run(config: str) -> Clients:
        client = await gateway(f"{KEYS}\n{config}")
        root = str(client.base_url).rstrip("/").removesuffix("/v1")
        sdk = anthropic.AsyncAnthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0, timeout=20)
        made.append(sdk)
        return Clients(client, sdk, root)

    yield run
    for sdk in made:
        await sdk.close()


@pytest.fixture(name="claude")
async def fake_claude(aiohttp_server: Any) -> FakeAnthropic:
    """A fake Anthropic Messages API on a free loopback port."""
    return await start_anthropic(aiohttp_server)


def claude_target(fake: FakeAnthropic) -> str:
    """An anthropic target named claude on `fake`, its model set by overrideParams."""
    return f'{{name: claude, provider: anthropic, baseUrl: "{fake.url}", apiKey: {CLAUDE_KEY}, overrideParams: {{model: {CLAUDE_MODEL}}}}}'


def claude_route(fake: FakeAnthropic) -> str:
    """Route `chat` to claude_target(fake)."""
    return f"routes: {{chat: {claude_target(fake)}}}"


def header_text(headers: dict[str, str]) -> str:
    """Headers as lines of `name: value`."""
    return "\n".join(f"{name}: {value}" for name, value in headers.items())


async def use_the_tool(client: anthropic.AsyncAnthropic, output: str) -> tuple[Message, Message]:
    """Ask what needs the weather tool, then send its output back: the two answers."""
    first = await client.messages.create(model="chat", max_tokens=64, messages=[QUESTION], tools=[WEATHER_TOOL])
    [use] = [block for block in first.content if block.type == "tool_use"]
    result = {"type": "tool_result", "tool_use_id": use.id, "content": output}
    second = await client.messages.create(
        model="chat", max_tokens=64, tools=[WEATHER_TOOL],
        messages=[QUESTION, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}],
    )  # fmt: skip
    return first, second


async def read_until_error(client: anthropic.AsyncAnthropic) -> tuple[list[str], anthropic.APIStatusError]:
    """Read a raw stream: the event types before the SDK raised, and what it raised."""
    stream = await client.messages.create(model="chat", max_tokens=64, messages=HELLO, stream=True)
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        async for event in stream:
            seen.append(event.type)
    return seen, caught.value
