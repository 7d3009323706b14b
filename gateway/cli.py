"""Command line: `gateway serve` and `gateway check-config`."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

from gateway.config import (
    Config,
    ConfigError,
    Fallback,
    LoadBalance,
    Node,
    Route,
    Single,
    Target,
    load_config,
)

DEFAULT_CONFIG = "configs/gateway.yaml"
log = logging.getLogger("gateway")


def _config_path(given: str | None) -> str:
    return given or os.environ.get("GATEWAY_CONFIG") or DEFAULT_CONFIG


def _load_or_exit(path: str) -> Config:
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"{path}: invalid configuration", file=sys.stderr)
        for error in exc.errors:
            print(f"  {error}", file=sys.stderr)
        raise SystemExit(2) from None


def describe_route(route: Route) -> Iterator[str]:
    """The route as an indented tree, inherited settings resolved, secrets left out."""
    memory = route.memory
    yield f"{route.name}  (memory defaults: {memory.memory_type}, maxMessages={memory.max_messages}, maxTokens={memory.max_tokens})"
    yield from _describe_node(route.root, 1)


def _describe_node(node: Node, depth: int) -> Iterator[str]:
    pad = "  " * depth
    match node:
        case Target():
            retry = node.retry
            parts = [
                f"provider={node.provider}",
                f"weight={node.weight:g}",
                f"baseUrl={node.base_url or '-'}",
                f"apiKey={'set' if node.api_key else 'none'}",
                f"timeout={node.timeout:g}s",
                f"streamIdleTimeout={node.stream_idle_timeout:g}s",
                f"retry={retry.attempts}x on {sorted(retry.on_status_codes)}",
            ]
            if node.override_params:
                parts.append(f"overrideParams={dict(node.override_params)}")
            if node.headers:
                parts.append(f"headers={sorted(node.headers)}")
            yield f"{pad}- target {node.name}: " + " ".join(parts)
        case Single() | Fallback() | LoadBalance():
            mode = {Single: "single", Fallback: "fallback", LoadBalance: "loadbalance"}[type(node)]
            codes = getattr(node, "on_status_codes", None)
            triggers = f" onStatusCodes={sorted(codes)}" if codes is not None else ""
            yield f"{pad}- {mode} {node.name}: weight={node.weight:g}{triggers}"
            for child in node.children:
                yield from _describe_node(child, depth + 1)


def check_config(path: str) -> int:
    config = _load_or_exit(path)
    print(f"{path}: ok ({len(config.routes)} routes, auth {'on' if config.api_keys else 'off'})")
    for route in config.routes.values():
        for line in describe_route(route):
            print(line)
    return 0


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


def serve(path: str, host: str | None, port: int | None, *, workers: int = 1) -> None:
    """Run one gateway process until SIGTERM/SIGINT, draining in-flight requests on the way out."""
    from aiohttp import web

    from gateway.server.app import create_app

    config = _load_or_exit(path)
    _configure_logging()
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on every platform we ship
        pass
    host = host or config.server.host
    port = config.server.port if port is None else port
    log.info("gateway %d listening on %s:%d with %d routes", os.getpid(), host, port, len(config.routes))
    web.run_app(
        create_app(config, processes=workers),
        host=host,
        port=port,
        backlog=config.server.backlog,
        access_log=None,
        print=None,
        reuse_port=workers > 1 or None,
        handler_cancellation=True,
        shutdown_timeout=config.server.drain_seconds,
    )


RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
STABLE_SECONDS = 60.0  # a worker that lived this long resets its slot's backoff
STARTUP_SECONDS = 10.0  # a worker that died sooner than this failed to start (imports alone take seconds)
MAX_STARTUP_FAILURES = 4  # that many failed starts in a row in one slot: the config or host is broken


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
class _Slot:
    """One of the N worker places: its running process, or when to start the next one."""

    process: BaseProcess | None
    started_at: float
    restart_at: float = 0.0
    deaths: int = 0  # in a row, since a worker in this slot last lived STABLE_SECONDS
    startup_failures: int = 0  # in a row, each within STARTUP_SECONDS of its start


def serve_workers(path: str, host: str | None, port: int | None, workers: int) -> int:
    """Keep `workers` processes serving one port (SO_REUSEPORT), restarting any that die.

    Exits 1 after stopping the rest when a slot's workers keep dying at start-up. SIGTERM or
    SIGINT stops restarting, passes SIGTERM on to each worker and waits for them to drain;
    the exit code is 0 if every worker exited cleanly.
    """
    _load_or_exit(path)  # fail once, in the parent, on a bad config
    _configure_logging()
    context = multiprocessing.get_context("spawn")

    def start() -> BaseProcess:
        process = context.Process(target=serve, args=(path, host, port), kwargs={"workers": workers})
        process.start()
        return process

    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    # The wakeup socket makes a signal end the wait below even while every slot is backing off.
    wakeup, wakeup_writer = socket.socketpair()
    wakeup.setblocking(False)
    wakeup_writer.setblocking(False)
    signal.set_wakeup_fd(wakeup_writer.fileno())
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    slots = [_Slot(start(), time.monotonic()) for _ in range(workers)]
    while not stopping:
        now = time.monotonic()
        for slot in slots:
            if slot.process is None and slot.restart_at <= now:
                slot.process, slot.started_at = start(), now
        running = [slot.process for slot in slots if slot.process is not None]
        next_restart = min((slot.restart_at for slot in slots if slot.process is None), default=None)
        timeout = None if next_restart is None else next_restart - now
        if wakeup in wait([wakeup, *(process.sentinel for process in running)], timeout):
            wakeup.recv(64)
        for slot in slots:
            died = slot.process is not None and slot.process.exitcode is not None
            if died and not stopping and not _replace_dead_worker(slot, time.monotonic()):
                _stop_workers(slots)
                return 1
    return 0 if _stop_workers(slots) else 1


def _replace_dead_worker(slot: _Slot, now: float) -> bool:
    """Log how the slot's worker died and schedule its successor; False to give up instead."""
    assert slot.process is not None and slot.process.exitcode is not None
    pid, how, lived = slot.process.pid, describe_exit(slot.process.exitcode), now - slot.started_at
    slot.process = None
    slot.deaths = 1 if lived >= STABLE_SECONDS else slot.deaths + 1
    slot.startup_failures = slot.startup_failures + 1 if lived < STARTUP_SECONDS else 0
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="OpenAI-compatible LLM routing gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the gateway")
    serve_cmd.add_argument("--config", help=f"config file (default: $GATEWAY_CONFIG, else {DEFAULT_CONFIG})")
    serve_cmd.add_argument("--host")
    serve_cmd.add_argument("--port", type=int)
    serve_cmd.add_argument("--workers", type=int, default=1, help="processes sharing the port")
    check_cmd = commands.add_parser("check-config", help="validate a config and print its routes")
    check_cmd.add_argument("path", nargs="?")
    args = parser.parse_args(argv)

    if args.command == "check-config":
        try:
            return check_config(_config_path(args.path))
        except BrokenPipeError:  # `gateway check-config | head`: the reader left, which is fine
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    path = _config_path(args.config)
    if args.workers == 1:
        serve(path, args.host, args.port)
        return 0
    return serve_workers(path, args.host, args.port, args.workers)
