"""Each test is bounded (pyproject.toml's `timeout`): a test that hangs fails, named and showing where it waited,
and the run goes on; a worker that ends is reported with its test, and the run ends instead of waiting for ever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import ROOT

HANGING = '''
import asyncio

async def waits_for_a_reply_that_never_comes():
    await asyncio.get_running_loop().create_future()

async def test_hangs():
    await waits_for_a_reply_that_never_comes()

def test_after_it():
    assert True
'''
HANGING_TEARDOWN = '''
import asyncio
import pytest

@pytest.fixture
async def closing():
    yield
    await asyncio.get_running_loop().create_future()  # its close never ends either

async def test_hangs_then_its_teardown_too(closing):
    await asyncio.get_running_loop().create_future()
'''
SETTINGS = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
timeout = 2
timeout_method = signal
hang_teardown_seconds = 2
addopts = --max-worker-restart=0 -p tests.support.hangs
"""


def run(directory: Path, *files: str) -> subprocess.CompletedProcess[str]:
    (directory / "pytest.ini").write_text(SETTINGS)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile", *files],
        cwd=directory, env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_suite_bounds_each_test_and_keeps_a_worker_that_ends_from_being_replaced(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300
    assert pytestconfig.getini("timeout_method") == "signal"
    assert "--max-worker-restart=0" in pytestconfig.getini("addopts")
    assert pytestconfig.pluginmanager.has_plugin("tests.support.hangs")


def test_a_hanging_test_fails_showing_where_it_waited_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(HANGING)
    done = run(tmp_path, "test_hangs.py")
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "Timeout" in done.stdout
    assert "asyncio tasks pending at the timeout" in done.stdout
    assert "in waits_for_a_reply_that_never_comes" in done.stdout  # the task's stack, where it waited


def test_a_teardown_hanging_after_a_timeout_ends_its_worker_and_the_run_names_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_hangs_on.py").write_text(HANGING_TEARDOWN)
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    assert True\n")
    done = run(tmp_path, "test_hangs_on.py", "test_fine.py")
    assert "crashed while running 'test_hangs_on.py::test_hangs_then_its_teardown_too'" in done.stdout, done.stdout[-3000:]
    assert done.returncode != 0


def test_the_clients_tests_are_bounded_past_their_npm_install(request: pytest.FixtureRequest) -> None:
    items = [item for item in request.session.items if "tests/clients/" in item.nodeid]
    if not items:
        pytest.skip("tests/clients was not collected in this run")
    for item in items:
        marker = item.get_closest_marker("timeout")
        assert marker is not None and marker.args == (900,), item.nodeid
