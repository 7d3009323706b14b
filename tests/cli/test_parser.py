"""The command line's parser (gateway.cli.parser): every command, each argument kept as argparse made it."""

from __future__ import annotations

import pytest

from gateway.cli.parser import build_parser, command_line

REQUIRED = {
    "serve": [],
    "check-config": [],
    "schema": [],
    "init": ["--provider", "mock"],
    "settle-memory": ["m.db"],
    "memory export": [],
    "memory import": [],
    "memory migrate": ["--to", "sqlite:m.db"],
}


def test_every_command_the_parser_takes_is_listed_with_its_own_parser() -> None:
    line = command_line()
    assert [command.name for command in line.commands] == list(REQUIRED)
    for command in line.commands:
        args = line.parser.parse_args([*command.name.split(), *REQUIRED[command.name]])
        assert " ".join([args.command, *([args.action] if args.command == "memory" else [])]) == command.name
        assert command.parser.prog == f"gateway {command.name}"


@pytest.mark.parametrize("name", list(REQUIRED))
def test_a_commands_kept_arguments_are_every_argument_it_parses(name: str) -> None:
    command = next(command for command in command_line().commands if command.name == name)
    parsed = vars(command.parser.parse_args(REQUIRED[name]))
    assert {action.dest for action in command.arguments} == set(parsed)


def test_init_takes_a_path_a_provider_and_a_memory_store() -> None:
    args = build_parser().parse_args(["init", "here.yaml", "--provider", "vllm", "--memory", "redis"])
    assert (args.path, args.provider, args.memory) == ("here.yaml", "vllm", "redis")
    args = build_parser().parse_args(["init", "--provider", "ollama"])
    assert (args.path, args.memory) == ("gateway.yaml", "sqlite")


def test_the_programs_own_options_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    line = command_line()
    assert [action.option_strings for action in line.options] == [["--version"]]
    with pytest.raises(SystemExit):
        line.parser.parse_args(["--version"])
    assert capsys.readouterr().out.startswith("gateway ")


def test_memory_migrate_names_both_stores_and_how_far_to_go() -> None:
    args = build_parser().parse_args(
        ["memory", "migrate", "--from", "sqlite:a.db", "--to", "redis://h:6379/0", "--to-cluster", "--limit", "5", "--after", "t:c"]
    )
    assert (args.source, args.to, args.to_cluster, args.cluster, args.limit, args.after) == (
        "sqlite:a.db", "redis://h:6379/0", True, False, 5, "t:c"
    )
    assert (args.replace, args.progress) == (False, None)
