"""CPU time of process trees and listening sockets, read from /proc (Linux): bench/memory_cpu.py's probes.

CPU is the on-CPU time of each thread (`/proc/PID/task/TID/schedstat`, nanoseconds): finer than
`/proc/PID/stat`'s clock ticks (10 ms), which a run of a few seconds would round by a few per cent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path


def descendants(root: int) -> list[int]:
    """`root` and every live process under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended while we looked
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cpu_ns(pids: Sequence[int]) -> dict[tuple[int, int], int]:
    """On-CPU nanoseconds of every thread of `pids`, by (pid, tid)."""
    times = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    times[pid, int(task.name)] = int((task / "schedstat").read_text().split()[0])
    return times


def busy_ns(cpu: int) -> int:
    """Nanoseconds CPU `cpu` has not been idle since boot, whoever ran (/proc/stat, in clock ticks)."""
    with open("/proc/stat") as stat:
        for line in stat:
            name, *ticks = line.split()
            if name == f"cpu{cpu}":
                idle, iowait = int(ticks[3]), int(ticks[4])
                return (sum(map(int, ticks[:8])) - idle - iowait) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    raise ValueError(f"no cpu{cpu} in /proc/stat")


def spent(before: Mapping[tuple[int, int], int], after: Mapping[tuple[int, int], int]) -> int:
    """Nanoseconds spent between two cpu_ns readings; a thread that ended in between is an error."""
    if gone := before.keys() - after.keys():
        raise SystemExit(f"threads {sorted(gone)} ended between two readings: their time is lost")
    return sum(after[key] - before.get(key, 0) for key in after)


def listening(port: int) -> int:
    """Sockets listening on 127.0.0.1:`port` (a `--workers` server has one per worker)."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        return sum(1 for line in table if line.split()[1:2] == [wanted] and line.split()[3] == "0A")
