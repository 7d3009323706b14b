"""An access line made from the closed sets' Enum members is the line made from their words, in either format."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import pytest

from gateway.config.loader import parse_config
from gateway.core.failures import Failure
from gateway.core.memory.settings import MemoryType
from gateway.core.tree import Target
from gateway.observe import trace as observe
from gateway.observe.logs import RequestLog

ROUTE = parse_config("routes:\n  chat: {provider: mock, name: only}\n").routes["chat"]
CLOCKED = re.compile(r'("?(time|duration_ms|ttft_ms)"?[=:] ?)("[^"]*"|\S+?)(?=[,} ]|$)|^\S+ ')  # what the clock writes


def access_line(captured: Callable[[str, str], io.StringIO], fmt: str, outcome: str, memory_type: MemoryType) -> str:
    out = captured(fmt, "info")
    target = ROUTE.root
    assert isinstance(target, Target)
    trace = observe.Trace(RequestLog(), request_id="req_1", method="POST", path="/v1/chat/completions")
    trace.resolved(ROUTE, stream=False)
    trace.memory_planned(memory_type, 2)
    trace.attempt_ended(target, outcome, 0.01)
    trace.end(504, outcome)
    [line] = out.getvalue().splitlines()
    return CLOCKED.sub(r"\1", line)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_members_and_words_log_the_same_line(captured: Callable[[str, str], io.StringIO], fmt: str) -> None:
    member = access_line(captured, fmt, Failure.TIMEOUT, MemoryType.TOKEN_WINDOW)
    word = access_line(captured, fmt, "timeout", "token_window")  # type: ignore[arg-type]
    assert member == word and "token_window" in member and "timeout" in member
