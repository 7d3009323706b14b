"""litellm warmed up per provider kind: what a kind's first call would load is loaded before the configuration serves.

The first call through litellm to a kind loads litellm's modules for it (its configuration, the
OpenAI SDK's resources for azure, the tokenizer, ...): the warm-up loads them with the import,
on a thread, so that no call pays for them in its attempt or on the event loop. Which modules a
call loads is read from sys.modules in a fresh process (a test process has loaded them long ago).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway.upstream.providers import litellm as provider
from gateway.upstream.providers import litellm_internals, registry
from gateway.upstream.providers.registry import LITELLM, loads, warm_up_of
from tests.support.fakes import FakeUpstream
from tests.support.fakes_anthropic import start_anthropic
from tests.support.gateway import Gateway
from tests.support.processes import HOSTS_AUDIT

# litellm's pydantic types warn once per process when first built; litellm itself hides it, pytest shows it
pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

REPO = Path(__file__).resolve().parents[3]
MESSAGES = [{"role": "user", "content": "hello"}]

# A gateway on a config file: first calls to each litellm kind it names (JSON and stream), then a
# reload that adds azure and first calls to it. Prints the modules each set of first calls loaded,
# and every host the process looked up or connected to.
_PROBE = HOSTS_AUDIT + """
import asyncio, json, random, sys
from pathlib import Path

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from gateway.cli.reload import Reloader
from gateway.config.loader import parse_config
from gateway.server.app import create_app
from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.fakes_anthropic import FakeAnthropic


async def serve(fake):
    server = TestServer(fake.app())
    await server.start_server()
    return server, str(server.make_url("")).rstrip("/")


def route(name, kind, url, extra=""):
    return f'  {name}: {{provider: {kind}, baseUrl: "{url}", apiKey: k, overrideParams: {{model: m}}{extra}}}\\n'


async def first_calls(session, root, routes):
    before = set(sys.modules)
    for name, stream in routes:
        body = {"model": name, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        async with session.post(root + "/v1/chat/completions", json=body) as answer:
            text = await answer.text()
            assert answer.status == 200 and (not stream or "[DONE]" in text), text
    return sorted(set(sys.modules) - before)


async def main(path):
    servers = []
    claude, claude_url = await serve(FakeAnthropic())
    chat, chat_url = await serve(FakeUpstream())
    chunks, chunks_url = await serve(FakeUpstream(Step(events=stream_of("hi"))))
    routes = "routes:\\n" + route("claude", "anthropic", claude_url) + route("mistral", "mistral", chat_url + "/v1")
    path.write_text(routes)
    app = create_app(parse_config(routes), rng=random.Random(7))
    reloader = Reloader(app, str(path), rng=random.Random(7))
    gateway = TestServer(app)
    await gateway.start_server()  # serves once the configuration's loads are done
    root = str(gateway.make_url("")).rstrip("/")
    azure = ', providerParams: {apiVersion: "2024-06-01"}'
    async with ClientSession() as session:
        first = await first_calls(session, root, [("claude", False), ("claude", True), ("mistral", False)])
        path.write_text(routes + route("azure", "azure", chat_url + "/v1", azure) + route("azure-stream", "azure", chunks_url + "/v1", azure))
        assert await reloader.reload()  # serves once the new configuration's loads are done
        reloaded = await first_calls(session, root, [("azure", False), ("azure-stream", True)])
    await reloader.close()
    await gateway.close()
    for server in (claude, chat, chunks):
        await server.close()
    return first, reloaded


first, reloaded = asyncio.run(main(Path(sys.argv[1])))
print(json.dumps({"first": first, "reloaded": reloaded, "hosts": sorted(hosts)}))
"""


def _run(script: str, *arguments: str) -> dict[str, Any]:
    """Run `script` in a fresh process; its last line of output, read as JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments], cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_first_calls_to_each_kind_load_no_module_once_the_configuration_serves_and_after_a_reload(tmp_path: Path) -> None:
    result = _run(_PROBE, str(tmp_path / "gateway.yaml"))
    left = [] if litellm_internals.PRIVATE else sorted(litellm_internals.LEFT_TO_FIRST_CALL)  # made by a private name
    assert result["first"] == left  # anthropic (chat and stream) and mistral, warmed up with litellm's import
    assert result["reloaded"] == []  # azure (the OpenAI SDK's ~450 modules), warmed up by the reload
    assert set(result["hosts"]) <= {"127.0.0.1", "localhost", "::1"}, result["hosts"]


