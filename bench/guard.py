"""Fail when a guarded path's instructions per request grow more than 5 % over bench/baseline.json.

    python bench/guard.py            measure and compare; exit 1 on a regression
    python bench/guard.py --update   measure and rewrite bench/baseline.json

The paths are a chat request (`gateway`), a 2-chunk stream (`gateway-stream`), the chat request of a
key held to every limit a key can have, counted in the process (`gateway-limits`) and on a
redis-server the run starts (`gateway-limits-redis`), and a memory turn
(token_window over a ~20-message history) on SQLite (`gateway-memory`) and on a redis-server the
run starts (`gateway-memory-redis`: the gateway's instructions, not redis-server's), counted
under callgrind by `bench/instructions.sh guard` (auth, metrics and the access log on). Counts are nearly
deterministic, but a loaded machine splits the upstream's bytes into more reads and they rise a
little: a path over the limit is measured once more and the lower figure kept.

Updating the baseline is a deliberate, reviewed change: run `--update` on a quiet machine after
the change that moves the figures, and commit bench/baseline.json on its own, saying which
change moved which path and by how much. Counts also depend on the Python build and the valgrind
version: the baseline records both, and the guard warns when this machine's differ.

A path bench/baseline.json has no figure for is measured and shown, and fails the guard by name
until the baseline has it. Without valgrind, nginx with the echo module or redis-server, the
guard skips with a message; under CI=true it fails instead (`.ci/run` installs them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
BASELINE: Final = HERE / "baseline.json"
PATHS: Final = (
    "gateway", "gateway-stream", "gateway-limits", "gateway-limits-redis", "gateway-memory", "gateway-memory-redis"
)
REQUESTS: Final = 500  # ~85 s for the six paths here; the 200-request warm-up stays
CONNS: Final = 8
LIMIT: Final = 0.05
TOOLS: Final = ("valgrind", "callgrind_control", "nginx", "curl", "flock", "redis-server")
PACKAGES: Final = "valgrind nginx-light libnginx-mod-http-echo curl redis-server"


@dataclass(frozen=True, slots=True)
class Row:
    """One path's figures: the baseline's (None when it has none yet) and this run's instructions per request."""

    path: str
    baseline: int | None
    now: int

    @property
    def change(self) -> float:
        return self.now / self.baseline - 1 if self.baseline else 0.0

    @property
    def over(self) -> bool:
        # not change > LIMIT: 1.05M / 1M - 1 is 0.0500...04
        return self.baseline is not None and self.now > self.baseline * (1 + LIMIT)


@dataclass(frozen=True, slots=True)
class Baseline:
    """bench/baseline.json: the committed counts and what they were taken with."""

    counts: Mapping[str, int]
    requests: int
    environment: Mapping[str, str]


def compare(baseline: Mapping[str, int], now: Mapping[str, int]) -> list[Row]:
    """One row per guarded path, in PATHS order."""
    return [Row(path, baseline.get(path), now[path]) for path in PATHS]


def render(rows: Sequence[Row], *, remeasured: frozenset[str] = frozenset()) -> str:
    """The comparison as a plain-text table."""
    lines = [f"{'path':<20} {'baseline':>11} {'now':>11} {'change':>8}"]
    for row in rows:
        if row.baseline is None:
            lines.append(f"{row.path:<20} {'-':>11} {row.now:>11,} {'-':>8}  NO BASELINE")
            continue
        verdict = f"OVER the +{LIMIT:.0%} limit" if row.over else "ok"
        if row.path in remeasured:
            verdict += " (lower of two runs)"
        lines.append(f"{row.path:<20} {row.baseline:>11,} {row.now:>11,} {row.change:>+8.1%}  {verdict}")
    return "\n".join(lines)


