"""`gateway memory export`, `import` and `migrate`: conversations moved between stores (gateway.memory.transfer).

A store is named by URL (`sqlite:PATH`, `redis://...`, `rediss://...`, with `--cluster` for a
Redis Cluster) or by a config file's memory section (`--config`, its `${ENV}` values read from
the environment). Passwords never reach the output: errors show them as ***, as check-config
does. Progress and the counts go to stderr; an export's lines to stdout or `--output`.

Exit status: 0 when the counts agree, 1 when the counts disagree or a store fails, 2 for a line
that is no exported conversation (nothing of it written) or arguments that name no store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import sys
from collections.abc import Iterator
from typing import IO

from gateway.config.loader import ConfigError, parse_config, read_config_text
from gateway.core.memory.settings import MemoryConfig, StoreKind
from gateway.memory.store import StoreUnavailable
from gateway.memory.transfer import Counts, Progress, export_lines, import_lines, migrate, parse_key
from gateway.memory.transfer_record import BadLine
from gateway.memory.transfer_redis import RedisTransfer
from gateway.memory.transfer_sqlite import SQLiteTransfer
from gateway.memory.transfer_store import TransferStore
from gateway.stores.redis import masked


class Refused(Exception):
    """Arguments that name no store, or a config that does not load: exit 2, the message printed."""


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _store(url: str | None, *, config: str | None, cluster: bool, source: bool = False) -> tuple[TransferStore, str]:
    """The store `url` or `config` names, and how the output names it (no password).

    A `source` SQLite file must be there: opening one makes it, and an export of a mistyped path would be empty.
    """
    if url is None and config is None:
        raise Refused("name a store: a URL (sqlite:PATH, redis://...) or --config FILE")
    memory = _memory_of(config) if url is None else MemoryConfig(store=_kind(url), path=url[len("sqlite:") :], url=url, cluster=cluster)
    if memory.store is StoreKind.SQLITE:
        shown = memory.shown_path or memory.path
        if source and not os.path.isfile(memory.path):
            raise Refused(f"{shown}: no such file")
        # a restore waits for a conversation a running gateway holds as long as one of its turns would
        return SQLiteTransfer(memory.path, lock_wait=memory.lock_timeout_seconds), f"sqlite:{shown}"
    if memory.store is not StoreKind.REDIS:
        raise Refused(f"memory.store {memory.store.value!r} keeps nothing to move (sqlite or redis only)")
    connection = memory.redis
    try:
        return RedisTransfer(connection, ttl_seconds=memory.ttl_seconds), masked(connection.url, connection)
    except Exception as exc:  # what redis-py refuses in a URL; its message may hold the password
        raise Refused(f"redis store: the URL is refused ({masked(str(exc), connection)})") from None


def _kind(url: str) -> StoreKind:
    if url.startswith("sqlite:") and len(url) > len("sqlite:"):
        return StoreKind.SQLITE
    if url.startswith(("redis://", "rediss://", "unix://")):
        return StoreKind.REDIS
    raise Refused(f"not a store URL: {url.partition('://')[0] or url[:10]!r}... (sqlite:PATH, redis://... or rediss://...)")


def _memory_of(path: str | None) -> MemoryConfig:
    assert path is not None
    try:
        return parse_config(read_config_text(path)).memory
    except ConfigError as exc:
        raise Refused("\n  ".join([f"{path}: invalid configuration", *map(str, exc.errors)])) from None
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from None


@contextlib.contextmanager
def _output(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with open(path, "ab") as file:  # appended to: a resumed export adds the rest
        yield file


@contextlib.contextmanager
def _input(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdin.buffer
        return
    with open(path, "rb") as file:
        yield file


def _verdict(counts: Counts) -> int:
    _say(counts.summary())
    if counts.verified:
        return 0
    _say("counts disagree: not every conversation read was written")
    return 1


async def _export(args: argparse.Namespace) -> int:
    source, _ = _store(args.store, config=args.config, cluster=args.cluster, source=True)
    try:
        progress = Progress(args.progress, parse_key(args.after or ""))
        if progress.after is not None and not source.ordered:
            # its lines would go after the first pass's again: a migrate may start over (the import skips), an export not
            raise Refused("a Redis store is scanned in no key order: an export from it cannot start after a key (export it whole)")
        with _output(args.output) as out:
            counts = await export_lines(source, out.write, progress=progress, limit=args.limit, say=_say)
    finally:
        await source.close()
    return _verdict(counts)


async def _import(args: argparse.Namespace) -> int:
    target, shown = _store(args.to, config=args.config, cluster=args.cluster)
    _say(f"importing into {shown}; conversations already there are {'replaced' if args.replace else 'kept (skipped)'}")
    try:
        with _input(args.input) as lines:
            counts = await import_lines(lines, target, replace=args.replace, say=_say)
    finally:
        await target.close()
    return _verdict(counts)


async def _migrate(args: argparse.Namespace) -> int:
    source, shown_source = _store(args.source, config=args.config, cluster=args.cluster, source=True)
    try:
        target, shown_target = _store(args.to, config=None, cluster=args.to_cluster)
    except BaseException:
        await source.close()
        raise
    _say(f"migrating {shown_source} -> {shown_target}; conversations already there are {'replaced' if args.replace else 'kept (skipped)'}")
    try:
        progress = Progress(args.progress, parse_key(args.after or ""))
        counts = await migrate(source, target, progress=progress, limit=args.limit, replace=args.replace, say=_say)
    finally:
        await source.close()
        await target.close()
    return _verdict(counts)


def memory_command(args: argparse.Namespace) -> int:
    """Run `gateway memory <action>`; its exit status."""
    action = {"export": _export, "import": _import, "migrate": _migrate}[args.action]
    try:
        return asyncio.run(action(args))
    except BadLine as exc:
        _say(f"{exc}; nothing of it was written, and no line after it")
        return 2
    except (Refused, ValueError) as exc:
        _say(str(exc))
        return 2
    except (StoreUnavailable, OSError, sqlite3.Error) as exc:
        _say(f"store failed: {exc}")
        return 1
