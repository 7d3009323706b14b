"""The drop log: once per field at INFO, bounded however many fields clients invent."""

from __future__ import annotations

import logging

import pytest

from gateway.core.translate.dropped import MAX_NAME, MAX_TOLD, DropLog
from gateway.core.translate.messages import to_chat


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records if record.name == "gateway.translate"]


def test_each_field_is_told_at_info_once_per_api(caplog: pytest.LogCaptureFixture) -> None:
    drops = DropLog()
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"):
        drops.dropped("messages", ["thinking", "cache_control", "thinking"])
        drops.dropped("messages", ["thinking"])
        drops.dropped("responses", ["thinking"])
    assert [(level, line.split(" left out")[0]) for level, line in lines(caplog)] == [
        (logging.INFO, "messages request: cache_control"), (logging.INFO, "messages request: thinking"),
        (logging.DEBUG, "messages request: thinking"), (logging.INFO, "responses request: thinking")]


def test_fields_a_client_invents_are_remembered_up_to_a_bound_and_shown_safely(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    drops = DropLog()
    monkeypatch.setattr("gateway.core.translate.messages.request.DROPS", drops)
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    with caplog.at_level(logging.DEBUG, logger="gateway.translate"):
        for number in range(MAX_TOLD + 50):
            to_chat({**body, f"invented_{number}": True})
        to_chat({**body, "evil\nkey": 1, "k" * 500: 2})
    assert len(drops.told) == MAX_TOLD
    told = lines(caplog)
    assert sum(level == logging.INFO for level, _ in told) == MAX_TOLD
    assert all("\n" not in line for _, line in told)
    assert any("'evil\\nkey'" in line for _, line in told)
    assert any(f"{'k' * MAX_NAME!r} left out" in line for _, line in told)
