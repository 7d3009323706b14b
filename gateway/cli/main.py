"""Command line: `gateway serve`, `check-config`, `schema`, `init`, `settle-memory` and `memory` (the parser: gateway.cli.parser)."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import NoReturn

from gateway.cli.describe import describe_route
from gateway.cli.init import init
from gateway.cli.parser import CONFIGS_LOOKED_FOR, build_parser
from gateway.cli.workers import AcceptedConfig, accepted_config, end_with_parent, supervise
from gateway.config.json_schema import config_json_schema
from gateway.config.loader import ConfigError, parse_config, read_config_text
from gateway.core.settings import Config
from gateway.observe.logs import ACCESS_FLUSH_SECONDS, configure_logging, default_log_format
from gateway.observe.metrics import multiprocess_dir, worker_exited

# The offline default shipped inside the package: what `gateway serve` runs from any directory.
PACKAGED_CONFIG = str(Path(__file__).parent.parent / "default.yaml")
log = logging.getLogger("gateway")


def _config_path(given: str | None) -> str:
    """The config to use: --config, else $GATEWAY_CONFIG, else ./gateway.yaml (what `gateway init` writes), else
    ./configs/gateway.yaml, else the packaged one."""
    chosen = given or os.environ.get("GATEWAY_CONFIG")
    if chosen:
        return chosen
    return next((path for path in CONFIGS_LOOKED_FOR if os.path.isfile(path)), PACKAGED_CONFIG)


def _read_config(path: str) -> tuple[str, Config]:
    """The text of the config file at `path` and the configuration it holds; ConfigError when it does not load."""
    text = read_config_text(path)
    return text, parse_config(text)


def _load_or_exit(path: str, text: str | None = None) -> Config:
    """The configuration in the file at `path` (or in `text`, read from it); exit 2, every error printed, when it does not load."""
    try:
        return _read_config(path)[1] if text is None else parse_config(text)
    except ConfigError as exc:
        _exit_refused(path, exc)


def _exit_refused(path: str, refused: ConfigError) -> NoReturn:
    """Print every error of the config file at `path` and exit 2, as check-config does."""
    print(f"{path}: invalid configuration", file=sys.stderr)
    for error in refused.errors:
        print(f"  {error}", file=sys.stderr)
    raise SystemExit(2) from None


def check_config(path: str) -> int:
    config = _load_or_exit(path)
    auth = "on" if config.api_keys or config.admin_keys else "off"
    print(f"{path}: ok ({len(config.routes)} routes, auth {auth})")
    for route in config.routes.values():
        for line in describe_route(route):
            print(line)
    return 0


def print_schema() -> int:
    """Print the config file's JSON Schema, which editors use to complete and check gateway.yaml."""
    print(json.dumps(config_json_schema(), indent=2), flush=True)
    return 0


def _to_a_reader(command: Callable[[], int]) -> int:
    """Run a command that prints, whose reader may leave early (`gateway schema | head`): that is fine, exit 0."""
    try:
        return command()
    except BrokenPipeError:  # the rest is dropped, and nothing is left to fail at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def settle_memory(path: str) -> int:
    """Write each conversation row of a SQLite memory file as its messages say: what a downgrade needs.

    This version moves a conversation's row only when it must (see sqlite_file); older gateways
    read the row alone. Run it with the gateways that use the file stopped.
    """
    import sqlite3  # for start-up cost: only this command needs them, every other command starts without

    from gateway.memory.sqlite_file import open_file, settle

    if not os.path.isfile(path):  # never create an empty store where the operator meant an existing one
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    try:
        # Looked at read-only first: opening for the store adds its tables to any SQLite file.
        with contextlib.closing(sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)) as probe:
            tables = {name for (name,) in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"conversations", "messages"} <= tables:
            print(f"{path}: not a gateway memory file (no conversations and messages tables)", file=sys.stderr)
            return 1
        db = open_file(path, busy_timeout_ms=10_000)
        try:
            changed = settle(db)
        finally:
            db.close()
    except sqlite3.Error as exc:
        print(f"{path}: cannot settle the memory file: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: {changed} conversation rows settled; older gateways can open it")
    return 0


def serve(
    path: str,
    host: str | None,
    port: int | None,
    *,
    log_format: str = "json",
    log_level: str = "info",
    access_log_flush: float = ACCESS_FLUSH_SECONDS,
) -> None:
    """Run one gateway process until SIGTERM/SIGINT, draining in-flight requests on the way out.

    SIGHUP reloads the config file (gateway.cli.reload); it stays blocked (`main` blocks it) until
    the reloader listens.
    """
    _serve(
        _load_or_exit(path), host, port, reloads=path, shown_as=path, processes=1,
        log_format=log_format, log_level=log_level, access_log_flush=access_log_flush,
    )  # fmt: skip


def serve_worker(
    accepted: AcceptedConfig,
    host: str | None,
    port: int | None,
    *,
    workers: int,
    log_format: str,
    log_level: str,
    access_log_flush: float,
) -> None:
    """Run one of `serve --workers`' processes on what its parent accepted, never on the file as it is now.

    A worker started after reloads (one replacing a dead one) serves what its siblings serve: the
    settings only a restart changes as the workers started, the rest as the parent last accepted.
    SIGHUP reloads the parent's copy; the parent blocked it before starting the worker.
    """
    from gateway.cli.reload import keep_restart_only  # the serving side, for start-up cost: see _serve

    end_with_parent()
    started = _load_or_exit(accepted.shown_as, accepted.started)
    config, _ = keep_restart_only(started, _load_or_exit(accepted.shown_as, accepted.text))
    _serve(
        config, host, port, reloads=accepted.path, shown_as=accepted.shown_as, processes=workers,
        log_format=log_format, log_level=log_level, access_log_flush=access_log_flush,
    )  # fmt: skip


