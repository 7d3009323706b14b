"""The parent of `gateway serve --workers N`: keeps N worker processes alive, restarting the dead.

A worker that dies is logged (exit code or signal) and restarted after a backoff; workers that
keep dying at start-up mean a broken config or host, and the parent gives up with exit code 1.
On SIGHUP the parent checks the config file; when it loads, the parent keeps a copy of its text
(AcceptedConfig) and passes SIGHUP on to every worker, each of which reloads that copy in place
(gateway.cli.reload): the port stays served throughout. Workers read only that copy, never the file:
a worker started after a refused reload serves what its siblings serve, not the file refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

log = logging.getLogger("gateway")

RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
STABLE_SECONDS = 60.0  # a worker that lived this long resets its slot's backoff
STARTUP_SECONDS = 10.0  # a worker that died sooner than this failed to start (imports alone take seconds)
MAX_STARTUP_FAILURES = 4  # that many failed starts in a row in one slot: the config or host is broken


_PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """In a worker: be sent SIGTERM (a clean stop) when the parent dies, even by SIGKILL.

    Without it a parent killed outright (the OOM killer, `kill -9`) leaves its workers serving
    the port with nobody to stop or restart them. Linux only; elsewhere a no-op.
    """
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent.pid:  # it died before the request above: nobody will send the signal
        os.kill(os.getpid(), signal.SIGTERM)


def restart_delay(deaths: int) -> float:
    """Seconds to wait before restarting a slot whose workers died `deaths` times in a row."""
    return min(RESTART_FIRST_DELAY * 2.0 ** (deaths - 1), RESTART_MAX_DELAY)


def describe_exit(exitcode: int) -> str:
    """How a worker ended, from its multiprocessing exit code: `exit code 1` or `signal SIGKILL`."""
    if exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        return f"signal {signal.Signals(-exitcode).name}"
    except ValueError:  # a real-time signal has no name of its own
        return f"signal {-exitcode}"


@dataclass(slots=True)
class AcceptedConfig:
    """The config a workers' parent accepted, as each worker gets it at its start: strings, for spawn.

    `started` is the text the first workers started on: the settings only a restart changes keep
    its values in every worker, replacements too. `text` is the text the parent last accepted: a
    worker starts on it without reading any file. `path` is the parent's private copy of it, which
    workers reload from: replaced whole at each accepted reload, so a worker never reads a text the
    parent has not checked, nor half of one. `shown_as` is the operator's file, as logs name it.
    """

    shown_as: str
    started: str
    text: str
    path: str

    def accept(self, text: str) -> None:
        """Make `text`, checked, what workers start and reload from (OSError, and nothing changed, if it cannot be written)."""
        fresh = f"{self.path}.new"
        with open(fresh, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(fresh, self.path)
        self.text = text


@contextmanager
def accepted_config(shown_as: str, text: str) -> Iterator[AcceptedConfig]:
    """An AcceptedConfig of `text` (the file at `shown_as` as the workers start on it), its copy in a private directory removed at exit."""
    with tempfile.TemporaryDirectory(prefix="gateway-config-") as folder:  # mode 0700: the text may hold keys
        accepted = AcceptedConfig(shown_as, started=text, text=text, path=os.path.join(folder, "accepted.yaml"))
        accepted.accept(text)
        yield accepted


@dataclass(slots=True)
class _Slot:
    """One of the N worker places: its running process, or when to start the next one."""

    process: BaseProcess | None
    started_at: float
    restart_at: float = 0.0
    deaths: int = 0  # in a row, since a worker in this slot last lived STABLE_SECONDS
    startup_failures: int = 0  # in a row, each within STARTUP_SECONDS of its start


def supervise(
    start: Callable[[], BaseProcess],
    workers: int,
    *,
    on_exit: Callable[[int], None] | None = None,
    reload: Callable[[], bool] | None = None,
) -> int:
    """Keep `workers` processes from `start` running, restarting any that die.

    Returns 1 after stopping the rest when a slot's workers keep dying at start-up. SIGTERM or
    SIGINT stops restarting, passes SIGTERM on to each worker and waits for them to drain;
    the result is 0 if every worker exited cleanly. `on_exit` is told each dead worker's pid.
    SIGHUP is passed on to every running worker when `reload()` accepts the config file.
    """
    on_exit = on_exit or (lambda pid: None)
    stopping = False
    reloading = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    def ask_reload(signum: int, frame: FrameType | None) -> None:
        nonlocal reloading
        reloading = True

    # The wakeup socket makes a signal end the wait below even while every slot is backing off.
    wakeup, wakeup_writer = socket.socketpair()
    wakeup.setblocking(False)
    wakeup_writer.setblocking(False)
    signal.set_wakeup_fd(wakeup_writer.fileno())
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, ask_reload)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})  # `gateway serve` blocked it until now

    slots = [_Slot(_started(start), time.monotonic()) for _ in range(workers)]
    while not stopping:
        if reloading:
            reloading = False
            if reload is None or reload():
                _signal_workers(slots, signal.SIGHUP)
        now = time.monotonic()
        for slot in slots:
            if slot.process is None and slot.restart_at <= now:
                slot.process, slot.started_at = _started(start), now
        running = [slot.process for slot in slots if slot.process is not None]
        next_restart = min((slot.restart_at for slot in slots if slot.process is None), default=None)
        timeout = None if next_restart is None else next_restart - now
        if wakeup in wait([wakeup, *(process.sentinel for process in running)], timeout):
            wakeup.recv(64)
        for slot in slots:
            died = slot.process is not None and slot.process.exitcode is not None
            if died and slot.process is not None and slot.process.pid is not None:
                on_exit(slot.process.pid)
            if died and not stopping and not _replace_dead_worker(slot, time.monotonic()):
                _stop_workers(slots)
                return 1
    return 0 if _stop_workers(slots) else 1


def _started(start: Callable[[], BaseProcess]) -> BaseProcess:
    """A worker from `start`, born with SIGHUP blocked: until it can reload, a SIGHUP waits instead of ending it."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        return start()
    finally:  # a SIGHUP the parent was sent meanwhile is delivered now
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _signal_workers(slots: Sequence[_Slot], signum: int) -> None:
    """Send `signum` to every running worker (one that just died is restarted as usual)."""
    for slot in slots:
        process = slot.process
        if process is not None and process.pid is not None and process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signum)


