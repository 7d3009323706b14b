"""Which processes hold a byte of a file locked, from /proc (Linux): the kernel names no holder of an OFD lock elsewhere."""

from __future__ import annotations

import os
from pathlib import Path


def lock_holders(path: Path, offset: int) -> list[int]:
    """The pids of the processes with `path` open whose open file holds a lock on byte `offset` of it.

    /proc/locks and F_OFD_GETLK give an OFD lock's pid as -1; each descriptor's fdinfo lists the
    locks of its open file.
    """
    target = os.path.realpath(path)
    holders = set()
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            descriptors = list((process / "fd").iterdir())
        except OSError:  # gone, or not ours to read
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor) != target:
                    continue
                info = (process / "fdinfo" / descriptor.name).read_text()
            except OSError:
                continue
            if any(_covers(line, offset) for line in info.splitlines() if line.startswith("lock:")):
                holders.add(int(process.name))
    return sorted(holders)


def _covers(line: str, offset: int) -> bool:
    """Whether a fdinfo `lock:` line (`lock: 1: OFDLCK ADVISORY WRITE -1 dev:ino start end`) covers `offset`."""
    fields = line.split()
    start, end = fields[-2], fields[-1]
    return int(start) <= offset and (end == "EOF" or offset <= int(end))
