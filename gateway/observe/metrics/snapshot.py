"""One process's metric values as plain data: what a worker publishes and a scrape merges.

A snapshot keeps each series' values by label values, in three maps by series name: counters'
and gauges' numbers, when each gauge whose workers see the latest value was last changed, and
histograms' bucket counts (one per bucket, not cumulative, and +Inf) with their sum. It is
written with `marshal`: fast and exact for floats (NaN and infinities too), read only from the
private directory that the workers' parent made.
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field

Labels = tuple[str, ...]
Counts = tuple[list[int], float]  # a histogram child's counts per bucket and sum

FORMAT = 1  # written first: a reader skips a snapshot of another format


@dataclass(slots=True)
class Snapshot:
    """Every series' values in one process, by series name, then label values."""

    numbers: dict[str, dict[Labels, float]] = field(default_factory=dict)
    stamps: dict[str, dict[Labels, float]] = field(default_factory=dict)  # when a LATEST gauge's child last changed
    histograms: dict[str, dict[Labels, Counts]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return marshal.dumps((FORMAT, self.numbers, self.stamps, self.histograms))

    @classmethod
    def decode(cls, data: bytes) -> Snapshot | None:
        """The snapshot `encode` wrote; None for bytes that are not one (of this format)."""
        try:
            loaded = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return None
        if not (isinstance(loaded, tuple) and len(loaded) == 4 and loaded[0] == FORMAT):
            return None
        return cls(loaded[1], loaded[2], loaded[3])
