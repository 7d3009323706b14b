"""The access log's buffer: lines written together on a timer, when it is full, before other records, at exit."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import select
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from gateway.observe import trace as observe
from gateway.observe.logs import (
    ACCESS_BUFFER_LINES,
    RequestLog,
    configure_logging,
)
from tests.support.processes import free_port, wait_ready


class Sink(io.StringIO):
    """A stream that keeps each write() apart and says when one happened."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.written = asyncio.Event()

    def write(self, text: str) -> int:
        self.writes.append(text)
        self.written.set()
        return super().write(text)

    def request_ids(self) -> list[str]:
        return [json.loads(line)["request_id"] for line in self.getvalue().splitlines()]


Install = Callable[..., tuple[Sink, logging.Handler]]


@pytest.fixture
def install() -> Iterator[Install]:
    """configure_logging (JSON, info) into a Sink; the root logger is put back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def install(*, flush_seconds: float, fmt: str = "json") -> tuple[Sink, logging.Handler]:
        sink = Sink()
        return sink, configure_logging(fmt, "info", stream=sink, flush_seconds=flush_seconds)

    yield install
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


def serve(log: RequestLog, request_id: str, path: str = "/v1/chat/completions") -> None:
    observe.Trace(log, request_id=request_id, method="POST", path=path).end(200)


async def test_lines_wait_and_go_out_together_on_the_timer(install: Install) -> None:
    sink, _ = install(flush_seconds=0.05)
    log = RequestLog()
    for number in range(3):
        serve(log, f"req_{number}")
    assert sink.writes == []  # nothing yet: the lines wait for the timer
    await asyncio.wait_for(sink.written.wait(), 10)
    assert len(sink.writes) == 1  # one write for the three
    assert sink.request_ids() == ["req_0", "req_1", "req_2"]


async def test_a_full_buffer_is_written_without_waiting_for_the_timer(install: Install) -> None:
    sink, _ = install(flush_seconds=3600)
    log = RequestLog()
    for number in range(ACCESS_BUFFER_LINES - 1):
        serve(log, f"req_{number}")
    assert sink.getvalue() == ""
    serve(log, "req_last")
    assert sink.request_ids() == [*(f"req_{number}" for number in range(ACCESS_BUFFER_LINES - 1)), "req_last"]


async def test_lines_still_waiting_are_written_at_exit(install: Install) -> None:
    sink, handler = install(flush_seconds=3600)
    serve(RequestLog(), "req_1")
    assert sink.getvalue() == ""
    logging.shutdown([weakref.ref(handler)])  # what the interpreter runs at exit
    assert sink.request_ids() == ["req_1"]


@pytest.mark.parametrize("fmt", ["json", "text"])
async def test_a_waiting_line_keeps_the_time_its_request_ended(
    install: Install, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """Lines are formatted when written, from values taken when the request ended."""
    sink, handler = install(flush_seconds=3600, fmt=fmt)
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.25)  # 2023-11-14T22:13:20.250Z
    serve(RequestLog(), "req_1")
    monkeypatch.setattr(time, "time", lambda: 1_700_000_007.5)
    handler.flush()
    assert sink.getvalue().startswith("2023-11-14T22:13:20.250Z" if fmt == "text" else '{"time":"2023-11-14T22:13:20.250Z"')


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_lines_follow_text_written_before_them_in_the_streams_encoding(encoding: str) -> None:
    """A UTF-8 stream's lines go to its byte layer (no decode and encode), after the text that waits above it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)  # not line-buffered: text waits in it
    try:
        configure_logging("json", "info", stream=stream, flush_seconds=0)
        stream.write("before\n")
        serve(RequestLog(), "req_1", path="/v1/é")
        first, second = raw.getvalue().decode(encoding).splitlines()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
    assert first == "before" and json.loads(second)["path"] == "/v1/é"


async def test_configuring_again_writes_what_the_old_handler_held(install: Install) -> None:
    first, _ = install(flush_seconds=3600)
    serve(RequestLog(), "req_1")
    second, _ = install(flush_seconds=3600)
    assert first.request_ids() == ["req_1"] and second.getvalue() == ""


async def test_another_record_comes_after_the_access_lines_before_it(install: Install) -> None:
    sink, _ = install(flush_seconds=3600)
    serve(RequestLog(), "req_1")
    logging.getLogger("gateway.test").warning("after the request")
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [(line["logger"], line["message"]) for line in lines] == [
        ("gateway.access", "request"),
        ("gateway.test", "after the request"),
    ]


async def test_with_no_flush_interval_each_line_is_written_at_once(install: Install) -> None:
    sink, _ = install(flush_seconds=0, fmt="text")
    log = RequestLog()
    serve(log, "req_1")
    assert len(sink.writes) == 1 and " INFO gateway.access [req_1] request method=POST " in sink.writes[0]
    serve(log, "req_2")
    assert len(sink.writes) == 2 and "[req_2]" in sink.writes[1]


async def test_writes_are_whole_lines_a_pipe_takes_in_one_piece(install: Install) -> None:
    """Workers share one stderr: a write of at most PIPE_BUF bytes is never interleaved with another's."""
    sink, handler = install(flush_seconds=3600)
    log = RequestLog()
    names = [f"req_{number}_" + "x" * 150 for number in range(ACCESS_BUFFER_LINES - 1)]
    for name in names:
        serve(log, name, path="/v1/" + "é" * 100)  # two bytes a character: pieces are measured in bytes
    handler.flush()
    assert len(sink.writes) > 1
    assert all(len(piece.encode()) <= select.PIPE_BUF and piece.endswith("\n") for piece in sink.writes)
    assert sink.request_ids() == names


async def test_without_the_gateway_handler_lines_go_through_the_logger(install: Install) -> None:
    records: list[logging.LogRecord] = []
    collector = logging.Handler()
    collector.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("gateway.access.elsewhere")
    logger.setLevel(logging.INFO)
    logger.addHandler(collector)
    logger.propagate = False
    try:
        serve(RequestLog(logger), "req_1")
    finally:
        logger.removeHandler(collector)
    [record] = records
    assert (record.getMessage(), record.request_id, record.fields["status"]) == ("request", "req_1", 200)  # type: ignore[attr-defined]


def start_workers(config: Path, port: int, log_path: Path, *options: str) -> subprocess.Popen[bytes]:
    """`gateway serve --workers 2` logging JSON, its stdout and stderr both into `log_path`."""
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1",
             "--port", str(port), "--workers", "2", "--log-format", "json", *options],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


async def test_workers_write_every_waiting_line_when_stopped(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("routes:\n  m: {provider: mock}\n")
    log_path = tmp_path / "gateway.log"
    port = free_port()
    process = start_workers(config, port, log_path, "--access-log-flush", "3600")
    try:
        await wait_ready(port, process)
        async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0) as client:
            for number in range(20):
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-request-id": f"t-{number}"}
                )
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    access = sorted(line["request_id"] for line in lines if line["logger"] == "gateway.access")
    assert access == sorted(f"t-{number}" for number in range(20))