# Every kind litellm serves warmed up in turn, with the process's every lookup and connection heard.
_WARM_UPS = """
import json, sys

hosts = []
sys.addaudithook(lambda event, args: hosts.append(repr(args)) if event in ("socket.getaddrinfo", "socket.connect") else None)

from gateway.core.kinds import KINDS
from gateway.upstream.providers.litellm import warm_up

for kind in [*(name for name, known in KINDS.items() if known.via_litellm), "ollama"]:
    warm_up(kind)
print(json.dumps({"hosts": hosts}))
"""


def test_warming_up_every_kind_looks_up_and_connects_to_nothing() -> None:
    """ollama, outside KINDS, is not called: its model lookup would ask its server (localhost:11434)."""
    assert _run(_WARM_UPS)["hosts"] == []


def test_a_configuration_with_a_kind_served_by_litellm_alone_waits_for_every_litellm_kind_s_warm_up() -> None:
    assert loads(["openai", "anthropic", "mock"]) == []  # anthropic's chat loads litellm at its first call
    assert loads(["gemini", "openai", "anthropic"]) == [LITELLM, warm_up_of("anthropic"), warm_up_of("gemini")]
    assert warm_up_of("gemini") is warm_up_of("gemini")  # once per process, like the import


async def test_a_failing_warm_up_is_logged_once_and_leaves_its_kind_usable(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tried: list[str] = []

    def broken(kind: str) -> None:
        tried.append(kind)
        raise RuntimeError("no tables today")

    monkeypatch.setattr(registry, "_WARM_UPS", {})  # warm-ups not run yet in this process
    monkeypatch.setattr(provider, "warm_up", broken)
    caplog.set_level(logging.WARNING, logger="gateway.providers")
    target = f'provider: mistral, baseUrl: "{upstream.url}", apiKey: k, overrideParams: {{model: m}}'
    client = await gateway(f"routes: {{chat: {{{target}}}, again: {{{target}}}}}")
    for route in ("chat", "again", "chat"):
        answer = await client.chat.completions.create(model=route, messages=MESSAGES)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "Hello from upstream"
    assert tried == ["mistral"] and upstream.calls == 3
    [warned] = [record.getMessage() for record in caplog.records if "warming up" in record.getMessage()]
    assert warned == "litellm: warming up provider mistral failed (RuntimeError: no tables today); its first call makes what it needs"


async def test_a_warm_up_that_hangs_holds_up_no_configuration(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    released = threading.Event()

    def hanging(kind: str) -> None:
        assert released.wait(60), "the test never let the warm-up finish"

    monkeypatch.setattr(registry, "_WARM_UPS", {})
    monkeypatch.setattr(registry, "WARM_UP_SECONDS", 0.1)
    monkeypatch.setattr(provider, "warm_up", hanging)
    caplog.set_level(logging.WARNING, logger="gateway.providers")
    target = f'provider: mistral, baseUrl: "{upstream.url}", apiKey: k, overrideParams: {{model: m}}'
    try:
        client = await gateway(f"routes: {{chat: {{{target}}}}}")
        answer = await client.chat.completions.create(model="chat", messages=MESSAGES)  # type: ignore[arg-type]
    finally:
        released.set()
    assert answer.choices[0].message.content == "Hello from upstream"
    assert any("took over 0.1s" in record.getMessage() for record in caplog.records)


async def test_an_anthropic_target_s_first_chat_call_goes_once_anthropic_is_warmed_up(
    gateway: Gateway, aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration of anthropic targets alone loads litellm at the first chat call: the warm-up comes with it."""
    claude = await start_anthropic(aiohttp_server)
    calls_when_warmed: list[int] = []
    monkeypatch.setattr(registry, "_WARM_UPS", {})
    monkeypatch.setattr(provider, "warm_up", lambda kind: calls_when_warmed.append(claude.calls))
    client = await gateway(f'routes: {{claude: {{provider: anthropic, baseUrl: "{claude.url}", apiKey: k}}}}')
    assert calls_when_warmed == []  # nothing loaded for the Messages API
    for _ in range(2):
        answer = await client.chat.completions.create(model="claude", messages=MESSAGES)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "Hello from Claude"
    assert calls_when_warmed == [0] and claude.calls == 2
