"""Files made read-only for real, even for root, whose permission bits would not stop it: `chattr +i`.

An immutable file refuses writes through handles opened before too, as a file system remounted
read-only does. Where that cannot be done (not root, or a file system without the flag) a test
skips, saying why; under CI=true it fails instead, as CI must run it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _cannot(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI runs the read-only tests, but {reason}")
    pytest.skip(reason)


def _chattr(flag: str, paths: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, text=True, check=False)


class Immutable:
    """Files made immutable until `lift()` (at the latest when the `immutable` block ends)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.lifted = False

    def lift(self) -> None:
        if not self.lifted:
            _chattr("-i", self.paths).check_returncode()
            self.lifted = True


@contextmanager
def immutable(*paths: Path) -> Iterator[Immutable]:
    """Make `paths` read-only for everyone (root too) within the block; `lift()` makes them writable again earlier."""
    if os.geteuid() != 0:
        _cannot("making a file read-only for an open handle takes chattr +i, which needs root")
    if shutil.which("chattr") is None:
        _cannot("chattr is not installed (e2fsprogs)")
    files = list(paths)
    made = _chattr("+i", files)
    if made.returncode != 0:
        _chattr("-i", files)  # some may have taken the flag before one failed
        _cannot(f"the file system refuses chattr +i: {made.stderr.strip()}")
    state = Immutable(files)
    try:
        yield state
    finally:
        state.lift()
