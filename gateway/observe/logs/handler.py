"""The handler `configure_logging` installs: log records as lines, access lines in batches.

Access lines come from `RequestLog` as entries (no LogRecord) and wait in a buffer, as with
nginx's `access_log ... buffer= flush=`: they are written `flush_seconds` after the first of
them, when ACCESS_BUFFER_LINES wait, before any other record (so the order holds), and when the
handler is flushed (logging.shutdown() at exit does that). Writes are at most PIPE_BUF bytes,
which a pipe takes whole: lines of workers sharing one stderr never interleave mid-line.
"""

from __future__ import annotations

import asyncio
import bisect
import codecs
import itertools
import logging
import select
from collections.abc import Iterator
from typing import Any, BinaryIO, TextIO, cast

from gateway.observe.logs.access import ACCESS_LOGGER
from gateway.observe.logs.lines import LineFormatter

ACCESS_FLUSH_SECONDS = 0.5  # the longest an access line waits in the buffer
ACCESS_BUFFER_LINES = 128  # written at once when this many wait (~50 kB of JSON)


class GatewayHandler(logging.StreamHandler[TextIO]):
    """Log records as lines on `stream`; access lines buffered (`flush_seconds` 0: each written at once)."""

    def __init__(self, stream: TextIO, formatter: LineFormatter, *, flush_seconds: float) -> None:
        super().__init__(stream)
        self.setFormatter(formatter)
        self.line_formatter = formatter
        self.flush_seconds = flush_seconds
        self._batch = ACCESS_BUFFER_LINES if flush_seconds else 1  # lines written at once
        self._pending: list[dict[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None

    def write_access(self, entry: dict[str, Any]) -> None:
        """Write the line of one `access_entry` within `flush_seconds` (at once if there is no event loop to wait on)."""
        pending = self._pending
        pending.append(entry)
        if len(pending) >= self._batch:
            self.flush_access()
        elif self._timer is None:
            self._start_timer()

    def _start_timer(self) -> None:
        try:
            loop = asyncio.get_running_loop()  # a syscall on 3.11: paid once a batch, not once a line
        except RuntimeError:
            self.flush_access()
            return
        self._timer = loop.call_later(self.flush_seconds, self.flush_access)

    def flush_access(self) -> None:
        """Write the access lines waiting in the buffer."""
        self.acquire()
        try:
            self._timer = None
            pending = self._pending
            count = len(pending)
            if not count:
                return
            # Two steps, each atomic: a line another thread appends in between stays queued.
            entries = pending[:count]
            del pending[:count]
            lines, stream = self.line_formatter.access_lines(entries), self.stream
            binary = _utf8_bytes(stream)
            if binary is None:
                for piece in _pieces(lines):
                    stream.write(piece.decode())
                stream.flush()
                return
            stream.flush()  # what went to the text layer before goes out first
            for piece in _pieces(lines):
                binary.write(piece)
                binary.flush()  # one write(2) a piece, as the text layer's line buffering does
        except Exception:  # as emit(): a broken stream is reported on stderr, never raised
            self.handleError(logging.makeLogRecord({"name": ACCESS_LOGGER, "msg": "access lines"}))
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        if self._pending:
            self.flush_access()
        super().emit(record)

    def flush(self) -> None:
        self.flush_access()
        super().flush()


def _utf8_bytes(stream: TextIO) -> BinaryIO | None:
    """The byte layer under `stream` when it writes UTF-8 (stderr does): lines go there as they are made."""
    binary = getattr(stream, "buffer", None)
    encoding = getattr(stream, "encoding", None)
    if binary is None or not isinstance(encoding, str) or codecs.lookup(encoding).name != "utf-8":
        return None
    return cast(BinaryIO, binary)


def _pieces(lines: list[bytes], limit: int = select.PIPE_BUF) -> Iterator[bytes]:
    """`lines` (UTF-8, each ending in a newline) joined into pieces of at most `limit` bytes; a longer line is one."""
    ends = list(itertools.accumulate(map(len, lines)))  # in C: no Python step per line
    start, written = 0, 0
    while start < len(lines):
        stop = max(bisect.bisect_right(ends, written + limit, start), start + 1)
        yield b"".join(lines[start:stop])
        start, written = stop, ends[stop - 1]


installed: GatewayHandler | None = None  # the handler `configure_logging` put on the root logger
