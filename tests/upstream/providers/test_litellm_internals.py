"""gateway.upstream.providers.litellm_internals: litellm's private names and their public fallbacks, both ways.

Real litellm calls: to a scripted OpenAI-compatible upstream on loopback (litellm's `hosted_vllm`
kind), or answered by litellm's own `mock_response` where only its callbacks are looked at.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from litellm import CustomLLM

from gateway.config.loader import parse_config
from gateway.core.internals import Mode, announce
from gateway.upstream.providers import litellm_internals
from gateway.upstream.providers.base import Call, EventStream, Reply
from gateway.upstream.providers.litellm import LitellmProvider, litellm  # litellm as the gateway sets it up
from gateway.upstream.providers.litellm_internals import (
    PRIVATE_CALLBACK_LISTS,
    SWITCH,
    close_stream,
    empty_callback_lists,
    internals_for,
    keep_from_mcp_bridge,
    provider_finished,
)
from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.fakes_anthropic import MODEL as CLAUDE_MODEL
from tests.support.fakes_anthropic import Answer, FakeAnthropic, message_events, start_anthropic

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

MESSAGES = [{"role": "user", "content": "hello"}]
MCP_TOOL = {"type": "mcp", "server_url": "litellm_proxy", "server_label": "theirs", "require_approval": "never"}
FUNCTION_TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
on_a_verified_release = pytest.mark.skipif(
    not litellm_internals.PRIVATE, reason=f"not used here: {litellm_internals.INTERNALS.reason}"
)


# ---------------------------------------------------------------- which names: release and switch


@pytest.mark.parametrize(
    ("version", "setting", "mode"),
    [
        ("1.110.2", None, Mode.PRIVATE),
        ("1.110.2", "", Mode.PRIVATE),
        ("1.110.2", "on", Mode.PRIVATE),
        ("1.110.2", "off", Mode.PUBLIC_CHOSEN),
        ("1.110.2", " OFF ", Mode.PUBLIC_CHOSEN),
        ("9.9.9", "off", Mode.PUBLIC_CHOSEN),
        ("1.110.3", None, Mode.PUBLIC_UNVERIFIED),  # not read against yet
        ("1.110.1", None, Mode.PUBLIC_UNVERIFIED),
        ("1.82.7", None, Mode.PUBLIC_UNVERIFIED),  # a compromised release
        ("1.110.2rc1", None, Mode.PUBLIC_UNVERIFIED),
        (None, None, Mode.PUBLIC_UNVERIFIED),  # litellm not installed
    ],
)
def test_the_private_names_are_used_only_on_a_verified_release_unless_switched_off(
    version: str | None, setting: str | None, mode: Mode
) -> None:
    assert internals_for(version, setting).mode is mode


def _chosen_at_import(setting: str | None) -> str:
    """What a fresh interpreter's litellm_internals chose, and whether that imported litellm."""
    env = {key: value for key, value in os.environ.items() if key != SWITCH}
    if setting is not None:
        env[SWITCH] = setting
    code = "import sys; from gateway.upstream.providers import litellm_internals as m; print(m.MODE.name, 'litellm' in sys.modules)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


@on_a_verified_release
def test_the_switch_is_read_at_import_without_importing_litellm() -> None:
    assert _chosen_at_import(None) == "PRIVATE False"
    assert _chosen_at_import("off") == "PUBLIC_CHOSEN False"


def test_a_release_read_against_has_every_private_list() -> None:
    if litellm_internals.installed_version() not in litellm_internals.VERIFIED:
        pytest.skip("the installed litellm is not a verified release")
    assert all(isinstance(getattr(litellm, name, None), list) for name in PRIVATE_CALLBACK_LISTS)


