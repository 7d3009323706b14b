"""CPU per memory turn on SQLite and Redis, one process and `--workers 2`, beside memory off, in one run.

    python bench/memory_cpu.py [--turns 3000] [--conns 8] [--rounds 10] [--only off,redis,...] [--tree DIR]

Every setup is a `gateway serve` of its own, all started at once, each with its own store (an
SQLite file, a database of one redis-server). Each gets bench/send.py's load: `--turns`
requests, `--conns` at a time, one conversation a connection (`bench-0` ..), each a token_window
turn (maxTokens 330: 22 messages forwarded) or, memory off, the same request without a memoryId.
The turns are sent in `--rounds` short segments that go through the setups forward, then
backward (ABC CBA ABC ..), so that a neighbour's burst of load or a drift falls on all alike.

Before measuring, each server gets 200 plain requests and 12 turns a conversation (24 messages
stored, checked with GET /v1/memory/bench-0; memory off: a 404); after, a probe turn reads how
many messages went with it (`x-memory-history`) and every conversation must hold the cap of 40.

The setups are run as bench/cpu_runs.py runs them (all at once, pinned, in interleaved
segments; CPU per turn as the median segment, its ratio to memory off within each round). Needs
nginx with the echo module and redis-server. ~1.5 min with the defaults.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence

import cpu_table
from cpu_runs import HEADERS, Bench, Gateway, check, request, run
from cpu_table import Reading, Setup, Words, run_order
from send import WINDOWS, body

__all__ = ["SETUPS", "MemoryBench", "Reading", "main", "render", "run_order"]

MEMORY_WARMUP = 12  # turns a conversation before the measured ones: 24 messages, under the cap
CAP = 40  # maxStoredMessages in memory.yaml and memory-redis.yaml
WORDS = Words(request="turn", baseline="memory off", note="history forwarded")

SETUPS = (
    Setup("off", "memory off (memory.yaml, no memoryId)", "memory.yaml", 1, memory=False),
    Setup("sqlite", "SQLite, one process", "memory.yaml", 1, memory=True),
    Setup("sqlite-w2", "SQLite, --workers 2", "memory.yaml", 2, memory=True),
    Setup("redis", "Redis, one process", "memory-redis.yaml", 1, memory=True),
    Setup("redis-w2", "Redis, --workers 2", "memory-redis.yaml", 2, memory=True),
    Setup("off-w2", "memory off, --workers 2", "memory.yaml", 2, memory=False),
)


def render(readings: Sequence[Reading], setups: Sequence[Setup], history: Mapping[str, int]) -> str:
    """The table of cpu_table.render, per memory turn, with the history each setup's probe turn forwarded."""
    return cpu_table.render(readings, setups, history, words=WORDS)


class MemoryBench(Bench):
    """The run's servers, with memory's checks: turns are stored before and after the measured ones."""

    def stored(self, gateway: Gateway, memory_id: str) -> int | None:
        """Messages stored in a conversation, by GET /v1/memory/{id}; None when there is none."""
        status, _, answer = request(gateway.url(f"/v1/memory/{memory_id}"))
        if status == 404:
            return None
        check(status == 200, f"GET /v1/memory/{memory_id}: {status} {answer[:300]!r}")
        return len(json.loads(answer)["messages"])

    def warm(self, gateway: Gateway) -> None:
        """Plain requests, then (memory on) turns that must be stored; memory off must store nothing."""
        super().warm(gateway)
        if gateway.setup.memory:
            self.send(gateway, MEMORY_WARMUP * self.conns, memory=True)
        held = self.stored(gateway, "bench-0")
        wanted = 2 * MEMORY_WARMUP if gateway.setup.memory else None
        check(
            held == wanted,
            f"{gateway.setup.name}: bench-0 holds {held} messages after the warm-up, not {wanted}",
        )

    def note(self, gateway: Gateway) -> object:
        """Messages forwarded with a probe turn on bench-0 (x-memory-history); every conversation must hold the cap."""
        if not gateway.setup.memory:
            return ""
        headers = {**HEADERS, "memoryId": "bench-0", **WINDOWS["memory"]}
        status, answer_headers, answer = request(
            gateway.url("/v1/chat/completions"),
            method="POST",
            body=body("mock-1", stream=False),
            headers=headers,
        )
        forwarded = answer_headers.get("x-memory-history")
        check(status == 200 and forwarded is not None, f"probe turn: {status} {answer[:300]!r}")
        held = [self.stored(gateway, f"bench-{index}") for index in range(self.conns)]
        check(
            held == [CAP] * self.conns, f"{gateway.setup.name}: conversations hold {held} messages, not {CAP}"
        )
        return int(str(forwarded))


def main(argv: Sequence[str] | None = None) -> int:
    return run(MemoryBench, SETUPS, doc=__doc__ or "", words=WORDS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
