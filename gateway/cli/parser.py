"""The command line's parser: every command and flag with its help, built without side effects.

`command_line()` keeps each command's arguments as argparse made them, so the CLI reference
(gateway.cli.reference.commands) is written from the parser itself and cannot drift from it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Final

from gateway.cli.init import MEMORIES, PROVIDERS, STARTER_PATH
from gateway.observe.logs import ACCESS_FLUSH_SECONDS, FORMATS, LEVELS

# Looked for in the working directory, in this order, when neither --config nor $GATEWAY_CONFIG names one:
# the file `gateway init` writes, then the repository's layout.
CONFIGS_LOOKED_FOR: Final = (STARTER_PATH, "configs/gateway.yaml")
DESCRIPTION = "OpenAI-compatible LLM routing gateway"
AddParser = Callable[..., argparse.ArgumentParser]  # a subparsers action's add_parser


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand: its name, what it does, its parser, and its arguments as argparse made them."""

    name: str
    help: str
    parser: argparse.ArgumentParser
    arguments: tuple[argparse.Action, ...]


@dataclass(frozen=True, slots=True)
class CommandLine:
    """The parser, the program's own options, and each command."""

    parser: argparse.ArgumentParser
    options: tuple[argparse.Action, ...]
    commands: tuple[Command, ...]


def version() -> str:
    """The installed distribution's version (the source tree's, when run uninstalled)."""
    try:
        return metadata.version("gateway")
    except metadata.PackageNotFoundError:
        return "unknown"


def command_line() -> CommandLine:
    """The `gateway` parser with every command, each argument kept for the reference."""
    parser = argparse.ArgumentParser(prog="gateway", description=DESCRIPTION)
    options = (
        parser.add_argument(
            "--version", action="version", version=f"%(prog)s {version()}", help="print the version and exit"
        ),
    )
    add_parser: AddParser = parser.add_subparsers(dest="command", required=True, metavar="COMMAND").add_parser
    commands = (
        _serve(add_parser),
        _check_config(add_parser),
        _schema(add_parser),
        _init(add_parser),
        _settle_memory(add_parser),
        *_memory(add_parser),
    )
    return CommandLine(parser, options, commands)


def build_parser() -> argparse.ArgumentParser:
    """The `gateway` parser (see command_line)."""
    return command_line().parser


def _serve(add_parser: AddParser) -> Command:
    summary = "run the gateway"
    serve = add_parser("serve", help=summary, description=f"{summary.capitalize()}.")
    arguments = (
        serve.add_argument(
            "--config",
            help=f"config file (default: $GATEWAY_CONFIG, else ./{CONFIGS_LOOKED_FOR[0]}, else ./{CONFIGS_LOOKED_FOR[1]}, else the packaged offline default)",
        ),
        serve.add_argument("--host", help="address to listen on (default: server.host in the config)"),
        serve.add_argument("--port", type=int, help="port to listen on (default: server.port in the config)"),
        serve.add_argument(
            "--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT), supervised"
        ),
        serve.add_argument(
            "--log-format", choices=FORMATS, help="log line format (default: text on a terminal, else json)"
        ),
        serve.add_argument(
            "--log-level", choices=LEVELS, default="info", type=str.lower, help="lowest level logged (default: info)"
        ),
        serve.add_argument(
            "--access-log-flush", type=float, default=ACCESS_FLUSH_SECONDS, metavar="SECONDS",
            help=f"longest wait of an access line in the write buffer (default: {ACCESS_FLUSH_SECONDS}; 0 writes each at once)",
        ),
    )  # fmt: skip
    return Command("serve", summary, parser=serve, arguments=arguments)


def _check_config(add_parser: AddParser) -> Command:
    summary = "validate a config and print its routes"
    check = add_parser("check-config", help=summary, description=f"{summary.capitalize()}; exit 2 on any error.")
    arguments = (
        check.add_argument(
            "path", nargs="?", help="the config file (default: as serve's --config, from $GATEWAY_CONFIG on)"
        ),
    )
    return Command("check-config", summary, parser=check, arguments=arguments)


def _schema(add_parser: AddParser) -> Command:
    summary = "print the config file's JSON Schema (for editors)"
    schema = add_parser("schema", help=summary, description=f"{summary[0].upper()}{summary[1:]}.")
    return Command("schema", summary, parser=schema, arguments=())


def _init(add_parser: AddParser) -> Command:
    summary = "write a commented starter config for a provider"
    init = add_parser(
        "init", help=summary, description=f"{summary.capitalize()}; never over an existing file (exit 1)."
    )
    arguments = (
        init.add_argument("path", nargs="?", default=STARTER_PATH, help=f"the file to write (default: {STARTER_PATH})"),
        init.add_argument(
            "--provider", required=True, choices=PROVIDERS,
            help="the upstream: openai, anthropic or gemini (keys from the environment), ollama or vllm "
            "(local OpenAI-compatible servers), or mock (offline)",
        ),
        init.add_argument(
            "--memory", choices=MEMORIES, default=MEMORIES[0],
            help=f"where conversation memory is kept (default: {MEMORIES[0]})",
        ),
    )  # fmt: skip
    return Command("init", summary, parser=init, arguments=arguments)