@pytest.mark.parametrize(("mode", "logged"), [(Mode.PUBLIC_UNVERIFIED, True), (Mode.PUBLIC_CHOSEN, False), (Mode.PRIVATE, False)])
def test_an_unverified_release_is_logged_once(
    mode: Mode, logged: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(litellm_internals, "INTERNALS", dataclasses.replace(litellm_internals.INTERNALS, mode=mode))
    announce.cache_clear()
    with caplog.at_level(logging.INFO, logger="gateway"):
        litellm_internals.announce_mode()
        litellm_internals.announce_mode()
    announce.cache_clear()
    version = litellm_internals.installed_version()
    expected = [
        f"litellm {version}: its private names were read on 1.110.2 only; chat calls go without the client's mcp tools, "
        "and a stream that ends is taken as finished"
    ]
    assert [record.getMessage() for record in caplog.records] == (expected if logged else [])


# ---------------------------------------------------------------- the MCP bridge, from a real upstream


def _hosted(upstream: FakeUpstream) -> Any:
    config = f'routes: {{r: {{provider: hosted_vllm, baseUrl: "{upstream.url}", apiKey: k, overrideParams: {{model: up}}}}}}'
    return parse_config(config).routes["r"].first_target


async def _tools_sent(upstream: FakeUpstream, tools: list[dict[str, Any]], *, private: bool) -> Any:
    """The tools (and tool choice) the upstream was sent for a chat call with `tools` kept from the bridge."""
    arguments: dict[str, Any] = {
        "model": "hosted_vllm/up", "api_base": upstream.url, "api_key": "k", "messages": MESSAGES,
        "tools": tools, "tool_choice": "auto",
    }  # fmt: skip
    keep_from_mcp_bridge(arguments, private=private)
    await litellm.acompletion(**arguments)
    sent = upstream.requests[-1].body
    return sent.get("tools"), sent.get("tool_choice")


@on_a_verified_release
async def test_with_its_private_switch_mcp_tools_go_to_the_provider_as_they_are(upstream: FakeUpstream) -> None:
    assert await _tools_sent(upstream, [MCP_TOOL, FUNCTION_TOOL], private=True) == ([MCP_TOOL, FUNCTION_TOOL], "auto")


async def test_without_it_mcp_tools_are_taken_out_of_the_call(upstream: FakeUpstream) -> None:
    assert await _tools_sent(upstream, [MCP_TOOL, FUNCTION_TOOL], private=False) == ([FUNCTION_TOOL], "auto")
    assert await _tools_sent(upstream, [MCP_TOOL], private=False) == (None, None)  # no tools, so no choice of one
    assert await _tools_sent(upstream, [FUNCTION_TOOL], private=False) == ([FUNCTION_TOOL], "auto")


async def test_a_chat_call_through_the_provider_never_reaches_the_bridge(upstream: FakeUpstream) -> None:
    provider = LitellmProvider(max_response_bytes=2**20)
    payload = {"model": "r", "messages": MESSAGES, "tools": [MCP_TOOL, FUNCTION_TOOL]}
    reply = await provider.complete(Call(_hosted(upstream), "chat/completions", payload))
    assert reply.status == 200
    tools = upstream.requests[-1].body["tools"]
    assert tools == ([MCP_TOOL, FUNCTION_TOOL] if litellm_internals.PRIVATE else [FUNCTION_TOOL])


# ---------------------------------------------------------------- callbacks


class Recorder:
    """An async success callback: counts the calls litellm tells it of."""

    def __init__(self) -> None:
        self.calls = 0
        self.told = asyncio.Event()

    async def log(self, *_: Any) -> None:
        self.calls += 1
        self.told.set()


@pytest.fixture
def no_callbacks() -> Iterator[None]:
    """litellm without callbacks afterwards, as the gateway keeps it."""
    yield
    empty_callback_lists(litellm, private=litellm_internals.PRIVATE)


async def _call_with_a_witness() -> None:
    """A call, and the wait for a callback registered just before it: litellm has told every earlier one, too."""
    witness = Recorder()
    litellm.success_callback = [witness.log]
    await litellm.acompletion(model="openai/any", messages=MESSAGES, mock_response="hi")
    await asyncio.wait_for(witness.told.wait(), timeout=30)


@on_a_verified_release
@pytest.mark.usefixtures("no_callbacks")
async def test_emptied_privately_no_callback_registered_earlier_is_told_of_a_call() -> None:
    earlier = Recorder()
    litellm.success_callback = [earlier.log]
    await litellm.acompletion(model="openai/any", messages=MESSAGES, mock_response="hi")
    await asyncio.wait_for(earlier.told.wait(), timeout=30)
    assert litellm.success_callback == []  # litellm moved it to its private list of async callbacks
    empty_callback_lists(litellm, private=True)
    await _call_with_a_witness()
    assert earlier.calls == 1


@pytest.mark.usefixtures("no_callbacks")
async def test_emptied_publicly_no_callback_registered_through_the_public_lists_is_told_of_a_call() -> None:
    earlier, later = Recorder(), Recorder()
    litellm.callbacks = [earlier.log]
    litellm.success_callback = [later.log]
    empty_callback_lists(litellm, private=False)
    await _call_with_a_witness()
    assert (earlier.calls, later.calls) == (0, 0)


# ---------------------------------------------------------------- provider headers, through public hidden_params


async def test_the_provider_s_rate_limit_headers_are_relayed_from_answers_and_streams(upstream: FakeUpstream) -> None:
    limits = {"x-ratelimit-remaining-requests": "41", "retry-after": "3", "server": "fake"}
    upstream.then(Step(body=chat_completion(), headers=limits), Step(events=stream_of("a"), headers=limits))
    provider, target = LitellmProvider(max_response_bytes=2**20), _hosted(upstream)
    answer = await provider.complete(Call(target, "chat/completions", {"model": "r", "messages": MESSAGES}))
    opened = await provider.stream(Call(target, "chat/completions", {"model": "r", "messages": MESSAGES, "stream": True}))
    assert isinstance(answer, Reply) and isinstance(opened, EventStream)
    await opened.close()
    relayed = {"x-ratelimit-remaining-requests": "41", "retry-after": "3"}
    assert (answer.headers, dict(opened.headers)) == (relayed, relayed)


# ---------------------------------------------------------------- a stream's finish, and closing it


def _piece(text: str, finish: str | None = None) -> dict[str, Any]:
    """A chunk as a litellm custom provider streams it (litellm's GenericStreamingChunk)."""
    return {"text": text, "is_finished": finish is not None, "finish_reason": finish or "", "usage": None, "index": 0, "tool_use": None}


class Scripted(CustomLLM):
    """A provider through litellm's public custom_provider_map: streams "Hel", "lo", then its finish if it has one."""

    def __init__(self, finish: str | None) -> None:
        super().__init__()
        self.finish = finish

    async def astreaming(self, *args: Any, **kwargs: Any) -> Any:  # litellm's own signature is untyped
        yield _piece("Hel")
        yield _piece("lo")
        if self.finish is not None:
            yield _piece("", self.finish)


@pytest.fixture
def scripted() -> Iterator[None]:
    """litellm's custom providers as they were afterwards."""
    before = litellm.custom_provider_map
    yield
    litellm.custom_provider_map = before


async def _finished_when_the_finish_came(finish: str | None, *, private: bool) -> bool:
    """What provider_finished said of a real litellm chat stream at its chunk with a finish reason."""
    litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": Scripted(finish)}]
    stream = await litellm.acompletion(model="scripted/m", messages=MESSAGES, stream=True)
    async for chunk in stream:
        if any(choice.finish_reason for choice in chunk.choices):
            return provider_finished(stream, private=private)
    raise AssertionError("litellm ended the stream without a finish reason")


@pytest.mark.usefixtures("scripted")
@pytest.mark.parametrize("private", [pytest.param(True, marks=on_a_verified_release), False], ids=["private", "public"])
async def test_a_finish_the_provider_sent_is_the_provider_s_either_way(private: bool) -> None:
    assert await _finished_when_the_finish_came("stop", private=private)


@on_a_verified_release
@pytest.mark.usefixtures("scripted")
async def test_the_finish_litellm_adds_itself_is_told_apart_by_its_record() -> None:
    assert not await _finished_when_the_finish_came(None, private=True)


@pytest.mark.usefixtures("scripted")
async def test_without_its_record_litellm_s_finish_is_taken_at_its_word() -> None:
    assert await _finished_when_the_finish_came(None, private=False)


async def _claude_stream(claude: FakeAnthropic, *, text: bool) -> tuple[Any, asyncio.Event]:
    """A litellm stream of Claude's answer (text completions with `text`) after its first chunk, and the Event that lets the rest go."""
    go = asyncio.Event()
    events = message_events("Hel", *["lo"] * 5)
    claude.then(Answer(events=[*events[:4], go, *events[4:]]))
    arguments: dict[str, Any] = {"model": f"anthropic/{CLAUDE_MODEL}", "api_base": claude.url, "api_key": "k", "stream": True}
    if text:
        stream = await litellm.atext_completion(prompt="hello", **arguments)
    else:
        stream = await litellm.acompletion(messages=MESSAGES, **arguments)
    await anext(stream)
    return stream, go


@pytest.mark.parametrize("private", [pytest.param(True, marks=on_a_verified_release), False], ids=["private", "public"])
async def test_a_chat_stream_is_closed_by_its_own_aclose_either_way(aiohttp_server: Any, private: bool) -> None:
    claude = await start_anthropic(aiohttp_server)
    stream, go = await _claude_stream(claude, text=False)
    await close_stream(stream, private=private)
    go.set()
    await asyncio.wait_for(claude.disconnected.wait(), 10)  # the provider's connection went
    assert [chunk async for chunk in stream] == []


@on_a_verified_release
async def test_a_text_completion_stream_is_closed_by_what_it_reads_from(aiohttp_server: Any) -> None:
    stream, go = await _claude_stream(await start_anthropic(aiohttp_server), text=True)
    await close_stream(stream, private=True)
    go.set()
    assert [chunk async for chunk in stream] == []


async def test_without_that_a_text_completion_stream_is_left_open(aiohttp_server: Any) -> None:
    stream, go = await _claude_stream(await start_anthropic(aiohttp_server), text=True)
    await close_stream(stream, private=False)
    go.set()
    texts = [chunk.choices[0].text or "" async for chunk in stream if chunk.choices]
    assert "".join(texts) == "lololololo"
