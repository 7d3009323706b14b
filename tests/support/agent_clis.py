"""Agent CLIs (Claude Code, the Codex CLI) run against a gateway: their settings, a recorder, a runner.

Each CLI runs offline in a home of its own under the test's tmp_path: its telemetry, error
reports, update checks and (Codex) plugin marketplace are off, and its environment holds only
what is set here. So set, neither opens a connection or looks a name up beyond the loopback
gateway (checked under `strace -f -e trace=connect,sendto`). The `Recorder` sits between a CLI
and the gateway, keeps every body the CLI sent and relays the answers as they stream, so a test
can compare what the CLI sends today with the fixture captured when its version was pinned
(`shape`). `tool_round_trip` runs one turn in which the scripted model calls a tool.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from tests.support.fakes import FakeUpstream, Step, chunk, stream_of

FIXTURES = Path(__file__).parent.parent / "clients" / "fixtures"
MCP_SERVER = Path(__file__).parent / "mcp_demo_server.py"
REFRESH = "GATEWAY_REFRESH_CLIENT_FIXTURES"  # set to 1: the CLI tests rewrite the fixtures they compare with
CLI_TIMEOUT = 180  # seconds for one CLI run; a run takes a few, the first start of a binary longer

# Headers a proxy does not pass on: hop-by-hop ones, and what aiohttp sets for the body it relays.
_NOT_RELAYED = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-encoding",
                          "keep-alive", "accept-encoding"})


@dataclass
class Ran:
    """A finished CLI run."""

    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


async def run_cli(argv: list[str], *, env: dict[str, str], cwd: Path) -> Ran:
    """Run a CLI to its end (killed after CLI_TIMEOUT) without blocking the loop: the gateway serves on it."""
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=CLI_TIMEOUT)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        return Ran(-9, out.decode(errors="replace"), err.decode(errors="replace") + f"\n(killed after {CLI_TIMEOUT} s)")
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def base_env(home: Path) -> dict[str, str]:
    """A bare environment: the system's PATH, a fresh HOME, no proxies, nothing of the caller's keys."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb",
            "NO_COLOR": "1", "TMPDIR": str(home)}


