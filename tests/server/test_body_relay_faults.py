"""A speech body the gateway cannot finish relaying is cut off, never ended as if whole.

relay_body passes a 2xx binary answer on as it arrives; once its 200 is out, the only error it
can carry is a connection dropped before the body's end. That holds for the upstream's faults
(test_relay_idle) and for the gateway's own: its shortage mid-body (out of socket buffers, as
the provider reports an ENOBUFS on a read) is counted as gateway_overloaded, logged as a
warning without a traceback, the answer's status 503; a bug of its own is logged with its
traceback, the answer's status 500. The upstream's body is real; the failure is added to its
second read, where no upstream could cause it.
"""

from __future__ import annotations

import errno
import logging
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from gateway.observe.trace import Trace
from gateway.server import body_relay, handlers
from gateway.upstream.dispatch import Result
from gateway.upstream.providers.base import UnreadBody
from gateway.upstream.providers.openai import transport_error
from tests.support.fakes import FakeUpstream, Step
from tests.support.gateway import Gateway
from tests.support.scrape import metrics_text, samples, total

AUDIO = b"ID3" + bytes(range(256)) * 8


class _FailingSecondRead:
    """The upstream's body, whose second read raises `error` instead."""

    def __init__(self, body: UnreadBody, error: Exception) -> None:
        self.body, self.error, self.reads = body, error, 0

    async def next_piece(self) -> bytes:
        self.reads += 1
        if self.reads == 2:
            raise self.error
        return await self.body.next_piece()

    async def close(self) -> None:
        await self.body.close()


def failing_second_read(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """Every relayed body of this gateway fails at its second read with `error`."""

    async def relay_body(request: web.Request, result: Result, headers: Any, *, trace: Trace) -> web.StreamResponse:
        assert result.reply is not None and result.reply.unread is not None
        result.reply.unread = _FailingSecondRead(result.reply.unread, error)
        return await body_relay.relay_body(request, result, headers, trace=trace)

    monkeypatch.setattr(handlers, "relay_body", relay_body)


async def speech_is_cut_off(gateway: Gateway, upstream: FakeUpstream) -> openai.AsyncOpenAI:
    """Ask for speech: the client's read of the answer fails before its end (no clean short body)."""
    upstream.default = Step(events=[AUDIO], events_type="audio/mpeg")
    client = await gateway(f'routes: {{tts: {{name: up, provider: openai, baseUrl: "{upstream.url}", apiKey: k}}}}')
    async with client.audio.speech.with_streaming_response.create(model="tts", voice="alloy", input="hi") as response:
        assert response.status_code == 200
        with pytest.raises(httpx.HTTPError):
            await response.read()
    return client


async def test_the_gateways_shortage_mid_body_cuts_it_off_counted_as_its_own(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    shortage = transport_error(OSError(errno.ENOBUFS, "No buffer space available"))  # what the provider raises
    failing_second_read(monkeypatch, shortage)
    caplog.set_level(logging.INFO, logger="gateway")
    client = await speech_is_cut_off(gateway, upstream)
    found = samples(await metrics_text(client))
    assert total(found, "gateway_overloaded_total", reason="enobufs") == 1
    assert total(found, "gateway_requests_total", route="tts", status_code="503") == 1
    records = [r for r in caplog.records if r.name.startswith("gateway")]
    assert not [r for r in records if r.levelno >= logging.ERROR or r.exc_info], [r.getMessage() for r in records]
    assert any("cut off: up: the gateway ran short (enobufs)" in r.getMessage() for r in records)


async def test_a_failure_of_the_gateway_mid_body_cuts_it_off_with_its_traceback(
    gateway: Gateway, upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failing_second_read(monkeypatch, RuntimeError("a bug of the gateway's"))
    caplog.set_level(logging.INFO, logger="gateway")
    client = await speech_is_cut_off(gateway, upstream)
    found = samples(await metrics_text(client))
    assert total(found, "gateway_requests_total", route="tts", status_code="500") == 1
    (failed,) = [r for r in caplog.records if r.name == "gateway" and r.exc_info]
    assert "cut off" in failed.getMessage() and "a bug of the gateway's" in str(failed.exc_info[1])  # type: ignore[index]