def _settle_memory(add_parser: AddParser) -> Command:
    summary = "make a SQLite memory file readable by older gateways (run with the gateway stopped)"
    settle = add_parser("settle-memory", help=summary, description=f"{summary[0].upper()}{summary[1:]}.")
    arguments = (settle.add_argument("path", help="the file (memory.path in the config)"),)
    return Command("settle-memory", summary, parser=settle, arguments=arguments)


def _memory(add_parser: AddParser) -> tuple[Command, ...]:
    summary = "move conversations between memory stores: export, import, migrate"
    memory = add_parser("memory", help=summary, description=f"{summary[0].upper()}{summary[1:]}.")
    add_action: AddParser = memory.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser
    return _memory_export(add_action), _memory_import(add_action), _memory_migrate(add_action)


_STORE_URL: Final = "sqlite:PATH, redis://[:PASSWORD@]HOST:PORT/DB or rediss://..."
_CONFIG_HELP: Final = "a gateway config whose memory section names the store (its ${ENV} values from the environment)"
_CLUSTER_HELP: Final = "the Redis URL is any node of a Redis Cluster"
_REPLACE_HELP: Final = "overwrite a conversation already in the target under the same key (default: keep it, and count it skipped)"


def _resumable(parser: argparse.ArgumentParser) -> tuple[argparse.Action, ...]:
    return (
        parser.add_argument(
            "--after", metavar="TENANT:MEMORYID",
            help="start after this conversation (SQLite sources read in key order; Redis sources start over)",
        ),
        parser.add_argument(
            "--progress", metavar="FILE",
            help="keep the last conversation passed in FILE, and start after the one it names when run again",
        ),
        parser.add_argument("--limit", type=int, help="stop after this many conversations (default: all)"),
    )  # fmt: skip


def _memory_export(add_action: AddParser) -> Command:
    summary = "write every conversation of a store as JSON lines, one conversation a line"
    export = add_action("export", help=summary, description=f"{summary[0].upper()}{summary[1:]}; counts on stderr.")
    arguments = (
        export.add_argument("--store", metavar="URL", help=f"the store to read: {_STORE_URL}"),
        export.add_argument("--config", help=_CONFIG_HELP + ", instead of --store"),
        export.add_argument("--cluster", action="store_true", help=_CLUSTER_HELP),
        export.add_argument(
            "--output", default="-", metavar="FILE", help="where the lines go, appended to (default: -, stdout)"
        ),
        *_resumable(export),
    )
    return Command("memory export", summary, parser=export, arguments=arguments)


def _memory_import(add_action: AddParser) -> Command:
    summary = "write the conversations of an export into a store, times, item ids and summaries kept"
    imported = add_action("import", help=summary, description=f"{summary[0].upper()}{summary[1:]}; exit 2 at a bad line.")
    arguments = (
        imported.add_argument("--input", default="-", metavar="FILE", help="the export's lines (default: -, stdin)"),
        imported.add_argument("--to", metavar="URL", help=f"the store to write: {_STORE_URL}"),
        imported.add_argument("--config", help=_CONFIG_HELP + ", instead of --to"),
        imported.add_argument("--cluster", action="store_true", help=_CLUSTER_HELP),
        imported.add_argument("--replace", action="store_true", help=_REPLACE_HELP),
    )
    return Command("memory import", summary, parser=imported, arguments=arguments)


def _memory_migrate(add_action: AddParser) -> Command:
    summary = "copy every conversation of one store into another (export piped into import, no file)"
    migrate = add_action("migrate", help=summary, description=f"{summary[0].upper()}{summary[1:]}.")
    arguments = (
        migrate.add_argument("--from", dest="source", metavar="URL", help=f"the store to read: {_STORE_URL}"),
        migrate.add_argument("--config", help=_CONFIG_HELP + ", instead of --from"),
        migrate.add_argument("--cluster", action="store_true", help="the --from Redis URL is any node of a Redis Cluster"),
        migrate.add_argument("--to", required=True, metavar="URL", help=f"the store to write: {_STORE_URL}"),
        migrate.add_argument("--to-cluster", action="store_true", help="the --to Redis URL is any node of a Redis Cluster"),
        migrate.add_argument("--replace", action="store_true", help=_REPLACE_HELP),
        *_resumable(migrate),
    )
    return Command("memory migrate", summary, parser=migrate, arguments=arguments)
