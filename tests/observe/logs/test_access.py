"""gateway.observe.logs.access: what an access line says, in order, from a Trace."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.observe.logs.access import HEAD, access_entry, access_fields, blank_entry
from gateway.observe.trace import Trace


def ended_trace() -> Trace:
    config = parse_config("routes:\n  chat: {name: up, provider: mock}\n")
    route = config.routes["chat"]
    trace = Trace(None, "req_1", method="POST", path="/v1/chat/completions", tenant="team-a")
    trace.resolved(route, stream=True)
    trace.attempt_ended(route.first_target, "200", 0.01)
    trace.end(200)
    trace.elapsed, trace.ttft = 0.01234, 0.00005  # milliseconds to a tenth, half up: 12.3 and 0.1
    return trace


def test_an_entry_starts_with_the_head_of_its_blank() -> None:
    entry = access_entry(ended_trace(), 12.5, blank_entry("info", "gateway.access"))
    assert list(entry)[: len(HEAD)] == list(HEAD)
    assert [entry[key] for key in HEAD] == [12.5, "info", "gateway.access", "request", "req_1"]


def test_the_fields_are_the_entry_past_its_head() -> None:
    trace = ended_trace()
    assert access_fields(trace) == {
        "tenant": "team-a", "method": "POST", "path": "/v1/chat/completions", "route": "chat",
        "target": "up", "attempts": 1, "status": 200, "error_code": None, "stream": True,
        "duration_ms": 12.3, "ttft_ms": 0.1, "prompt_tokens": None, "completion_tokens": None,
        "memory_type": None, "evicted": None,
    }  # fmt: skip
    assert list(access_fields(trace)) == list(access_entry(trace))[len(HEAD) :]


def test_a_blank_entry_is_a_copy_each_line_changes_alone() -> None:
    blank = blank_entry("debug", "gateway.access")
    access_entry(ended_trace(), 1.0, blank)
    assert blank == blank_entry("debug", "gateway.access")
