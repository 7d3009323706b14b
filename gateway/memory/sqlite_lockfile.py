"""The lock file beside a SQLite file that processes share: a byte to lock per conversation, and version slots.

Worker processes sharing one database (`serve --workers N`) keep `<db>-locks` beside it, which
holds two things, both written without a transaction or a hop to the store's thread:

- A conversation's lock: an open-file-description lock (Linux's F_OFD_SETLK, one non-blocking
  system call) on one byte of the file, at an offset from a stable hash of its key (`place`),
  in [2^62, 2^63): past the end of the file, which is allowed. An OFD lock belongs to the
  descriptor's open file, not to the process, so the lock of one `open` never goes because
  another descriptor of the file was closed (what POSIX record locks do), and two stores of one
  process exclude each other as two processes do. The kernel drops a process's locks the moment
  it dies, SIGKILL included, so a dead holder's conversations are free at once. Two
  conversations whose offsets collide (about one pair in 2^62) only wait for each other; this
  process counts its holds of a byte (`LockFile.lock`), so the byte is let go only once neither
  holds it.
- Version slots: the file's first SLOTS * 8 bytes, mapped into each process (`slots`), a 64-bit
  value per slot, slot = hash of the key mod SLOTS. A process writing a conversation puts a fresh
  random value in its slot before the write (`stamp`) and records it; while the slot still
  holds the value a process recorded for a conversation, no other process wrote it since. Random
  values, not counters: two processes' read-modify-write of a shared counter could race and
  bring an old value back. Conversations sharing a slot only cost each other a read of the file.
- Change slots: the next SLOTS * 8 bytes (`changes`), alike, but given a fresh value only by a
  change that is not an append of messages (`mark_changed`: an undo, a redo, a delete, a new
  system prompt...). While a conversation's change slot holds what a process recorded with its
  copy, every write since only appended messages after it, so the process reads just those
  (see sqlite_moved). A gateway from before change slots does not mark them: processes sharing
  a file must all run one version.

Where the kernel has no OFD locks (not Linux), POSIX record locks (`fcntl.lockf`) stand in:
the same here, since a process opens the file once and never closes another descriptor of it,
except that two stores of one process then do not exclude each other.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import mmap
import os
import random
import struct
from typing import Final, NamedTuple

from gateway.memory.store import Key

SLOTS: Final = 1 << 16  # 512 KiB of slots: a write of another conversation re-reads this one's about once in 65,536
SIZE: Final = 2 * SLOTS * 8  # the version slots, then the change slots
_FIRST_BYTE: Final = 1 << 62
_OFD_SETLK: Final[int | None] = getattr(fcntl, "F_OFD_SETLK", None)
# Linux's struct flock on 64-bit: l_type, l_whence, l_start, l_len, l_pid (0, as OFD locks require), padded to 32 bytes
_FLOCK: Final = struct.Struct("@hhqqi4x")
_BUSY: Final = frozenset({errno.EAGAIN, errno.EACCES})  # another open file holds the byte


class Place(NamedTuple):
    """Where a conversation is in the lock file: the byte its lock is on, and its version slot."""

    offset: int
    slot: int


def place(key: Key) -> Place:
    """The conversation's byte and slot: from a hash that every process computes alike (Python's `hash` of a str is not)."""
    tenant, memory_id = key
    digest = hashlib.blake2b(f"{len(tenant)}:{tenant}:{memory_id}".encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return Place(_FIRST_BYTE + (value >> 2), value % SLOTS)


def fresh_version() -> int:
    """A random 64-bit version, never 0 (a slot nobody wrote).

    The random module's own generator: reseeded in a forked child, seeded apart in a spawned one.
    """
    return random.getrandbits(64) or 1


class LockFile:
    """The open lock file of one process (see the module docstring); used on the event loop, but `stamp`.

    `inode` is the file opened, to tell whether the one at its path is still it.
    """

    def __init__(self, fd: int, *, inode: tuple[int, int], ofd: bool = True) -> None:
        self._fd = fd
        self.inode = inode
        self._ofd_setlk = _OFD_SETLK if ofd else None  # None: POSIX record locks (see the module docstring)
        self._map = mmap.mmap(fd, SIZE)
        every = memoryview(self._map).cast("Q")  # native 64-bit integers, each written by one aligned store
        self.slots = every[:SLOTS]
        self.changes = every[SLOTS:]
        every.release()
        self._holds: dict[int, int] = {}  # byte -> this process's holds of it
        self.retired = False  # replaced at its path: closed once its last lock is let go

    def lock(self, where: Place) -> bool:
        """Take the byte of `where` without waiting; False while another open file of it holds it.

        A byte this process holds already (a turn let go whose write is not yet done, or a
        colliding conversation) is held once more, without a system call.
        """
        offset = where.offset
        holds = self._holds
        if offset in holds:
            holds[offset] += 1
            return True
        try:
            self._set(fcntl.F_WRLCK, offset)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        holds[offset] = 1
        return True

    def unlock(self, where: Place) -> None:
        """Let go of one hold of the byte of `where`; the byte itself once this process holds it no more."""
        offset = where.offset
        holds = self._holds
        left = holds[offset] - 1
        if left:
            holds[offset] = left
            return
        del holds[offset]
        self._set(fcntl.F_UNLCK, offset)
        if self.retired and not holds:
            self.close()

    def _set(self, kind: int, offset: int) -> None:
        if self._ofd_setlk is not None:
            flock = (kind, os.SEEK_SET, offset, 1, 0)  # l_type, l_whence, l_start, l_len (one byte), l_pid
            fcntl.fcntl(self._fd, self._ofd_setlk, _FLOCK.pack(*flock))
        else:
            fcntl.lockf(self._fd, fcntl.LOCK_UN if kind == fcntl.F_UNLCK else fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)

    def stamp(self, slot: int) -> tuple[int, int]:
        """Put a fresh version in `slot` before a write of a conversation there: (the version it held, the new one).

        Called on the store's thread, just before the write's statements: a crash in between
        only makes the other processes read the conversation again.
        """
        slots = self.slots
        seen = slots[slot]
        version = slots[slot] = fresh_version()
        return seen, version

    def mark_changed(self, slot: int) -> int:
        """Put a fresh value in change slot `slot` before a change that is not an append (on the store's thread); the value."""
        change = self.changes[slot] = fresh_version()
        return change

    def retire(self) -> None:
        """Another file is at the path now: close this one once its last lock is let go."""
        self.retired = True
        if not self._holds:
            self.close()

    def close(self) -> None:
        """Unmap and close the file; the kernel lets go of every byte still held."""
        if self._fd < 0:
            return
        self.slots.release()
        self.changes.release()
        self._map.close()
        os.close(self._fd)
        self._fd = -1
        self._holds.clear()


def lock_path(database: str) -> str:
    return database + "-locks"


def open_lock_file(database: str, *, ofd: bool = True) -> LockFile:
    """Open (or make) the lock file beside `database`, which must exist: a new one gets its mode, and its owner under root.

    As SQLite does for the WAL and shared-memory files beside a database, whatever the umask.
    """
    path = lock_path(database)
    owner = os.stat(database)
    mode = owner.st_mode & 0o777
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        found = os.fstat(fd)
        if found.st_size == 0:  # made just now (or by another process opening it at the same time)
            if found.st_mode & 0o777 != mode:
                os.fchmod(fd, mode)
            if os.geteuid() == 0 and (found.st_uid, found.st_gid) != (owner.st_uid, owner.st_gid):
                os.fchown(fd, owner.st_uid, owner.st_gid)
        if found.st_size < SIZE:  # never shrunk: a process with the file mapped would fault on the lost pages
            os.ftruncate(fd, SIZE)
        return LockFile(fd, inode=(found.st_dev, found.st_ino), ofd=ofd)
    except BaseException:
        os.close(fd)
        raise
