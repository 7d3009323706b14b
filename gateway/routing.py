"""The strategy tree as a generator of attempts: pure, no I/O.

`walk(node, rng)` yields the next Target to call and receives the Outcome of calling it;
its return value is the outcome the whole tree settles on. The dispatcher does the I/O.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import NamedTuple, Protocol

from gateway.config import Fallback, LoadBalance, Node, Single, Target


class Random(Protocol):
    def random(self) -> float: ...


class Outcome(NamedTuple):
    """What one attempt came to. Transport failures carry 502 (connection) or 504 (timeout)."""

    status: int
    transport: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


Walk = Generator[Target, Outcome, Outcome]


def triggers(codes: frozenset[int] | None, outcome: Outcome) -> bool:
    """Whether `outcome` moves a node on to its next target.

    Transport failures always do; otherwise a listed status does, or any non-2xx when the
    node lists none.
    """
    if outcome.ok:
        return False
    if outcome.transport or codes is None:
        return True
    return outcome.status in codes


def pick_weighted(weights: Sequence[float], r: float) -> int:
    """Index chosen in proportion to `weights`, given r in [0, 1); weight 0 is never chosen."""
    total = sum(weights)
    point = r * total
    running = 0.0
    last = -1
    for index, weight in enumerate(weights):
        if weight <= 0:
            continue
        running += weight
        last = index
        if point < running:
            return index
    if last < 0:
        raise ValueError("no positive weight to pick from")
    return last  # r * total rounded up to total


def walk(node: Node, rng: Random) -> Walk:
    """Yield targets to try, in the order the strategy tree prescribes."""
    match node:
        case Target():
            outcome = yield node
            return outcome
        case Single(children=children):
            return (yield from walk(children[0], rng))
        case Fallback(children=children, on_status_codes=codes):
            for child in children:
                outcome = yield from walk(child, rng)
                if not triggers(codes, outcome):
                    break
            return outcome
        case LoadBalance(children=children, on_status_codes=codes):
            remaining = [child for child in children if child.weight > 0]
            while True:
                child = remaining.pop(pick_weighted([c.weight for c in remaining], rng.random()))
                outcome = yield from walk(child, rng)
                if codes is None or not remaining or not triggers(codes, outcome):
                    return outcome
    raise TypeError(f"not a strategy node: {node!r}")