def claude_code_env(home: Path, *, base_url: str, key: str, model: str) -> dict[str, str]:
    """Claude Code's environment for a gateway at `base_url` (without /v1), offline, `model` for every request."""
    return {
        **base_env(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,  # background requests (titles, summaries) go to the route too
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def codex_env(home: Path, *, base_url: str, key: str, model: str | None, mcp: bool = False) -> dict[str, str]:
    """The Codex CLI's environment: CODEX_HOME with a config.toml whose provider is the gateway at `base_url` (…/v1).

    `model` None leaves Codex its default model, one it knows: it then sends its newer request
    shape (tools in an `additional_tools` input item, a free-form `exec` tool), where for a model
    it does not know it sends plain function tools. `mcp`: with tests/support/mcp_demo_server.py
    as the MCP server `demo` (its tool `shout` is sent in the namespace `mcp__demo`).
    """
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        (f'model = "{model}"\n' if model is not None else "")
        + 'model_provider = "gateway"\n'
        "check_for_update_on_startup = false\n"
        "\n[analytics]\nenabled = false\n"
        "\n[feedback]\nenabled = false\n"
        "\n[features]\nplugins = false\n"  # else it fetches its plugin marketplace from GitHub at start
        "\n[model_providers.gateway]\n"
        'name = "gateway"\n'
        f'base_url = "{base_url}"\n'
        'env_key = "GATEWAY_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        + (f'\n[mcp_servers.demo]\ncommand = "{sys.executable}"\nargs = ["{MCP_SERVER}"]\n' if mcp else "")
    )
    return {**base_env(home), "CODEX_HOME": str(codex_home), "GATEWAY_KEY": key}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> list[bytes | float | asyncio.Event]:
    """A scripted upstream's streamed chat answer that calls one tool, its arguments in two pieces."""
    encoded = orjson.dumps(arguments).decode()
    return [
        chunk({"role": "assistant", "content": None,
               "tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": encoded[:5]}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": encoded[5:]}}]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


@dataclass
class RoundTrip:
    """One CLI run where the scripted model called a tool, then answered: what went up and what the CLI sent."""

    question: dict[str, Any]  # the upstream's first chat request
    answered: dict[str, Any]  # its second: the history with the call and its result
    sent: list[Any]  # the CLI's own bodies, as the recorder kept them

    def result(self, call_id: str, name: str) -> dict[str, Any]:
        """The tool message of call `call_id`, found after the assistant's call of `name`."""
        messages = self.answered["messages"]
        index = next(i for i, message in enumerate(messages) if message["role"] == "tool" and message["tool_call_id"] == call_id)
        (call,) = messages[index - 1]["tool_calls"]
        assert (call["id"], call["function"]["name"]) == (call_id, name)
        return messages[index]  # type: ignore[no-any-return]


async def tool_round_trip(
    upstream: FakeUpstream, recorder: Recorder, argv: list[str], *, env: dict[str, str], cwd: Path,
    call: tuple[str, str, dict[str, Any]], answer: str, path: str,
) -> RoundTrip:
    """Run `argv` where the upstream's model first calls tool `call` (id, name, arguments), then says `answer`.

    The CLI must end well with the answer on its stdout, after two requests (a refusal would have
    been retried, or the run would have failed); `path` is the API path the CLI posts to.
    """
    call_id, name, arguments = call
    upstream.then(Step(events=tool_call(call_id, name, arguments)), Step(events=stream_of(answer)))
    ran = await run_cli(argv, env=env, cwd=cwd)
    assert ran.returncode == 0, ran
    assert answer in ran.stdout, ran
    assert upstream.calls == 2, [request.body["messages"][-1] for request in upstream.requests]
    sent = recorder.posted(path)
    assert len(sent) == 2, [at for at, _ in recorder.bodies]
    question, answered = (request.body for request in upstream.requests)
    return RoundTrip(question, answered, sent)


def note_in(tmp_path: Path) -> Path:
    """A fresh working directory holding note.txt, which says the secret word is pelican."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("the secret word is pelican\n")
    return work


@dataclass
class Recorder:
    """A loopback proxy in front of the gateway that keeps the JSON body of every POST it relays."""

    target: str  # the gateway's origin, http://host:port
    bodies: list[tuple[str, Any]] = field(default_factory=list)  # (path, body) in arrival order
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        return app

    def posted(self, path: str) -> list[Any]:
        """The bodies posted to `path` (query string left out), in order."""
        return [body for at, body in self.bodies if at == path]

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if request.method == "POST" and raw:
            self.bodies.append((request.path, orjson.loads(raw)))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_RELAYED}
        async with aiohttp.ClientSession(auto_decompress=False) as session, session.request(
            request.method, self.target + request.path_qs, data=raw, headers=headers
        ) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RELAYED
            })
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response


async def start_recorder(aiohttp_server: Any, target: str) -> Recorder:
    """A Recorder relaying to `target` (an origin or a URL whose path is dropped), on a free loopback port."""
    origin = str(URL(target).origin())
    recorder = Recorder(origin)
    server: TestServer = await aiohttp_server(recorder.app())
    recorder.url = str(server.make_url("")).rstrip("/")
    return recorder


# Subtrees whose keys are the client's own data (JSON schemas, tool inputs), not the API's fields.
_OPAQUE = ("input_schema", "parameters", "content[].input", "metadata", "client_metadata", "format")


def shape(value: Any, path: str = "") -> set[str]:
    """The fields of an API body as dotted paths (list items as `[]`), with the value of every `type` and `role`.

    Two bodies of one client version have one shape, whatever was asked; a new field or block
    type is a new path. Tool schemas, tool inputs and metadata are the client's data: not entered.
    """
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            at = f"{path}.{key}" if path else key
            found.add(at)
            if key in ("type", "role") and isinstance(item, str):
                found.add(f"{at}={item}")
            elif not any(at == suffix or at.endswith("." + suffix) for suffix in _OPAQUE):
                found |= shape(item, at)
    elif isinstance(value, list):
        for item in value:
            found |= shape(item, f"{path}[]")
    return found


def fixture(name: str) -> Any:
    """A captured request body from tests/clients/fixtures/."""
    return orjson.loads((FIXTURES / name).read_bytes())


# What a fixture keeps of a body: every key, type, role, tool name and enum, and the fields the
# translation reads; not the clients' own prose (their system prompts, tool descriptions and
# instructions are theirs, not ours to publish). A string under one of these keys is left out
# whole; any other string longer than KEPT characters keeps its first line's first HEAD
# characters (a block's kind: `<system-reminder>`, `x-anthropic-billing-header:`), unless it is
# data (a data: URL, a JSON object of ids).
_PROSE_KEYS = frozenset({"description", "instructions", "definition"})
_KEPT = 80
_HEAD = 40
LEFT_OUT = "[left out]"


def cleaned(value: Any, run_dir: Path | None = None, key: str = "") -> Any:
    """`value` as a fixture holds it: `run_dir` written as /run (also as a CLI spells it in a file name), prose left out."""
    if isinstance(value, dict):
        return {name: cleaned(item, run_dir, name) for name, item in value.items()}
    if isinstance(value, list):
        return [cleaned(item, run_dir, key) for item in value]
    if not isinstance(value, str):
        return value
    if run_dir is not None:  # Claude Code names a project's directory after its path, each other character a dash
        value = value.replace(str(run_dir), "/run").replace(re.sub(r"[^A-Za-z0-9]", "-", str(run_dir)), "-run")
    if key in _PROSE_KEYS:
        return LEFT_OUT
    if len(value) <= _KEPT or value.startswith("data:") or _json_object(value):
        return value
    return f"{value.split(chr(10), 1)[0][:_HEAD]}… {LEFT_OUT}"


def _json_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def check_against_fixture(name: str, body: Any, run_dir: Path) -> None:
    """Fail naming every field `body` has that fixture `name` lacks, or lacks that it has; with $GATEWAY_REFRESH_CLIENT_FIXTURES=1, rewrite it.

    The fixture is written `cleaned`: `run_dir` (the test's tmp_path, which holds the CLI's home
    and working directory) as /run, the clients' prose left out.
    """
    if os.environ.get(REFRESH) == "1":
        text = orjson.dumps(cleaned(body, run_dir), option=orjson.OPT_INDENT_2).decode()
        (FIXTURES / name).write_text(text + "\n")
        return
    sent, kept = shape(body), shape(fixture(name))
    new, gone = sorted(sent - kept), sorted(kept - sent)
    assert not new and not gone, (
        f"the client sends fields that tests/clients/fixtures/{name} lacks: {new}, and no longer sends {gone}. "
        "Check that the translation handles them (tests/core/translate/test_agent_bodies.py), then refresh the fixture: "
        f"{REFRESH}=1 pytest tests/clients"
    )
