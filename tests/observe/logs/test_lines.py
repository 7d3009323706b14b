"""gateway.observe.logs.lines: a record as one JSON object or one text line, with its time, id, fields and traceback."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.observe import trace as observe
from gateway.observe.logs import JsonFormatter, TextFormatter, access_fields
from tests.support.log_lines import ISO_UTC


def make_record(message: str = "hello %s", *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("gateway.test", logging.WARNING, __file__, 1, message, args or ("world",), None)
    record.__dict__.update(extra)
    return record


def failing_record() -> logging.LogRecord:
    try:
        raise ValueError("the upstream answer was not JSON")
    except ValueError:
        return logging.LogRecord("gateway", logging.ERROR, __file__, 1, "it failed", (), sys.exc_info())


def test_json_line_has_time_level_logger_message_request_id_and_fields() -> None:
    record = make_record(request_id="req_1", fields={"route": "fast", "attempts": 2, "stream": False, "ttft_ms": None})
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed == {
        "time": parsed["time"],
        "level": "warning",
        "logger": "gateway.test",
        "message": "hello world",
        "request_id": "req_1",
        "route": "fast",
        "attempts": 2,
        "stream": False,
        "ttft_ms": None,
    }
    assert ISO_UTC.fullmatch(parsed["time"])
    when = datetime.fromisoformat(parsed["time"])
    assert when.tzinfo == UTC and abs(when.timestamp() - record.created) < 0.001


def test_json_line_without_request_id_or_fields_has_the_four_keys() -> None:
    assert set(json.loads(JsonFormatter().format(make_record(request_id=None)))) == {"time", "level", "logger", "message"}


def test_json_line_renders_an_exception_as_a_string_field() -> None:
    parsed = json.loads(JsonFormatter().format(failing_record()))
    assert parsed["message"] == "it failed"
    assert parsed["exception"].startswith("Traceback (most recent call last):")
    assert parsed["exception"].endswith("ValueError: the upstream answer was not JSON")


def test_text_line_reads_time_level_logger_id_message_then_fields() -> None:
    fields = {"route": "fast", "target": None, "stream": True, "path": "/v1/x y", "code": "", "n": 3}
    line = TextFormatter().format(make_record(request_id="req_1", fields=fields))
    time_text, rest = line.split(" ", 1)
    assert ISO_UTC.fullmatch(time_text)
    # None is left out; a value with a space (or an empty one) is quoted so the line splits cleanly.
    assert rest == 'WARNING gateway.test [req_1] hello world route=fast stream=true path="/v1/x y" code="" n=3'


def test_text_line_without_request_id_and_with_a_traceback() -> None:
    line = TextFormatter().format(failing_record())
    first, *rest = line.splitlines()
    assert first.endswith(" ERROR gateway it failed")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "ValueError: the upstream answer was not JSON"


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_the_access_line_is_what_the_formatter_makes_of_its_record(formatter: JsonFormatter | TextFormatter) -> None:
    """The access line skips the LogRecord, not anything the line says."""
    trace = observe.Trace(request_id="req_1", method="POST", path="/v1/chat/completions", tenant="team a")
    trace.stream, trace.attempts, trace.prompt_tokens, trace.completion_tokens = True, 2, 11, 7
    trace.end(200)
    record = logging.LogRecord("gateway.access", logging.INFO, __file__, 0, "request", None, None)
    record.request_id, record.fields = "req_1", access_fields(trace)
    assert formatter.access_line(trace, created=record.created, level="INFO", logger="gateway.access") == formatter.format(record)
