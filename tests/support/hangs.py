"""What a test that hangs leaves to read (a pytest plugin, loaded by tests/conftest.py).

pytest-timeout fails a test still running after pyproject.toml's `timeout` (the "signal" method:
the test fails where it waits, and the run goes on). Its traceback shows only the event loop
waiting, so this adds the stack of every asyncio task still pending on an open loop: where the
test, and what it started, were waiting. A teardown that then hangs too ends the worker after
`hang_teardown_seconds`; pytest-xdist reports the test it crashed in (pyproject.toml's addopts
keep it from starting another worker, which leaves a run whose files were all handed out waiting
for ever).
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc

import pytest

TIMED_OUT = "Timeout"  # how pytest-timeout's failure message starts: "Timeout (>300.0s) from pytest-timeout."
TIMED_OUT_KEY = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "hang_teardown_seconds",
        "after a test timed out, how long its teardown may take before the worker ends (tests/support/hangs.py)",
        default="60",
    )


def pending_task_stacks() -> str:
    """Where every task pending on an event loop not yet closed waits: each coroutine it awaits, outermost first."""
    written = []
    loops = [found for found in gc.get_objects() if isinstance(found, asyncio.AbstractEventLoop)]
    for loop in loops:
        if loop.is_closed():
            continue
        for task in asyncio.all_tasks(loop):
            written.append(f"{task!r}")
            written += awaited(task.get_coro())
    return "\n".join(written) or "(no asyncio task pending)"


def awaited(coroutine: object) -> list[str]:
    """The frames of `coroutine` and of what it awaits in turn (Task.get_stack gives the outermost alone)."""
    lines = []
    while coroutine is not None:
        frame = getattr(coroutine, "cr_frame", None) or getattr(coroutine, "gi_frame", None)
        if frame is not None:
            lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}')
        coroutine = getattr(coroutine, "cr_await", None) or getattr(coroutine, "gi_yieldfrom", None)
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    outcome = yield
    failure = call.excinfo
    if failure is None or not failure.errisinstance(pytest.fail.Exception) or not str(failure.value).startswith(TIMED_OUT):
        return
    outcome.get_result().sections.append(("asyncio tasks pending at the timeout", pending_task_stacks()))  # type: ignore[attr-defined]
    item.stash[TIMED_OUT_KEY] = True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Bound the teardown of a test that timed out (armed here: pytest's faulthandler plugin cancels any dump
    armed before, when it reports the failure)."""
    if item.stash.get(TIMED_OUT_KEY, False):
        faulthandler.dump_traceback_later(float(item.config.getini("hang_teardown_seconds")), exit=True)


def pytest_runtest_logfinish() -> None:
    faulthandler.cancel_dump_traceback_later()
