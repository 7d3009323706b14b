"""Claude Code (the pinned @anthropic-ai/claude-code) in print mode on routes whose targets are translated.

`claude -p` runs as a user runs it, offline in a fresh home, against the built-in mock and
against a scripted chat completions upstream where the model asks for a tool (Read), Claude
Code runs it and sends its result, and the model answers. What Claude Code sent is compared
with tests/clients/fixtures/claude_code_*.json, whose fields tests/core/translate/test_agent_bodies.py
translates one by one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.support.agent_clis import (
    check_against_fixture,
    claude_code_env,
    note_in,
    run_cli,
    start_recorder,
    tool_call,
    tool_round_trip,
)
from tests.support.fakes import FakeUpstream, Step, stream_of
from tests.support.gateway import GATEWAY_KEY, Gateway


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
    work = note_in(tmp_path)
    env = claude_code_env(tmp_path / "home", base_url=recorder.url, key=GATEWAY_KEY, model="chat")
    trip = await tool_round_trip(
        upstream, recorder, [str(claude_code), "-p", "What does note.txt say?"], env=env, cwd=work,
        call=("call_read_1", "Read", {"file_path": str(work / "note.txt")}), answer="The note says pelican.",
        path="/v1/messages",
    )
    assert [tool["function"]["name"] for tool in trip.question["tools"]].count("Read") == 1
    assert "user" not in trip.question  # Claude Code's user_id is longer than OpenAI takes (64 characters)
    assert "the secret word is pelican" in trip.result("call_read_1", "Read")["content"]
    check_against_fixture("claude_code_question.json", trip.sent[0], tmp_path)
    check_against_fixture("claude_code_tool_result.json", trip.sent[1], tmp_path)


async def test_a_tool_search_loads_a_deferred_tool(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, claude_code: Path, aiohttp_server: Any
) -> None:
    # Claude Code keeps most tools deferred: the model finds one with ToolSearch, whose result is a
    # tool_reference that loads it (sent from then on with defer_loading). Refused, Claude Code
    # would retry and then give up its tool search: the upstream would see more than two requests.
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    env = claude_code_env(tmp_path / "home", base_url=recorder.url, key=GATEWAY_KEY, model="chat")
    trip = await tool_round_trip(
        upstream, recorder, [str(claude_code), "-p", "Load the web fetch tool."], env=env, cwd=tmp_path,
        call=("call_search_1", "ToolSearch", {"query": "select:WebFetch"}), answer="WebFetch is loaded.",
        path="/v1/messages",
    )
    assert "WebFetch" not in [tool["function"]["name"] for tool in trip.question["tools"]]  # deferred, not yet loaded
    (fetch,) = [tool["function"] for tool in trip.answered["tools"] if tool["function"]["name"] == "WebFetch"]
    result = trip.result("call_search_1", "ToolSearch")
    assert result["content"] == f"<functions><function>{orjson.dumps(fetch).decode()}</function></functions>"
    check_against_fixture("claude_code_tool_search.json", trip.sent[1], tmp_path)


async def test_a_web_search_is_answered_without_searching(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, claude_code: Path, aiohttp_server: Any
) -> None:
    # Once the model loaded and called WebSearch, Claude Code asks the route, in a request of its
    # own, for an answer with Anthropic's server tool web_search offered. A chat target has no such
    # tool: it is left out (as the Responses translation leaves out web_search), the model answers
    # from what it knows, and that answer is WebSearch's result.
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    env = claude_code_env(tmp_path / "home", base_url=recorder.url, key=GATEWAY_KEY, model="chat")
    upstream.then(Step(events=tool_call("call_load_1", "ToolSearch", {"query": "select:WebSearch"})),
                  Step(events=tool_call("call_web_1", "WebSearch", {"query": "pelican facts"})),
                  Step(events=stream_of("Pelicans are large water birds.")),  # the search request's answer
                  Step(events=stream_of("Pelicans are birds.")))
    argv = [str(claude_code), "-p", "Search the web for pelican facts.", "--allowedTools", "WebSearch"]
    ran = await run_cli(argv, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran
    assert "Pelicans are birds." in ran.stdout, ran
    assert upstream.calls == 4, [request.body["messages"][-1] for request in upstream.requests]
    search = recorder.posted("/v1/messages")[2]
    assert [tool["type"] for tool in search["tools"]] == ["web_search_20250305"]
    assert "tools" not in upstream.requests[2].body and "tool_choice" not in upstream.requests[2].body
    result = upstream.requests[3].body["messages"][-1]
    assert result["tool_call_id"] == "call_web_1" and "Pelicans are large water birds." in result["content"]
    check_against_fixture("claude_code_web_search.json", search, tmp_path)
