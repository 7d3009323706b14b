"""Claude Code (the pinned @anthropic-ai/claude-code) in print mode on routes whose targets are translated.

`claude -p` runs as a user runs it, offline in a fresh home, against the built-in mock and
against a scripted chat completions upstream where the model asks for a tool (Read), Claude
Code runs it and sends its result, and the model answers. What Claude Code sent is compared
with tests/clients/fixtures/claude_code_*.json, whose fields tests/translate/test_agent_bodies.py
translates one by one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.conftest import GATEWAY_KEY, Gateway
from tests.fakes import FakeUpstream, Step, stream_of
from tests.support.agent_clis import (
    check_against_fixture,
    claude_code_env,
    run_cli,
    start_recorder,
    tool_call,
)


def config(upstream: FakeUpstream) -> str:
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
routes:
  mock: {{provider: mock}}
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: upstream-key}}
"""


def origin(client: Any) -> str:
    """The gateway's origin, as ANTHROPIC_BASE_URL takes it (the client adds /v1/messages)."""
    return str(client.base_url).removesuffix("/").removesuffix("/v1")


async def test_print_mode_on_the_mock(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, claude_code: Path) -> None:
    client = await gateway(config(upstream))
    env = claude_code_env(tmp_path / "home", base_url=origin(client), key=GATEWAY_KEY, model="mock")
    ran = await run_cli([str(claude_code), "-p", "Say hello"], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran
    assert "Mock reply: received" in ran.stdout and "Say hello" in ran.stdout, ran


async def test_a_tool_round_trip_through_a_chat_upstream(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, claude_code: Path, aiohttp_server: Any
) -> None:
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("the secret word is pelican\n")
    upstream.then(
        Step(events=tool_call("call_read_1", "Read", {"file_path": str(work / "note.txt")})),
        Step(events=stream_of("The note says ", "pelican.")),
    )
    env = claude_code_env(tmp_path / "home", base_url=recorder.url, key=GATEWAY_KEY, model="chat")
    ran = await run_cli([str(claude_code), "-p", "What does note.txt say?"], env=env, cwd=work)
    assert ran.returncode == 0, ran
    assert "The note says pelican." in ran.stdout, ran
    question, answered = (request.body for request in upstream.requests)
    assert [tool["function"]["name"] for tool in question["tools"]].count("Read") == 1
    assert "user" not in question  # Claude Code's user_id is longer than OpenAI takes (64 characters)
    assert answered["messages"][-2]["tool_calls"][0]["function"]["name"] == "Read"
    result = answered["messages"][-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_read_1")
    assert "the secret word is pelican" in result["content"]
    sent = recorder.posted("/v1/messages")
    assert len(sent) == 2, [path for path, _ in recorder.bodies]
    check_against_fixture("claude_code_question.json", sent[0], tmp_path)
    check_against_fixture("claude_code_tool_result.json", sent[1], tmp_path)


async def test_a_tool_search_loads_a_deferred_tool(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, claude_code: Path, aiohttp_server: Any
) -> None:
    # Claude Code keeps most tools deferred: the model finds one with ToolSearch, whose result is a
    # tool_reference that loads it (sent from then on with defer_loading). Refused, Claude Code
    # would retry and then give up its tool search: the upstream would see more than two requests.
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    upstream.then(
        Step(events=tool_call("call_search_1", "ToolSearch", {"query": "select:WebFetch"})),
        Step(events=stream_of("WebFetch is loaded.")),
    )
    env = claude_code_env(tmp_path / "home", base_url=recorder.url, key=GATEWAY_KEY, model="chat")
    ran = await run_cli([str(claude_code), "-p", "Load the web fetch tool."], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran
    assert "WebFetch is loaded." in ran.stdout, ran
    assert upstream.calls == 2, [request.body["messages"][-1] for request in upstream.requests]
    question, answered = (request.body for request in upstream.requests)
    assert "WebFetch" not in [tool["function"]["name"] for tool in question["tools"]]  # deferred, not yet loaded
    (fetch,) = [tool["function"] for tool in answered["tools"] if tool["function"]["name"] == "WebFetch"]
    result = answered["messages"][-1]
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_search_1")
    assert result["content"] == f"<functions><function>{orjson.dumps(fetch).decode()}</function></functions>"
    sent = recorder.posted("/v1/messages")
    check_against_fixture("claude_code_tool_search.json", sent[1], tmp_path)
