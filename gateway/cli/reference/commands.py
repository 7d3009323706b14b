"""The CLI reference: every command and flag, read from the parser `gateway` runs (gateway.cli.parser)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from gateway.cli.parser import CommandLine, command_line
from gateway.cli.reference.markdown import GENERATED, cell, code, require_descriptions, table


def spelling(action: argparse.Action) -> str:
    """How an argument is written: its flags with their value (`--port PORT`), or its positional name."""
    if not action.option_strings:
        name = str(action.metavar or action.dest).upper()
        return f"[{name}]" if action.nargs == "?" else name
    if action.nargs == 0:  # a flag taking no value (--version)
        return ", ".join(action.option_strings)
    value = str(action.metavar or action.dest).upper()
    return ", ".join(f"{flag} {value}" for flag in action.option_strings)


def accepted(action: argparse.Action) -> str:
    """What values an argument takes and its default, in words."""
    parts = []
    if action.choices is not None:
        parts.append("one of " + ", ".join(map(str, action.choices)))
    elif action.type in (int, float):
        parts.append("an integer" if action.type is int else "a number")
    if action.required and action.option_strings:
        parts.append("required")
    if action.default not in (None, argparse.SUPPRESS) and "default" not in (action.help or ""):
        parts.append(f"default {action.default}")
    return "; ".join(parts)


def usage(name: str, arguments: tuple[argparse.Action, ...]) -> str:
    """A command's synopsis, optional arguments in brackets (argparse's own wraps at the terminal's width)."""
    words = [f"gateway {name}"]
    for action in arguments:
        written = spelling(action)
        optional = action.option_strings and not action.required
        words.append(f"[{written}]" if optional else written)
    return " ".join(words)


def undescribed(line: CommandLine) -> Iterator[tuple[str, str | None]]:
    """Every command and argument with its help text (empty when it has none)."""
    for action in line.options:
        yield f"gateway {spelling(action)}", action.help
    for command in line.commands:
        yield f"gateway {command.name}", command.help
        for action in command.arguments:
            yield f"gateway {command.name} {spelling(action)}", action.help


def cli_page() -> str:
    """The Markdown of reference/cli.md; Undescribed when a command or argument has no help."""
    line = command_line()
    require_descriptions(undescribed(line))
    parts = [
        GENERATED,
        "# Command line reference",
        "Every command of `gateway`, read from its argument parser. Each takes `-h` / `--help`.",
        table(("option", "meaning"), ([code(spelling(action)), cell(action.help or "")] for action in line.options)),
    ]
    for command in line.commands:
        parts.append(f"## `gateway {command.name}`\n\n{cell(command.parser.description or command.help)}")
        parts.append(f"```\n{usage(command.name, command.arguments)}\n```")
        if command.arguments:
            rows = ([code(spelling(action)), cell(action.help or ""), cell(accepted(action))] for action in command.arguments)
            parts.append(table(("argument", "meaning", "values"), rows))
    return "\n\n".join(parts) + "\n"
