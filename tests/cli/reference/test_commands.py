"""The CLI reference (gateway.cli.reference.commands): every command and argument from the parser, with its help."""

from __future__ import annotations

import argparse

import pytest

from gateway.cli.parser import Command, CommandLine, command_line
from gateway.cli.reference import commands
from gateway.cli.reference.commands import accepted, cli_page, spelling, undescribed, usage
from gateway.cli.reference.markdown import Undescribed


def test_every_command_and_argument_has_help() -> None:
    assert [name for name, text in undescribed(command_line()) if not text] == []


def test_an_argument_without_help_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser(prog="gateway")
    sub = parser.add_subparsers().add_parser("serve", help="run it")
    bare = sub.add_argument("--port", type=int)
    line = CommandLine(parser, (), (Command("serve", "run it", parser=sub, arguments=(bare,)),))
    assert [name for name, text in undescribed(line) if not text] == ["gateway serve --port PORT"]
    monkeypatch.setattr(commands, "command_line", lambda: line)
    with pytest.raises(Undescribed, match="gateway serve --port PORT"):
        cli_page()


def test_arguments_are_written_as_typed() -> None:
    serve, check, *_ = command_line().commands
    by_dest = {action.dest: action for action in serve.arguments}
    assert spelling(by_dest["access_log_flush"]) == "--access-log-flush SECONDS"
    assert spelling(check.arguments[0]) == "[PATH]"
    assert accepted(by_dest["log_format"]) == "one of json, text"
    assert accepted(by_dest["workers"]) == "an integer; default 1"
    assert usage("check-config", check.arguments) == "gateway check-config [PATH]"


def test_the_page_lists_every_command_and_flag() -> None:
    page = cli_page()
    line = command_line()
    for command in line.commands:
        assert f"## `gateway {command.name}`" in page
        for action in command.arguments:
            assert f"| `{spelling(action)}` | {action.help} |" in page
    assert "gateway init [PATH] --provider PROVIDER [--memory MEMORY]" in page