def missing_tools() -> list[str]:
    """What instructions.sh needs and this machine lacks."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    conf = (HERE / "upstream.nginx.conf").read_text(encoding="utf-8")
    module = re.search(r"^load_module\s+(\S+);", conf, re.MULTILINE)
    if module is not None and not Path(module.group(1)).exists():
        missing.append(f"nginx's echo module ({module.group(1)})")
    return missing


def environment() -> dict[str, str]:
    """What besides the code moves the counts: the Python build and valgrind."""
    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "valgrind": valgrind.stdout.strip(),
        "machine": platform.machine(),
    }


def measure(paths: Sequence[str]) -> dict[str, int]:
    """Instructions per request of `paths`, from one run of instructions.sh."""
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {
            **os.environ,
            "PATHS": " ".join(paths),
            "RESULTS": str(results),
            "REQUESTS": str(REQUESTS),
            "CONNS": str(CONNS),
            "PYTHON": sys.executable,
        }
        done = subprocess.run(["bash", str(HERE / "instructions.sh"), "guard"], env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"guard: FAILED: bench/instructions.sh exited with {done.returncode}")
        lines = results.read_text(encoding="utf-8").splitlines() if results.exists() else []
    counts = {entry["path"]: int(entry["instructions_per_request"]) for entry in map(json.loads, lines)}
    if missing := [path for path in paths if path not in counts]:
        raise SystemExit(f"guard: FAILED: bench/instructions.sh measured no {', '.join(missing)}")
    return counts


def read_baseline(path: Path = BASELINE) -> Baseline:
    """The committed baseline; SystemExit with what to do when it is missing or does not fit."""
    if not path.exists():
        raise SystemExit(f"guard: FAILED: no {path.name}: take one with `python bench/guard.py --update`")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    counts = {str(k): int(v) for k, v in data["instructions_per_request"].items()}
    if int(data["requests"]) != REQUESTS:
        raise SystemExit(
            f"guard: FAILED: {path.name} was taken with {data['requests']} requests a path, the guard "
            f"sends {REQUESTS}: re-take it with --update"
        )
    return Baseline(counts, int(data["requests"]), {str(k): str(v) for k, v in data["environment"].items()})


def write_baseline(counts: Mapping[str, int], path: Path = BASELINE) -> None:
    data = {
        "note": "Instructions per request under callgrind (bench/instructions.sh guard), checked by "
        "bench/guard.py within +5 %. Rewrite only with `python bench/guard.py --update`, on a quiet "
        "machine, in its own reviewed commit.",
        "taken": datetime.date.today().isoformat(),
        "requests": REQUESTS,
        "conns": CONNS,
        "environment": environment(),
        "instructions_per_request": {p: counts[p] for p in PATHS},
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def check(baseline: Baseline) -> int:
    """Measure, re-measure the paths over the limit once, print the table; 1 when a path stays over."""
    here = environment()
    for key, value in baseline.environment.items():
        if here.get(key) != value:
            print(f"guard: warning: baseline taken with {key} {value!r}, this machine has {here.get(key)!r}")
    now = measure(PATHS)
    over = [row.path for row in compare(baseline.counts, now) if row.over]
    if over:
        # a loaded machine splits the upstream's bytes into more reads: keep the lower figure
        print(f"guard: {', '.join(over)} over the limit; measuring once more")
        again = measure(over)
        now = {path: min(count, again.get(path, count)) for path, count in now.items()}
    rows = compare(baseline.counts, now)
    print(render(rows, remeasured=frozenset(over)))
    if missing := [row for row in rows if row.baseline is None]:
        figures = ", ".join(f"{row.path} {row.now:,}" for row in missing)
        print(
            f"guard: FAILED: {BASELINE.name} has no figure for {', '.join(row.path for row in missing)} "
            f"(measured now: {figures}). Take one on a quiet machine with `python bench/guard.py --update` "
            f"and commit bench/baseline.json on its own for review."
        )
        return 1
    if any(row.over for row in rows):
        print(
            f"guard: FAILED: instructions per request grew more than {LIMIT:.0%}. If that is intended, "
            "re-take the baseline with `python bench/guard.py --update` and commit bench/baseline.json "
            "on its own for review."
        )
        return 1
    if faster := [row.path for row in rows if row.change < -LIMIT]:
        print(
            f"guard: {', '.join(faster)} faster by more than {LIMIT:.0%}: --update would keep the gain guarded"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--update", action="store_true", help="measure and rewrite bench/baseline.json")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # in order with instructions.sh's lines
    if missing := missing_tools():
        message = f"missing {', '.join(missing)} (apt-get install -y {PACKAGES})"
        if os.environ.get("CI", "").lower() in {"true", "1"}:
            print(f"guard: FAILED under CI: {message}", file=sys.stderr)
            return 1
        print(f"guard: skipped: {message}")
        return 0
    started = time.monotonic()
    if args.update:
        old = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else {}
        now = measure(PATHS)
        write_baseline(now)
        print(render(compare(old.get("instructions_per_request", {}), now)))
        print(f"guard: wrote {BASELINE.name}; commit it on its own for review")
        status = 0
    else:
        status = check(read_baseline())
    print(f"guard: took {time.monotonic() - started:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
