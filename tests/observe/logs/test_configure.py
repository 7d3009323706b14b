"""gateway.observe.logs.configure: one handler on the root logger, one format and level for all, each request's id on its lines."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import signal
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from gateway.observe import trace as observe
from gateway.observe.logs import CLIENT_LOGGERS, configure_logging
from tests.support.log_lines import start_logging_gateway
from tests.support.processes import free_port, wait_ready


async def test_each_task_logs_with_its_own_request_id(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("json", "info")
    log = logging.getLogger("gateway.some.layer")
    first_logged, second_logged = asyncio.Event(), asyncio.Event()

    async def serve(request_id: str, mine: asyncio.Event, other: asyncio.Event) -> None:
        observe.current.set(observe.Trace(request_id=request_id))
        log.info("step one")
        mine.set()
        await other.wait()  # the other task has set its own trace in between
        log.info("step two")

    await asyncio.gather(
        serve("req_a", first_logged, second_logged), serve("req_b", second_logged, first_logged)
    )
    log.info("outside any request")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    said = [(line["message"], line.get("request_id")) for line in lines]
    assert said[:2] == [("step one", "req_a"), ("step one", "req_b")]  # both traces set before any step two
    assert sorted(said[2:4]) == [("step two", "req_a"), ("step two", "req_b")]
    assert said[4:] == [("outside any request", None)]


async def test_text_format_and_level_apply_to_every_logger(captured: Callable[[str, str], io.StringIO]) -> None:
    out = captured("text", "warning")
    observe.current.set(observe.Trace(request_id="req_t"))
    logging.getLogger("gateway.memory").info("hidden below warning")
    logging.getLogger("aiohttp.server").warning("shown")
    [line] = out.getvalue().splitlines()
    assert line.endswith(" WARNING aiohttp.server [req_t] shown")


def test_configure_logging_twice_leaves_one_handler(captured: Callable[[str, str], io.StringIO]) -> None:
    before = len(logging.getLogger().handlers)
    captured("json", "info")
    second = captured("text", "debug")
    assert len(logging.getLogger().handlers) == before + 1
    logging.getLogger("gateway").debug("once")
    assert second.getvalue().count("once") == 1
    with pytest.raises(ValueError, match="log format must be one of json, text, got 'xml'"):
        configure_logging("xml", "info")


async def test_a_line_logged_while_serving_a_request_carries_its_id(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    config = tmp_path / "gateway.yaml"
    # The SQLite file cannot be created under a regular file: the memory flow logs an error mid-request.
    config.write_text(f"memory: {{store: sqlite, path: {blocker / 'memory.db'}}}\nroutes:\n  m: {{provider: mock}}\n")
    log_path = tmp_path / "gateway.log"
    port = free_port()
    process = start_logging_gateway(config, port, log_path)
    try:
        await wait_ready(port, process)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
            with pytest.raises(openai.APIStatusError) as failed:
                await client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "hi"}],
                    extra_headers={"x-request-id": "t-memory-down", "memoryId": "conv-1"},
                )
        assert failed.value.status_code == 503
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    [error] = [line for line in lines if line["level"] == "error"]
    assert error["logger"] == "gateway.memory" and error["message"].startswith("memory store unavailable: ")
    assert error["request_id"] == "t-memory-down"
    [access] = [line for line in lines if line["logger"] == "gateway.access"]
    assert (access["request_id"], access["status"], access["error_code"]) == ("t-memory-down", 503, "memory_unavailable")


def test_at_debug_the_http_clients_own_debug_lines_stay_off() -> None:
    """openai's and httpx's debug lines carry the request's URL (a path token) and headers."""
    root_level = logging.getLogger().level
    levels = {name: logging.getLogger(name).level for name in CLIENT_LOGGERS}  # litellm's provider sets its own
    handler = configure_logging("json", "debug", stream=io.StringIO())
    try:
        assert logging.getLogger("gateway").isEnabledFor(logging.DEBUG)
        for name in (*CLIENT_LOGGERS, "openai._base_client", "httpcore.http11"):
            assert not logging.getLogger(name).isEnabledFor(logging.DEBUG), name
            assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(root_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
