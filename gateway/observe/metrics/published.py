"""The workers' snapshot files in their shared directory: written whole, read all, a dead worker's set aside.

A worker writes `<pid>.metrics` to a temporary name and renames it over the last, so a reader
opens either the old file or the new one, never half of one. The parent renames a dead worker's
file to `dead-<pid>-<ns>.metrics` (a pid may come back): a scrape still adds its counters, and
leaves out its gauges that only live workers show.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from gateway.observe.metrics.merge import Published
from gateway.observe.metrics.snapshot import Snapshot

SUFFIX = ".metrics"
DEAD = "dead-"
ATTEMPTS = 3  # listings to read a directory in which the parent renamed a dead worker's file meanwhile


def live_file(folder: Path, pid: int) -> Path:
    return folder / f"{pid}{SUFFIX}"


def publish(folder: Path, pid: int, snapshot: Snapshot) -> None:
    """Replace the file of worker `pid` with `snapshot`, in one rename."""
    temporary = folder / f"{pid}.tmp"
    temporary.write_bytes(snapshot.encode())
    os.replace(temporary, live_file(folder, pid))


def read_published(folder: Path, *, skip: str = "") -> list[Published]:
    """Every worker's snapshot in `folder`, live and dead, by file name; `skip` names one not to read (the reader's own)."""
    published, vanished = _read(folder, skip)
    for _ in range(ATTEMPTS - 1):
        if not vanished:
            break
        published, vanished = _read(folder, skip)
    return published


def _read(folder: Path, skip: str) -> tuple[list[Published], bool]:
    """The snapshots of one listing of `folder`, and whether a file listed was gone when opened."""
    published: list[Published] = []
    vanished = False
    for name in sorted(os.listdir(folder)):
        if not name.endswith(SUFFIX) or name == skip:
            continue
        try:
            data = (folder / name).read_bytes()
        except FileNotFoundError:  # renamed dead since the listing: the next listing has its new name
            vanished = True
            continue
        snapshot = Snapshot.decode(data)
        if snapshot is not None:
            published.append(Published(snapshot, live=not name.startswith(DEAD)))
    return published, vanished


def mark_dead(folder: Path, pid: int) -> None:
    """Set the file of the dead worker `pid` aside under a name of its own; drop a temporary file it left."""
    with contextlib.suppress(FileNotFoundError):  # it died before its first snapshot
        os.replace(live_file(folder, pid), folder / f"{DEAD}{pid}-{time.time_ns()}{SUFFIX}")
    (folder / f"{pid}.tmp").unlink(missing_ok=True)
