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
