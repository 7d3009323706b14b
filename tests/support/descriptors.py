"""Real file-descriptor exhaustion in this process: what `ulimit -n` and a crowd of streams do to a gateway.

The soft RLIMIT_NOFILE is lowered to just above the highest descriptor open now, and every
descriptor below it taken (on /dev/null), so the next socket() or open() of anyone in the
process fails with EMFILE, from the kernel. On exit the descriptors are closed and the limit
put back. Connections open before (a client's keep-alive connection to the gateway) go on
working: only new descriptors are refused.
"""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

HEADROOM = 64  # descriptors above the highest open one: taken too, so the fill is quick


@contextmanager
def exhausted_descriptors() -> Iterator[list[int]]:
    """Take every descriptor this process may still open; the taken ones are yielded."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(highest + HEADROOM, hard), hard))
    taken: list[int] = []
    try:
        while True:
            try:
                taken.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as exc:
                if exc.errno != errno.EMFILE:
                    raise
                break
        yield taken
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
