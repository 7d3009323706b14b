"""The command line (gateway.cli.main): which config it reads, check-config's exit codes, serve draining on SIGTERM and
freezing start-up objects, its flags and log format, settle-memory."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.cli import main as cli
from gateway.cli.main import build_parser, main
from gateway.core.memory.entries import Entry
from gateway.memory.sqlite import SQLiteStore
from gateway.observe.logs import default_log_format
from tests.support.fakes import FakeUpstream, Step, chat_completion, stream_of
from tests.support.processes import free_port, spawn_gateway, wait_ready
from tests.support.serve import listening, needs_ss, read_lines_until, ss, wait_until_not_listening


def test_check_config_exits_2_with_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes:\n  a: {provider: mock, weight: -1}\n  b: {provider: nope}\n")
    with pytest.raises(SystemExit) as caught:
        main(["check-config", str(path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "routes.a.weight: must be >= 0, got -1" in err
    assert "routes.b.provider: unknown provider 'nope'" in err


def test_check_config_uses_env_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GATEWAY_CONFIG", "configs/gateway.yaml")
    assert main(["check-config"]) == 0
    assert "configs/gateway.yaml: ok" in capsys.readouterr().out


def test_check_config_counts_admin_keys_as_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "admin.yaml"
    path.write_text("auth: {adminKeys: [{name: ops, key: admin-key-1}]}\nroutes: {a: {provider: mock}}\n")
    assert main(["check-config", str(path)]) == 0
    assert "(1 routes, auth on)" in capsys.readouterr().out


async def test_sigterm_drains_in_flight_requests_and_streams(
    tmp_path: Path, upstream: FakeUpstream, processes: list
) -> None:
    answer, resume = asyncio.Event(), asyncio.Event()
    events = stream_of("one ", "two ")
    upstream.then(Step(body=chat_completion(), gate=answer), Step(events=[*events[:2], resume, *events[2:]]))
    config = tmp_path / "g.yaml"
    config.write_text(f"routes:\n  up: {{provider: openai, baseUrl: '{upstream.url}', apiKey: sk-test}}\n")
    port = free_port()
    process = spawn_gateway(config, port)
    processes.append(process)
    await wait_ready(port, process)
    async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
        messages: Any = [{"role": "user", "content": "drain me"}]
        pending = asyncio.create_task(client.chat.completions.create(model="up", messages=messages))
        await asyncio.wait_for(upstream.arrived.wait(), 30)  # the request is under way, held upstream
        stream = await client.chat.completions.create(model="up", messages=messages, stream=True)
        parts = [await anext(aiter(stream))]  # the stream is under way: its first chunk came
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(wait_until_not_listening, port)  # stopping: only what is under way goes on
        answer.set()
        resume.set()
        parts += [part async for part in stream]
        completion = await pending
    assert completion.choices[0].message.content == "Hello from upstream"
    assert "".join(part.choices[0].delta.content or "" for part in parts if part.choices) == "one two "
    assert await asyncio.to_thread(process.wait, 20) == 0


@needs_ss
async def test_serve_listens_with_the_configured_backlog(tmp_path: Path, processes: list) -> None:
    config = tmp_path / "g.yaml"
    config.write_text("server: {backlog: 77}\nroutes:\n  m: {provider: mock}\n")
    port = free_port()
    process = spawn_gateway(config, port)
    processes.append(process)
    await wait_ready(port, process)
    # For a listening socket Send-Q is the backlog the kernel was given (aiohttp's own default is 128).
    [line] = ss("-l", f"sport = :{port}").splitlines()
    assert line.split()[2] == "77"


def test_serve_rejects_a_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("routes: {}\n")
    result = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(path)], capture_output=True, timeout=60)
    assert result.returncode == 2
    assert b"routes: must be a mapping with at least one route" in result.stderr


def test_python_dash_m_help() -> None:
    result = subprocess.run([sys.executable, "-m", "gateway", "--help"], capture_output=True, timeout=60, env={**os.environ})
    assert result.returncode == 0 and b"check-config" in result.stdout


def test_serve_log_flags_accept_the_formats_and_levels() -> None:
    args = build_parser().parse_args(["serve", "--log-format", "text", "--log-level", "DEBUG"])
    assert (args.log_format, args.log_level) == ("text", "debug")
    args = build_parser().parse_args(["serve"])
    assert (args.log_format, args.log_level) == (None, "info")  # None: chosen by whether stderr is a terminal


@pytest.mark.parametrize(("flag", "value"), [("--log-format", "xml"), ("--log-level", "trace"), ("--log-level", "")])
def test_serve_log_flags_refuse_other_values(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["serve", flag, value])
    assert caught.value.code == 2
    assert f"argument {flag}: invalid choice" in capsys.readouterr().err


def test_default_log_format_is_text_on_a_terminal_and_json_otherwise(tmp_path: Path) -> None:
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal, (tmp_path / "log").open("w") as file:
        assert default_log_format(terminal) == "text"
        assert default_log_format(file) == "json"
    os.close(leader)


async def test_serve_logs_json_by_default_when_stderr_is_not_a_terminal(slow_config: Path, processes: list) -> None:
    process = spawn_gateway(slow_config, free_port())
    processes.append(process)
    assert process.stdout is not None
    lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, process.stdout, listening), 30)
    first = json.loads(lines[0])
    assert first["level"] == "info" and first["logger"] == "gateway" and " listening on " in first["message"]


async def test_serve_logs_text_by_default_on_a_terminal(slow_config: Path, processes: list) -> None:
    leader, follower = os.openpty()
    process = spawn_gateway(slow_config, free_port(), output=follower)
    processes.append(process)
    os.close(follower)
    with os.fdopen(leader, "rb", buffering=0) as terminal:
        lines = await asyncio.wait_for(asyncio.to_thread(read_lines_until, terminal, listening), 30)
    assert re.fullmatch(r"\S+Z INFO gateway gateway \d+ listening on 127\.0\.0\.1:\d+ with 2 routes from \S+/slow\.yaml", lines[0])


async def test_settle_memory_writes_each_conversation_row_as_its_messages_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A turn no longer moves its conversation's row; `settle-memory` writes the rows older gateways read alone."""
    path = tmp_path / "memory.db"
    store = SQLiteStore(str(path), ttl_seconds=3600, max_messages=40, lock_timeout=5)
    for step in range(3):
        turn = [Entry({"role": "user", "content": f"q{step}"}), Entry({"role": "assistant", "content": f"a{step}"})]
        await store.append(("t", "conv"), turn, system=None)
    await store.close()

    def row() -> tuple[int, int]:
        with sqlite3.connect(path) as db:
            first, last = db.execute("SELECT first_seq, last_seq FROM conversations").fetchone()
        return int(first), int(last)

    assert row() == (1, 2)  # as the first turn left it: the later ones were one insert each
    assert main(["settle-memory", str(path)]) == 0
    assert row() == (1, 6)
    assert "1 conversation rows settled" in capsys.readouterr().out
    assert main(["settle-memory", str(path)]) == 0
    assert "0 conversation rows settled" in capsys.readouterr().out