def _serve(
    config: Config,
    host: str | None,
    port: int | None,
    *,
    reloads: str,
    shown_as: str,
    processes: int,
    log_format: str,
    log_level: str,
    access_log_flush: float,
) -> None:
    """Serve `config` until SIGTERM/SIGINT; SIGHUP reloads the file at `reloads` (the logs name `shown_as`)."""
    # The server's modules, for start-up cost: imported by the commands that serve, so
    # check-config, schema and settle-memory start without aiohttp and the application.
    from aiohttp import web

    from gateway.cli.reload import Reloader
    from gateway.server.app import create_app
    from gateway.upstream.guarded import ProvidersNotLoaded

    configure_logging(log_format, log_level, flush_seconds=access_log_flush)
    try:
        import uvloop  # only when serving, for start-up cost, like the server's modules

        uvloop.install()
    except ImportError:  # pragma: no cover - not installed on Windows (pyproject): asyncio's own loop
        pass
    host = host or config.server.host
    port = config.server.port if port is None else port
    log.info(
        "gateway %d listening on %s:%d with %d routes from %s",
        os.getpid(), host, port, len(config.routes), os.path.abspath(shown_as),
    )  # fmt: skip
    app = create_app(config, processes=processes)
    app.cleanup_ctx.append(Reloader(app, reloads, shown_as=shown_as).listen)
    # What start-up made (imports, litellm's tables) lives as long as the process: out of the
    # collector's reach, a full collection during a large body's parse on a body thread holds
    # the GIL for ~10 ms instead of ~60-200 ms (measured on a 250k-container body).
    gc.collect()
    gc.freeze()
    try:
        web.run_app(
            app,
            host=host,
            port=port,
            backlog=config.server.backlog,
            access_log=None,
            print=None,
            reuse_port=processes > 1 or None,
            handler_cancellation=True,
            shutdown_timeout=config.server.drain_seconds,
        )
    except ProvidersNotLoaded as exc:  # a line that says why, not a traceback
        log.error("%s: the gateway cannot serve %s", exc, os.path.abspath(shown_as))
        raise SystemExit(1) from None


def serve_workers(
    path: str,
    host: str | None,
    port: int | None,
    *,
    workers: int,
    log_format: str = "json",
    log_level: str = "info",
    access_log_flush: float = ACCESS_FLUSH_SECONDS,
) -> int:
    """Run `workers` processes sharing one port (SO_REUSEPORT), supervised (see gateway.cli.workers).

    The file is read once at start and once per SIGHUP, here: workers start and reload from what
    this process accepted (AcceptedConfig), so a file it refused never reaches one.
    """
    try:
        text, config = _read_config(path)
    except ConfigError as exc:
        _exit_refused(path, exc)
    configure_logging(log_format, log_level)
    context = multiprocessing.get_context("spawn")
    options = {"workers": workers, "log_format": log_format, "log_level": log_level, "access_log_flush": access_log_flush}
    # The metrics directory is made before the first worker starts: they pick it up at import.
    metrics_dir = multiprocess_dir() if config.metrics.enabled else contextlib.nullcontext()
    with accepted_config(path, text) as accepted, metrics_dir:

        def start() -> BaseProcess:  # the worker gets `accepted` as it is now: spawn pickles it
            process = context.Process(target=serve_worker, args=(accepted, host, port), kwargs=options)
            process.start()
            return process

        def reload() -> bool:
            """Accept the config file if it loads: the workers are told to reload only then (its errors logged once, here)."""
            from gateway.cli.reload import log_refused  # the serving side, for start-up cost: see _serve

            try:
                accepted.accept(_read_config(path)[0])
            except ConfigError as exc:
                log_refused(path, exc, "the workers keep serving the configuration loaded before")
                return False
            except OSError as exc:
                log.error("reload of %s not passed on to the workers: cannot write %s (%s)", path, accepted.path, exc.strerror)
                return False
            log.info("reload of %s accepted; the workers reload it", path)
            return True

        return supervise(start, workers, on_exit=worker_exited if config.metrics.enabled else None, reload=reload)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.command == "check-config":
        return _to_a_reader(lambda: check_config(_config_path(args.path)))
    if args.command == "schema":
        return _to_a_reader(print_schema)
    if args.command == "settle-memory":
        return settle_memory(args.path)
    if args.command == "memory":
        # imported here for start-up cost: only these commands need the stores' modules (redis-py)
        from gateway.cli.memory_transfer import memory_command

        return memory_command(args)
    if args.command == "init":
        return init(args.path, provider=args.provider, memory=args.memory)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    if not args.access_log_flush >= 0:  # also rejects nan
        parser.error("--access-log-flush must be >= 0")
    # From here until the process can reload (a worker inherits it blocked), a SIGHUP waits
    # instead of ending the process: its default action.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    path = _config_path(args.config)
    # Resolved here, where stderr is the operator's: workers are told the format, not left to guess.
    logs = {
        "log_format": args.log_format or default_log_format(sys.stderr),
        "log_level": args.log_level,
        "access_log_flush": args.access_log_flush,
    }
    if args.workers == 1:
        serve(path, args.host, args.port, **logs)
        return 0
    return serve_workers(path, args.host, args.port, workers=args.workers, **logs)
