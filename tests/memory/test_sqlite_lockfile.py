"""The lock file beside a shared SQLite file: bytes locked per open file, version slots, its mode, in real processes."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.memory.sqlite_lockfile import SIZE, SLOTS, LockFile, lock_path, open_lock_file, place

KEY = ("team-a", "chat-1")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    sqlite3.connect(path).close()
    return path


@pytest.fixture
def files(database: Path) -> Iterator[tuple[LockFile, LockFile]]:
    """The lock file opened twice, as two processes (or two stores of one process) open it."""
    one, two = open_lock_file(str(database)), open_lock_file(str(database))
    yield one, two
    one.close()
    two.close()


def test_a_place_is_the_same_in_every_process() -> None:
    """Python's own str hash differs from process to process (PYTHONHASHSEED); the place must not."""
    script = "from gateway.memory.sqlite_lockfile import place; print(tuple(place(('team-a', 'chat-1'))))"
    seen = {
        subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True).stdout
        for seed in ("1", "2")
    }
    assert seen == {f"{tuple(place(KEY))}\n"}
    assert 1 << 62 <= place(KEY).offset < 1 << 63 and 0 <= place(KEY).slot < SLOTS


def test_keys_that_read_alike_joined_have_places_apart() -> None:
    assert place(("a:b", "c")) != place(("a", "b:c"))


def test_a_byte_one_open_file_holds_is_refused_to_another_until_let_go(files: tuple[LockFile, LockFile]) -> None:
    one, two = files
    where, other = place(KEY), place(("team-a", "chat-2"))
    assert one.lock(where)
    assert not two.lock(where)
    assert two.lock(other)  # another conversation's byte is free
    one.unlock(where)
    assert two.lock(where)


def test_a_byte_held_twice_by_one_open_file_is_let_go_with_the_last_hold(files: tuple[LockFile, LockFile]) -> None:
    """A turn let go whose write is not done, and the next turn of the same process; or two colliding conversations."""
    one, two = files
    where = place(KEY)
    assert one.lock(where) and one.lock(where)
    one.unlock(where)
    assert not two.lock(where)
    one.unlock(where)
    assert two.lock(where)


def test_a_stamp_puts_a_fresh_version_that_the_other_open_file_sees(files: tuple[LockFile, LockFile]) -> None:
    one, two = files
    slot = place(KEY).slot
    seen, version = one.stamp(slot)
    assert seen == 0 and version != 0 and two.slots[slot] == version
    again, newer = two.stamp(slot)
    assert again == version and newer not in (0, version) and one.slots[slot] == newer


@pytest.mark.parametrize("mode", [0o600, 0o664])
def test_the_lock_file_gets_the_databases_mode_whatever_the_umask(database: Path, mode: int) -> None:
    database.chmod(mode)
    umask = os.umask(0o077)
    try:
        lock_file = open_lock_file(str(database))
    finally:
        os.umask(umask)
    lock_file.close()
    found = os.stat(lock_path(str(database)))
    assert stat.S_IMODE(found.st_mode) == mode and found.st_size == SIZE


def test_an_existing_lock_file_keeps_its_mode_and_slots(database: Path) -> None:
    first = open_lock_file(str(database))
    first.stamp(5)
    version = first.slots[5]
    first.close()
    os.chmod(lock_path(str(database)), 0o640)
    again = open_lock_file(str(database))
    assert again.slots[5] == version
    again.close()
    assert stat.S_IMODE(os.stat(lock_path(str(database))).st_mode) == 0o640


def test_a_retired_file_closes_with_its_last_hold(files: tuple[LockFile, LockFile]) -> None:
    one, two = files
    where = place(KEY)
    assert one.lock(where)
    one.retire()
    assert not two.lock(where)  # still open, still held
    one.unlock(where)
    assert two.lock(where)
    with pytest.raises(ValueError):  # its slots are unmapped
        one.slots[0]


# Takes KEY's byte of argv[1]'s lock file by POSIX record locks (no OFD), says so, and waits for stdin to close.
_POSIX_HOLDER = textwrap.dedent(
    """
    import sys
    from gateway.memory.sqlite_lockfile import open_lock_file, place
    lock_file = open_lock_file(sys.argv[1], ofd=False)
    print("held" if lock_file.lock(place(("team-a", "chat-1"))) else "busy", flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.parametrize("ofd", [True, False], ids=["ofd", "posix"])
def test_without_ofd_locks_posix_record_locks_exclude_other_processes(database: Path, ofd: bool) -> None:
    """Where the kernel has no OFD locks (not Linux): the same between processes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _POSIX_HOLDER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == "held\n"
        here = open_lock_file(str(database), ofd=ofd)
        assert not here.lock(place(KEY))
        holder.stdin.close()
        holder.wait()
        assert here.lock(place(KEY))  # the holder ended: the kernel let go
        here.unlock(place(KEY))
        here.close()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
