"""Log lines: one JSON object, or `time LEVEL logger [request_id] message key=value ...`, per record.

A formatter also builds a line from its parts, without a LogRecord: access lines are made that
way, in batches, from the entries `access_entry` takes when each request ends.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Mapping
from math import floor
from typing import Any

import orjson

from gateway.observe.logs.access import HEAD, access_entry, blank_entry
from gateway.observe.trace import Trace

_MILLISECONDS = tuple(f".{millisecond:03d}Z" for millisecond in range(1000))  # a time's ending, made once


class _UtcClock:
    """ISO-8601 UTC times with milliseconds; the whole-second part is formatted once a second."""

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")

    def iso(self, created: float) -> str:
        second = floor(created)  # floor(), not int(): the same for a time, and cheaper
        cached, prefix = self._second
        if cached != second:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)  # one assignment: threads see the old or the new pair
        return prefix + _MILLISECONDS[floor((created - second) * 1000)]


class LineFormatter(logging.Formatter):
    """A formatter that can also build a line from its parts, without a LogRecord."""

    def __init__(self) -> None:
        super().__init__()
        self._clock = _UtcClock()

    def line(
        self, created: float, level: str, logger: str, *, message: str, request_id: str | None, fields: Mapping[str, Any] | None
    ) -> str:
        """The line a record with these attributes (and no exception) is formatted as."""
        raise NotImplementedError

    def access_line(self, trace: Trace, *, created: float, level: str, logger: str) -> str:
        """The access line for `trace`: the record `RequestLog` stands for, formatted."""
        entry = access_entry(trace, created, blank_entry(level.lower(), logger))
        return self.access_lines([entry])[0][:-1].decode()

    def access_lines(self, entries: list[dict[str, Any]]) -> list[bytes]:
        """The lines (UTF-8, each ending in a newline) for `access_entry`s; may change the entries."""
        lines = []
        for entry in entries:
            created, level, logger, message, request_id = (entry[key] for key in HEAD)
            fields = dict(itertools.islice(entry.items(), len(HEAD), None))
            line = self.line(created, level.upper(), logger, message=message, request_id=request_id, fields=fields)
            lines.append((line + "\n").encode())
        return lines


class JsonFormatter(LineFormatter):
    """One JSON object per line: time, level, logger, message, request_id, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        more = {}
        if record.exc_info:
            more["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            more["stack"] = self.formatStack(record.stack_info)
        return self.line(
            record.created, record.levelname, record.name, message=record.getMessage(),
            request_id=getattr(record, "request_id", None), fields=getattr(record, "fields", None), more=more,
        )  # fmt: skip

    def line(
        self,
        created: float,
        level: str,
        logger: str,
        *,
        message: str,
        request_id: str | None,
        fields: Mapping[str, Any] | None,
        more: Mapping[str, Any] | None = None,
    ) -> str:
        """The JSON line; `more` (an exception) comes after the fields."""
        line: dict[str, Any] = {"time": self._clock.iso(created), "level": level.lower(), "logger": logger, "message": message}
        if request_id is not None:
            line["request_id"] = request_id
        if fields:
            line.update(fields)
        if more:
            line.update(more)
        return orjson.dumps(line, default=str, option=orjson.OPT_NON_STR_KEYS).decode()

    def access_lines(self, entries: list[dict[str, Any]]) -> list[bytes]:
        # What `line` makes of each, without the fields' own dict: every request pays for a line.
        iso, dumps = self._clock.iso, orjson.dumps
        lines = []
        for entry in entries:
            entry["time"] = iso(entry["time"])
            lines.append(dumps(entry, None, orjson.OPT_APPEND_NEWLINE))
        return lines


class TextFormatter(LineFormatter):
    """`time LEVEL logger [request_id] message key=value ...`, the traceback on the lines after."""

    def format(self, record: logging.LogRecord) -> str:
        text = self.line(
            record.created, record.levelname, record.name, message=record.getMessage(),
            request_id=getattr(record, "request_id", None), fields=getattr(record, "fields", None),
        )  # fmt: skip
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text

    def line(
        self, created: float, level: str, logger: str, *, message: str, request_id: str | None, fields: Mapping[str, Any] | None
    ) -> str:
        parts = [self._clock.iso(created), level, logger]
        if request_id is not None:
            parts.append(f"[{request_id}]")
        parts.append(message)
        if fields:
            parts.extend(f"{key}={_text_value(value)}" for key, value in fields.items() if value is not None)
        return " ".join(parts)


_PLAIN = re.compile(r'[^\s"=]+')  # a text value that needs no quotes


def _text_value(value: Any) -> str:
    """A field value as one `key=value` token: quoted (JSON-style) when empty or with spaces, quotes or `=`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value)
    return text if _PLAIN.fullmatch(text) else orjson.dumps(text).decode()
