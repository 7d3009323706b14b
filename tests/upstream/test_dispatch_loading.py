"""A provider still loading (litellm's import, for an anthropic target's chat) is no attempt: its wait is timed by no deadline and told to no breaker.

The import is made to outlast the target's timeout for certain: it finishes only once a request
started after it, with the same timeout, has timed out.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import pytest

from gateway.core.breaker import PROBE
from gateway.core.tree import Fallback, Target
from gateway.upstream import dispatch
from gateway.upstream.breakers.board import LocalBreakers
from gateway.upstream.dispatch import Dispatcher, Request
from gateway.upstream.providers import registry
from gateway.upstream.providers.base import Provider
from gateway.upstream.providers.deferred import Deferred, Load
from gateway.upstream.providers.litellm import LitellmProvider
from gateway.upstream.providers.mock import MockProvider
from tests.support.breakers import FAIL, POLICY, Clock, route, t
from tests.support.fakes import FakeUpstream, Step
from tests.support.fakes_anthropic import message, message_events
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.memory_turns import u

TIMEOUT = 5  # seconds: the import outlasts it; the call after the import has all of it


class HeldImport:
    """The litellm provider's class, handed over only once `go` is set (on the load's thread)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()

    def __call__(self) -> Callable[..., Provider]:
        self.started.set()
        assert self.go.wait(60), "the test never let the import finish"
        return LitellmProvider


def config(claude: FakeUpstream, hanging: FakeUpstream) -> str:
    return f"""
auth: {{keys: [{{name: team, key: {GATEWAY_KEY}}}]}}
routes:
  claude:
    provider: anthropic
    baseUrl: "{claude.url.removesuffix('/v1')}"
    apiKey: k
    timeout: {TIMEOUT}
    breaker: {{failures: 1, cooldownSeconds: 60}}
  hanging: {{provider: openai, baseUrl: "{hanging.url}", apiKey: k, timeout: {TIMEOUT}}}
"""


async def target_health(client: openai.AsyncOpenAI, route: str) -> Any:
    root = str(client.base_url).removesuffix("/").removesuffix("/v1")
    async with aiohttp.ClientSession() as session, session.get(
        root + "/v1/gateway/health", headers={"Authorization": f"Bearer {GATEWAY_KEY}"}
    ) as response:
        return (await response.json())["routes"][route]["targets"][0]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_chat_call_waits_for_litellm_to_load_outside_its_timeout_and_breaker(
    gateway: Gateway, make_upstream: Any, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    held = HeldImport()
    monkeypatch.setattr(registry, "LITELLM", Load(held, name="litellm"))
    claude = await make_upstream(Step(events=list(message_events("Loaded."))) if stream else Step(body=message("Loaded.")))
    never = asyncio.Event()
    hanging = await make_upstream(Step(gate=never))
    client = await gateway(config(claude, hanging), timeout=60)
    asked = asyncio.create_task(
        client.chat.completions.create(model="claude", messages=[u("q")], stream=stream)  # type: ignore[call-overload]
    )
    assert await asyncio.to_thread(held.started.wait, 60)
    with pytest.raises(openai.APIStatusError) as timed_out:  # started later, with the same timeout: it has passed
        await client.chat.completions.create(model="hanging", messages=[u("q")])
    assert timed_out.value.status_code == 504
    held.go.set()
    answer = await asked
    if stream:
        text = "".join([part.choices[0].delta.content or "" async for part in answer if part.choices])
    else:
        text = answer.choices[0].message.content
    assert text == "Loaded." and claude.calls == 1
    health = await target_health(client, "claude")
    assert (health["state"], health["requests"], health["failures"]) == ("closed", 1, 0)
    never.set()


async def test_a_half_open_trial_whose_caller_leaves_while_the_provider_loads_is_given_back() -> None:
    target = t("a")
    clock, served = Clock(), route(target)
    board = LocalBreakers({"r": served}, clock=clock)
    for _ in range(3):
        board.record(target, FAIL)
    clock.now += POLICY.cooldown_seconds  # half-open: the next call is its trial
    held = HeldImport()
    dispatcher = Dispatcher({"mock": Deferred(Load(held, name="litellm"), lambda made: MockProvider())}, rng=random.Random(1), breakers=board)
    trial = asyncio.create_task(dispatcher.dispatch(served, Request("chat/completions", {"messages": [u("q")]}, None)))
    assert await asyncio.to_thread(held.started.wait, 60)  # the trial taken, its call found the provider loading
    trial.cancel()
    with pytest.raises(asyncio.CancelledError):
        await trial
    held.go.set()
    assert await board.admit(target) == PROBE


async def test_a_provider_that_never_loads_fails_its_target_after_a_bound_and_the_fallback_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An import that hangs: the route moves on once LOAD_SECONDS passed, and the target's breaker heard nothing."""
    monkeypatch.setattr(dispatch, "LOAD_SECONDS", 0.2)
    loading = t("loading", timeout=0.1)
    plain = Target(name="plain", provider="plain", base_url="", api_key="", breaker=POLICY)
    served = route(Fallback("f", 1, (loading, plain)))
    board = LocalBreakers({"r": served}, clock=Clock())
    held = HeldImport()
    providers = {"mock": Deferred(Load(held, name="litellm"), lambda made: MockProvider()), "plain": MockProvider()}
    dispatcher = Dispatcher(providers, rng=random.Random(1), breakers=board)
    try:
        result = await dispatcher.dispatch(served, Request("chat/completions", {"messages": [u("q")]}, None))
    finally:
        held.go.set()
    assert result.target is plain
    assert result.attempts[0].detail == "its provider did not load within 0.2s"
    [health] = [each for each in (await board.snapshot())["r"] if each.name == "loading"]
    assert (health.calls, health.failures) == (0, 0)


async def test_a_provider_whose_load_failed_fails_its_target_and_the_fallback_answers() -> None:
    """A failed import (litellm broken in the environment) is a failed attempt the route moves on from, not a 500."""

    def broken() -> Callable[..., Provider]:
        raise ImportError("No module named 'litellm'")

    loading = t("loading")
    plain = Target(name="plain", provider="plain", base_url="", api_key="", breaker=POLICY)
    served = route(Fallback("f", 1, (loading, plain)))
    providers = {"mock": Deferred(Load(broken, name="litellm"), lambda made: MockProvider()), "plain": MockProvider()}
    dispatcher = Dispatcher(providers, rng=random.Random(1))
    result = await dispatcher.dispatch(served, Request("chat/completions", {"messages": [u("q")]}, None))
    assert result.target is plain
    assert result.attempts[0].detail == "its provider could not be loaded (ImportError)"
