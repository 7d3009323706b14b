"""Each test is bounded (pyproject.toml's `timeout`): a test that hangs fails, named, instead of holding CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HANGING = '''
import asyncio

async def test_waits_for_a_reply_that_never_comes():
    await asyncio.get_running_loop().create_future()
'''


def test_every_test_has_a_bound_that_ends_its_process(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300
    assert pytestconfig.getini("timeout_method") == "thread"


def test_a_hanging_test_under_xdist_fails_with_its_name(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGING)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\ntimeout = 2\ntimeout_method = thread\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", "test_hangs.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "test_hangs.py::test_waits_for_a_reply_that_never_comes" in done.stdout
    assert "1 failed" in done.stdout
