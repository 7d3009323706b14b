"""A redis-server that hangs: stopped (SIGSTOP) while the test runs, so it accepts connections and never answers."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.servers import RedisProcess


@contextmanager
def hung(server: RedisProcess) -> Iterator[RedisProcess]:
    """`server` stopped for the block, and continued after it whatever happened."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield server
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def resume(server: RedisProcess) -> None:
    """Let `server` go on before its `hung` block ends (continuing a running one is harmless)."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGCONT)
