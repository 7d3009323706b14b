"""The Dockerfile read as the deployment tests need it: its instructions, by stage, in force."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parent.parent.parent / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, ...
    args: str  # continuation lines joined
    stage: int  # 0-based index of the FROM it belongs to


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped (no parser directives used)."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):  # Docker drops comments inside continuations too
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, args = (pending + stripped).partition(" ")
        pending = ""
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(keyword.upper(), args.strip(), stage))
    return instructions


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form CMD/HEALTHCHECK CMD; a shell-form string fails the test."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def healthcheck_command(instructions: list[Instruction]) -> list[str]:
    (check,) = [i for i in final_stage(instructions) if i.keyword == "HEALTHCHECK"]
    options, _, command = check.args.partition("CMD ")
    assert all(option.startswith("--") for option in options.split()), check.args
    return exec_form(command)


def in_force(instructions: list[Instruction], keyword: str) -> Instruction:
    found = [i for i in final_stage(instructions) if i.keyword == keyword]
    assert found, f"the final stage has no {keyword}"
    return found[-1]  # the last one is the one in force
