"""The Codex CLI (the pinned @openai/codex) in exec mode on routes whose targets are translated.

`codex exec` runs as a user runs it, offline with its own CODEX_HOME whose config.toml names
the gateway as a Responses API provider, against the built-in mock and against a scripted chat
completions upstream where the model asks for a command (exec_command), Codex runs it and
sends its output, and the model answers. What Codex sent is compared with
tests/clients/fixtures/codex_*.json, whose fields tests/core/translate/test_agent_bodies.py
translates one by one.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import orjson

from tests.support.agent_clis import (
    check_against_fixture,
    codex_env,
    note_in,
    run_cli,
    start_recorder,
    tool_round_trip,
)
from tests.support.fakes import FakeUpstream
from tests.support.gateway import GATEWAY_KEY, Gateway


def config(upstream: FakeUpstream, *, default: str | None = None) -> str:
    return f"""
auth: {{keys: [{{name: team-a, key: {GATEWAY_KEY}}}]}}
{f"defaultRoute: {default}" if default else ""}
routes:
  mock: {{provider: mock}}
  chat: {{provider: openai, baseUrl: "{upstream.url}", apiKey: upstream-key, responsesApi: translate}}
"""


def exec_argv(codex: Path, prompt: str) -> list[str]:
    # No sandbox: the one command run is the scripted model's `cat`, and a sandbox needs what CI may lack.
    return [str(codex), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt]


async def test_exec_mode_on_the_mock(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, codex_cli: Path) -> None:
    client = await gateway(config(upstream))
    env = codex_env(tmp_path / "home", base_url=str(client.base_url).rstrip("/"), key=GATEWAY_KEY, model="mock")
    ran = await run_cli(exec_argv(codex_cli, "Say hello"), env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran
    assert 'last user message: "Say hello"' in ran.stdout, ran


async def test_a_tool_round_trip_through_a_chat_upstream(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, codex_cli: Path, aiohttp_server: Any
) -> None:
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    work = note_in(tmp_path)
    env = codex_env(tmp_path / "home", base_url=f"{recorder.url}/v1", key=GATEWAY_KEY, model="chat")
    trip = await tool_round_trip(
        upstream, recorder, exec_argv(codex_cli, "What does note.txt say?"), env=env, cwd=work,
        call=("call_exec_1", "exec_command", {"cmd": "cat note.txt"}), answer="The note says pelican.",
        path="/v1/responses",
    )
    assert "exec_command" in [tool["function"]["name"] for tool in trip.question["tools"]]
    assert "the secret word is pelican" in trip.result("call_exec_1", "exec_command")["content"]
    check_against_fixture("codex_question.json", trip.sent[0], tmp_path)
    check_against_fixture("codex_tool_output.json", trip.sent[1], tmp_path)


async def test_an_mcp_tool_is_called_by_its_namespaced_name(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, codex_cli: Path, aiohttp_server: Any
) -> None:
    # Codex sends an MCP server's tools in a namespace; the chat model calls mcp__demo__shout, and
    # Codex must get the call back as the tool shout of the namespace mcp__demo to run it.
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    env = codex_env(tmp_path / "home", base_url=f"{recorder.url}/v1", key=GATEWAY_KEY, model="chat", mcp=True)
    trip = await tool_round_trip(
        upstream, recorder, exec_argv(codex_cli, "Shout hello."), env=env, cwd=tmp_path,
        call=("call_mcp_1", "mcp__demo__shout", {"text": "hello"}), answer="It said HELLO.", path="/v1/responses",
    )
    assert "HELLO" in orjson.dumps(trip.result("call_mcp_1", "mcp__demo__shout")["content"]).decode()
    call = trip.sent[1]["input"][-2]
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "mcp__demo", "shout")
    check_against_fixture("codex_mcp_tool_output.json", trip.sent[1], tmp_path)


async def test_its_own_default_model_with_its_free_form_exec_tool(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, codex_cli: Path, aiohttp_server: Any
) -> None:
    # A user who names no model: Codex asks for its default one (the gateway's default route takes
    # it) with tools in an additional_tools item and the free-form `exec` tool, whose JavaScript
    # calls the shell through the nested exec_command.
    client = await gateway(config(upstream, default="chat"))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    work = note_in(tmp_path)
    script = 'const done = await tools.exec_command({cmd: "cat note.txt"}); text(done);'
    env = codex_env(tmp_path / "home", base_url=f"{recorder.url}/v1", key=GATEWAY_KEY, model=None)
    trip = await tool_round_trip(
        upstream, recorder, exec_argv(codex_cli, "What does note.txt say?"), env=env, cwd=work,
        call=("call_js_1", "exec", {"input": script}), answer="The note says pelican.", path="/v1/responses",
    )
    (exec_tool,) = [tool["function"] for tool in trip.question["tools"] if tool["function"]["name"] == "exec"]
    assert exec_tool["parameters"]["required"] == ["input"]
    assert "the secret word is pelican" in orjson.dumps(trip.result("call_js_1", "exec")["content"]).decode()
    assert trip.sent[1]["input"][-2] | {"id": None, "status": None} == {  # Codex took the call for its free-form tool
        "type": "custom_tool_call", "id": None, "status": None, "call_id": "call_js_1", "name": "exec", "input": script}
    check_against_fixture("codex_default_question.json", trip.sent[0], tmp_path)
    check_against_fixture("codex_default_tool_output.json", trip.sent[1], tmp_path)


def red_png() -> bytes:
    """A 4x4 red PNG."""
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 4 for _ in range(4))

    def chunk_of(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk_of(b"IHDR", header) + chunk_of(b"IDAT", zlib.compress(rows)) + chunk_of(b"IEND", b"")


async def test_an_image_a_tool_returns_reaches_the_model_after_the_tool_message(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, codex_cli: Path, aiohttp_server: Any
) -> None:
    # view_image answers with an input_image, which a chat tool message cannot carry.
    client = await gateway(config(upstream))
    recorder = await start_recorder(aiohttp_server, str(client.base_url))
    (tmp_path / "red.png").write_bytes(red_png())
    env = codex_env(tmp_path / "home", base_url=f"{recorder.url}/v1", key=GATEWAY_KEY, model="chat")
    trip = await tool_round_trip(
        upstream, recorder, exec_argv(codex_cli, "What is in red.png?"), env=env, cwd=tmp_path,
        call=("call_image_1", "view_image", {"path": str(tmp_path / "red.png")}), answer="A red square.",
        path="/v1/responses",
    )
    trip.result("call_image_1", "view_image")
    attachments = trip.answered["messages"][-1]
    assert attachments["role"] == "user"
    assert attachments["content"][0] == {"type": "text", "text": "Attachments of tool result call_image_1:"}
    assert attachments["content"][1]["image_url"]["url"].startswith("data:image/")
    check_against_fixture("codex_view_image.json", trip.sent[1], tmp_path)
