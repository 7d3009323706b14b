"""The table of a CPU benchmark's run (bench/cpu_runs.py): its setups, its readings, the order they run in.

Pure: tested without running anything (tests/test_bench_memory_cpu.py, tests/test_bench_limits_cpu.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BASELINE = "off"  # the setup every other one is compared with


@dataclass(frozen=True, slots=True)
class Setup:
    """One server to measure: its config, its processes, and whether requests carry a memoryId."""

    name: str
    label: str
    config: str
    workers: int
    memory: bool = False


@dataclass(frozen=True, slots=True)
class Reading:
    """One measured segment of one setup."""

    round: int
    setup: str
    gateway_ns: int
    redis_ns: int
    redis_commands: int
    turns: int
    wall_ns: int  # of send.py's run, its own start included
    neighbours_ns: int = 0  # what else ran on the gateway's CPU meanwhile (only when pinned)


@dataclass(frozen=True, slots=True)
class Words:
    """What a benchmark's table calls its request, its baseline and its last column."""

    request: str  # "turn"
    baseline: str  # "memory off"
    note: str  # "history forwarded"


def run_order(names: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, setup) of every segment in turn: the setups forward in even rounds, backward in odd ones."""
    order: list[tuple[int, str]] = []
    for index in range(rounds):
        order += [(index, name) for name in (names if index % 2 == 0 else reversed(names))]
    return order


def render(
    readings: Sequence[Reading], setups: Sequence[Setup], notes: Mapping[str, object], *, words: Words
) -> str:
    """The markdown table: per setup the median of its segments' CPU per request (their range), and its ratio to `off`.

    Medians, not totals over all segments: a neighbour's burst of load that lands on one segment
    raises that segment's figure alone. The ratio is the median over rounds of the setup's
    segment against `off`'s in the same round, seconds apart: a drift cancels out. `notes`: the
    last column, by setup.
    """

    def per_turn(runs: Sequence[Reading], field: str) -> list[float]:
        return [getattr(r, field) / r.turns / 1000 for r in runs]

    by_setup = {s.name: [r for r in readings if r.setup == s.name] for s in setups}
    off = {r.round: r.gateway_ns / r.turns for r in by_setup.get(BASELINE, [])}
    lines = [
        f"| setup | gateway CPU per {words.request}: median (range) | \N{MULTIPLICATION SIGN} {words.baseline} "
        f"| neighbours on its CPU | redis-server CPU per {words.request} | Redis commands per {words.request} | {words.note} |",
        "|---|---|---|---|---|---|---|",
    ]
    for setup in setups:
        if not (runs := by_setup[setup.name]):
            continue
        segments = per_turn(runs, "gateway_ns")
        gateway = statistics.median(segments)
        spread = f"{min(segments):,.0f}\N{EN DASH}{max(segments):,.0f}"
        ratios = [r.gateway_ns / r.turns / off[r.round] for r in runs if r.round in off]
        ratio = f"{statistics.median(ratios):.2f}" if ratios else ""
        redis_us = statistics.median(per_turn(runs, "redis_ns"))
        neighbours = statistics.median(max(r.neighbours_ns, 0) / r.wall_ns for r in runs)
        commands = sum(r.redis_commands for r in runs) / sum(r.turns for r in runs)
        lines.append(
            f"| {setup.label} | {gateway:,.0f} µs ({spread}) | {ratio} | {neighbours:.0%} | {redis_us:,.0f} µs | {commands:.1f} "
            f"| {notes.get(setup.name, '')} |"
        )
    return "\n".join(lines)