def test_settle_memory_refuses_a_missing_or_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.db"
    assert main(["settle-memory", str(missing)]) == 2
    assert not missing.exists()  # no empty store made where the operator meant an existing one
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database " * 100)
    assert main(["settle-memory", str(foreign)]) == 1
    assert "cannot settle" in capsys.readouterr().err
    other = tmp_path / "other.db"  # a SQLite file of something else: left as it was
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    assert main(["settle-memory", str(other)]) == 1
    assert "not a gateway memory file" in capsys.readouterr().err
    with sqlite3.connect(other) as db:
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]


def test_config_path_prefers_the_flag_then_the_environment_then_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEWAY_CONFIG", raising=False)
    assert cli._config_path(None) == cli.PACKAGED_CONFIG
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "gateway.yaml").write_text("routes: {}\n")
    assert cli._config_path(None) == "configs/gateway.yaml"
    (tmp_path / "gateway.yaml").write_text("routes: {}\n")  # what `gateway init` writes: found first
    assert cli._config_path(None) == "gateway.yaml"
    monkeypatch.setenv("GATEWAY_CONFIG", "/etc/gateway/gateway.yaml")
    assert cli._config_path(None) == "/etc/gateway/gateway.yaml"
    assert cli._config_path("mine.yaml") == "mine.yaml"


def test_serve_freezes_what_start_up_made_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full collections during a big body's parse would otherwise walk every start-up object, GIL held."""
    import gc

    from aiohttp import web

    frozen: list[int] = []
    monkeypatch.setattr(web, "run_app", lambda *args, **kwargs: frozen.append(gc.get_freeze_count()))
    monkeypatch.setattr("gateway.cli.main.configure_logging", lambda *args, **kwargs: None)
    monkeypatch.setattr("uvloop.install", lambda: None)  # the event loop policy stays the tests'
    try:
        cli.serve(cli.PACKAGED_CONFIG, "127.0.0.1", 0)
    finally:
        gc.unfreeze()
    assert frozen and frozen[0] > 0



def test_serve_exits_1_with_one_line_saying_why_when_litellm_cannot_load(tmp_path: Path) -> None:
    broken = tmp_path / "packages" / "litellm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("a broken litellm")\n')
    config = tmp_path / "gateway.yaml"
    config.write_text('routes:\n  d: {provider: bedrock, apiKey: k, baseUrl: "http://127.0.0.1:9/v1"}\n')
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(free_port())]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "packages")}
    result = subprocess.run(command, capture_output=True, env=env, timeout=120, check=False)
    output = (result.stdout + result.stderr).decode()
    assert result.returncode == 1, output
    assert f"litellm could not load (ImportError: a broken litellm): the gateway cannot serve {config}" in output
    assert "Traceback" not in output
