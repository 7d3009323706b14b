"""The `captured` fixture: configure_logging into a StringIO, the root logger put back afterwards."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator

import pytest

from gateway.observe.logs import configure_logging


@pytest.fixture
def captured() -> Iterator[Callable[[str, str], io.StringIO]]:
    """configure_logging into a StringIO; the root logger is put back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level

    def install(fmt: str, level: str) -> io.StringIO:
        out = io.StringIO()
        configure_logging(fmt, level, stream=out)
        return out

    yield install
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)