def _replace_dead_worker(slot: _Slot, now: float) -> bool:
    """Log how the slot's worker died and schedule its successor; False to give up instead."""
    assert slot.process is not None and slot.process.exitcode is not None
    pid, exitcode, lived = slot.process.pid, slot.process.exitcode, now - slot.started_at
    how = describe_exit(exitcode)
    slot.process = None
    slot.deaths = 1 if lived >= STABLE_SECONDS else slot.deaths + 1
    # A start fails with an exit code (a port taken, a bad path); a worker killed by a signal
    # (OOM, a crash a request caused) was running, and never counts towards giving up.
    failed_start = lived < STARTUP_SECONDS and exitcode > 0
    slot.startup_failures = slot.startup_failures + 1 if failed_start else 0
    if slot.startup_failures >= MAX_STARTUP_FAILURES:
        log.error("worker %s died at start-up %d times in a row (%s); giving up", pid, MAX_STARTUP_FAILURES, how)
        return False
    delay = restart_delay(slot.deaths)
    log.warning("worker %s died (%s) after %.1fs; restarting it in %.1fs", pid, how, lived, delay)
    slot.restart_at = now + delay
    return True


def _stop_workers(slots: Sequence[_Slot]) -> bool:
    """SIGTERM every running worker and wait for each to drain; True if all exited cleanly."""
    running = [slot.process for slot in slots if slot.process is not None]
    for process in running:
        if process.exitcode is None:
            process.terminate()
    for process in running:
        process.join()
    # A worker still starting up has no handler yet and dies of the SIGTERM itself; that is clean too.
    return all(process.exitcode in (0, -signal.SIGTERM) for process in running)
