"""gateway.observe.logs.request_log: one access line per request when it ends, and a whole gateway's log holds no secret."""

from __future__ import annotations

import asyncio
import io
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.config.loader import parse_config
from gateway.core.tree import Target
from gateway.observe import trace as observe
from gateway.observe.logs import RequestLog
from tests.support.fakes import FakeUpstream, Step, chat_completion, error_body, stream_of
from tests.support.log_lines import ISO_UTC, start_logging_gateway
from tests.support.processes import free_port, wait_ready


def traced_request(observer: observe.Observer) -> tuple[observe.Trace, Target]:
    config = parse_config(
        "routes:\n"
        "  smart:\n"
        "    strategy: {mode: fallback}\n"
        "    targets:\n"
        "      - {name: primary, provider: openai, apiKey: sk-never-logged, headers: {x-team: hv-never-logged}}\n"
        "      - {name: backup, provider: mock}\n"
    )
    route = config.routes["smart"]
    primary, backup = route.root.children  # type: ignore[union-attr]
    assert isinstance(primary, Target) and isinstance(backup, Target)
    trace = observe.Trace(observer, request_id="req_42", method="POST", path="/v1/chat/completions", tenant="team-a")
    trace.resolved(route, stream=True)
    trace.memory_planned("token_window", 3)
    trace.attempt_ended(primary, "503", 0.01)
    trace.fell_back(primary, "503")
    trace.first_token(backup)
    trace.attempt_ended(backup, "200", 0.02)
    trace.usage(backup, {"prompt_tokens": 11, "completion_tokens": 7})
    return trace, backup


def test_request_log_writes_one_access_line_when_the_request_ends(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("json", "info")
    trace, _ = traced_request(RequestLog())
    assert out.getvalue() == ""  # nothing before the end
    trace.end(200)
    trace.end(200)  # reported once
    [line] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert line["duration_ms"] >= line["ttft_ms"] >= 0
    assert {key: value for key, value in line.items() if key not in ("time", "duration_ms", "ttft_ms")} == {
        "level": "info",
        "logger": "gateway.access",
        "message": "request",
        "request_id": "req_42",
        "tenant": "team-a",
        "method": "POST",
        "path": "/v1/chat/completions",
        "route": "smart",
        "target": "backup",
        "attempts": 2,
        "status": 200,
        "error_code": None,
        "stream": True,
        "prompt_tokens": 11,
        "completion_tokens": 7,
        "memory_type": "token_window",
        "evicted": 3,
    }
    assert "never-logged" not in out.getvalue()


def test_request_log_takes_the_id_from_the_trace_not_the_context(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("text", "info")
    token = observe.current.set(observe.Trace(request_id="req_other"))
    try:
        trace = observe.Trace(RequestLog(), request_id="req_mine", method="GET", path="/healthz")
        trace.end(404, "not_found")
    finally:
        observe.current.reset(token)
    [line] = out.getvalue().splitlines()
    assert " INFO gateway.access [req_mine] request method=GET path=/healthz attempts=0 status=404" in line
    assert "error_code=not_found stream=false duration_ms=" in line and "route=" not in line


def test_request_log_is_silent_above_info(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("json", "warning")
    trace, _ = traced_request(RequestLog())
    trace.end(200)
    assert out.getvalue() == ""


def test_health_checks_and_scrapes_are_logged_at_debug(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("text", "info")
    log = RequestLog(quiet_paths=("/healthz", "/metrics"))
    for path in ("/healthz", "/metrics", "/v1/models"):
        observe.Trace(log, request_id="req_x", method="GET", path=path).end(200)
    [line] = out.getvalue().splitlines()
    assert "path=/v1/models" in line
    out = captured("text", "debug")
    observe.Trace(log, request_id="req_y", method="GET", path="/healthz").end(200)
    assert " DEBUG gateway.access [req_y] request method=GET path=/healthz" in out.getvalue()

# The whole gateway, with known secrets, scanned.


GATEWAY_KEYS = {"team-a": "gwkey-alpha-5c1e9d", "team-b": "gwkey-bravo-77aa01"}
WRONG_KEY = "gwkey-wrong-0b3f42"
PROVIDER_KEYS = ("sk-prov-one-e4d1", "sk-prov-two-9f20", "sk-prov-three-a7c3", "sk-prov-four-3b66")
HEADER_VALUE = "hdrsecret-61d0c2"
MARKER = "MARKER-q7Zt4w"


def usage_chunk(prompt: int, completion: int) -> bytes:
    body = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1700000000, "model": "up-model",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def secret_config(tmp_path: Path, ok: FakeUpstream, streams: FakeUpstream, down: FakeUpstream) -> Path:
    key_one, key_two, key_three, key_four = PROVIDER_KEYS
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"""
auth:
  keys:
    - {{name: team-a, key: {GATEWAY_KEYS["team-a"]}}}
    - {{name: team-b, key: {GATEWAY_KEYS["team-b"]}}}
memory: {{store: sqlite, path: {tmp_path / "memory.db"}}}
routes:
  direct:
    provider: openai
    baseUrl: {ok.url}
    apiKey: {key_one}
    headers: {{x-team-secret: {HEADER_VALUE}}}
  streamer:
    provider: openai
    baseUrl: {streams.url}
    apiKey: {key_one}
  backup-plan:
    strategy: {{mode: fallback, onStatusCodes: [503]}}
    headers: {{x-team-secret: {HEADER_VALUE}}}
    targets:
      - {{name: flaky, provider: openai, baseUrl: {down.url}, apiKey: {key_two}}}
      - {{name: steady, provider: openai, baseUrl: {ok.url}, apiKey: {key_three}}}
  doomed:
    strategy: {{mode: fallback}}
    targets:
      - {{name: down-a, provider: openai, baseUrl: {down.url}, apiKey: {key_four}}}
      - {{name: down-b, provider: openai, baseUrl: {down.url}, apiKey: {key_two}}}
"""
    )
    return config


async def run_traffic(base_url: str) -> None:
    """A success, a fallback, a stream, two memory turns, a failure and a wrong key, ids chosen by us."""

    def ask(request_id: str, **headers: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "user", "content": f"{MARKER} {request_id}"}],
            "extra_headers": {"x-request-id": request_id, **headers},
        }

    team_a = openai.AsyncOpenAI(base_url=base_url, api_key=GATEWAY_KEYS["team-a"], max_retries=0, timeout=20)
    team_b = openai.AsyncOpenAI(base_url=base_url, api_key=GATEWAY_KEYS["team-b"], max_retries=0, timeout=20)
    wrong = openai.AsyncOpenAI(base_url=base_url, api_key=WRONG_KEY, max_retries=0, timeout=20)
    async with team_a, team_b, wrong:
        reply = await team_a.chat.completions.create(model="direct", **ask("t-success"))
        assert MARKER in (reply.choices[0].message.content or "")
        reply = await team_b.chat.completions.create(model="backup-plan", **ask("t-fallback"))
        assert reply.choices[0].message.content
        stream = await team_a.chat.completions.create(model="streamer", stream=True, **ask("t-stream"))
        text = "".join([part.choices[0].delta.content or "" async for part in stream if part.choices])
        assert MARKER in text
        for turn in ("t-memory-1", "t-memory-2"):
            memory = {"memoryId": "conv-1", "maxMessages": "1"}
            await team_a.chat.completions.create(model="direct", **ask(turn, **memory))
        with pytest.raises(openai.APIStatusError) as failed:
            await team_b.chat.completions.create(model="doomed", **ask("t-failure"))
        assert failed.value.status_code == 503
        with pytest.raises(openai.AuthenticationError):
            await wrong.chat.completions.create(model="direct", **ask("t-wrong-key"))


async def test_a_gateways_whole_log_holds_no_secret_and_one_access_line_per_request(
    tmp_path: Path, make_upstream: Callable[..., Awaitable[FakeUpstream]]
) -> None:
    # Upstreams echo what they were sent, as real ones do in replies and in error messages.
    ok = await make_upstream(Step(body=chat_completion(f"echo {MARKER}")))
    streams = await make_upstream(
        Step(events=[*stream_of("echo ", MARKER, done=False), usage_chunk(9, 4), b"data: [DONE]\n\n"])
    )
    down = await make_upstream(
        Step(status=503, body=error_body(503, f"overloaded; key {PROVIDER_KEYS[1]} prompt {MARKER} {HEADER_VALUE}"))
    )
    config = secret_config(tmp_path, ok, streams, down)
    log_path = tmp_path / "gateway.log"
    port = free_port()
    process = start_logging_gateway(config, port, log_path)
    try:
        await wait_ready(port, process)
        await run_traffic(f"http://127.0.0.1:{port}/v1")
        process.send_signal(signal.SIGTERM)  # drains: every access line is written before it exits
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = log_path.read_text()

    secrets = [*GATEWAY_KEYS.values(), WRONG_KEY, *PROVIDER_KEYS, HEADER_VALUE, MARKER, "Authorization", "Bearer "]
    leaked = [secret for secret in secrets if secret.lower() in log.lower()]
    assert not leaked, f"{leaked} in the log:\n{log}"
    assert ok.calls == 4 and streams.calls == 1 and down.calls == 3  # the traffic did reach the upstreams

    lines = [json.loads(line) for line in log.splitlines()]  # every line is one JSON object
    access = [line for line in lines if line["logger"] == "gateway.access"]
    by_id = {line["request_id"]: line for line in access}
    assert len(by_id) == len(access) == 7, access
    assert all(line["level"] == "info" and ISO_UTC.fullmatch(line["time"]) for line in access)

    def summary(request_id: str) -> tuple[Any, ...]:
        line = by_id[request_id]
        return line["tenant"], line["route"], line["target"], line["attempts"], line["status"], line["stream"]

    assert summary("t-success") == ("team-a", "direct", "direct", 1, 200, False)
    assert summary("t-fallback") == ("team-b", "backup-plan", "steady", 2, 200, False)
    assert summary("t-stream") == ("team-a", "streamer", "streamer", 1, 200, True)
    assert summary("t-memory-1") == ("team-a", "direct", "direct", 1, 200, False)
    assert summary("t-failure") == ("team-b", "doomed", "down-b", 2, 503, False)
    assert summary("t-wrong-key") == (None, None, None, 0, 401, False)

    success = by_id["t-success"]
    assert (success["method"], success["path"]) == ("POST", "/v1/chat/completions")
    assert (success["prompt_tokens"], success["completion_tokens"]) == (5, 3)
    assert success["memory_type"] is None and success["error_code"] is None and success["ttft_ms"] is None
    assert success["duration_ms"] > 0
    stream = by_id["t-stream"]
    assert stream["duration_ms"] >= stream["ttft_ms"] > 0
    assert (stream["prompt_tokens"], stream["completion_tokens"]) == (9, 4)
    assert (by_id["t-memory-1"]["memory_type"], by_id["t-memory-1"]["evicted"]) == ("message_window", 0)
    # maxMessages 1 leaves only the new turn: the first turn's question and answer are evicted.
    assert (by_id["t-memory-2"]["memory_type"], by_id["t-memory-2"]["evicted"]) == ("message_window", 2)
    assert by_id["t-failure"]["error_code"] is not None
    assert by_id["t-wrong-key"]["error_code"] == "invalid_api_key"
