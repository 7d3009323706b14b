"""The strategy tree as a generator of attempts: pure, no I/O.

`walk(node, rng, health)` yields the next step and receives the Outcome of taking it; its return
value is the outcome the whole tree settles on. A step is a Target to call, a Skip (a target whose
circuit is open: no call, it counts as a transport failure) or a Force (every target the route
could use is open: call the one whose cooldown ends first anyway). The dispatcher does the I/O;
`health` says which targets may be called, and is None when every one may.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, Protocol

from gateway.core.tree import DEFAULT_TRIGGER_CODES, Fallback, LoadBalance, Node, Single, Target


class Random(Protocol):
    def random(self) -> float: ...


class Health(Protocol):
    """Which targets the walk may call (their circuit breakers, as the walk sees them)."""

    def available(self, target: Target) -> bool:
        """Closed, or half-open with its one trial not yet taken."""
        ...

    def reopens_at(self, target: Target) -> float:
        """When the target's cooldown ends (on the breakers' clock); any past time if it has."""
        ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt came to. Transport failures carry 502 (connection) or 504 (timeout).

    `skipped`: no call was made, the target's circuit is open. `ok`: a 2xx status, settled when
    made. A slotted class, not a NamedTuple: every attempt reads its fields several times, and a
    slot is read directly where a NamedTuple field goes through a descriptor; `answered` hands
    out one Outcome per plain status, made once.
    """

    status: int
    transport: bool = False
    skipped: bool = False
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", 200 <= self.status < 300)


_ANSWERED: Final = {status: Outcome(status) for status in range(100, 600)}


def answered(status: int) -> Outcome:
    """The Outcome of a call the target answered with `status` (no transport failure, not skipped)."""
    return _ANSWERED.get(status) or Outcome(status)


CIRCUIT_OPEN: Final = Outcome(503, transport=True, skipped=True)


class Skip(NamedTuple):
    """A target passed over without a call: its circuit is open. Send back CIRCUIT_OPEN."""

    target: Target


class Force(NamedTuple):
    """Every target the route could use is open: call this one, whose cooldown ends first."""

    target: Target


Step = Target | Skip | Force
Walk = Generator[Step, Outcome, Outcome]


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


def usable_targets(node: Node) -> Iterator[Target]:
    """The targets a walk of `node` could call: a single's first child, a loadbalance's weighted ones."""
    match node:
        case Target():
            yield node
        case Single(children=children):
            yield from usable_targets(children[0])
        case Fallback(children=children):
            for child in children:
                yield from usable_targets(child)
        case LoadBalance(children=children):
            for child in children:
                if child.weight > 0:
                    yield from usable_targets(child)


def judging_codes(node: Node) -> Iterator[tuple[Target, frozenset[int] | None]]:
    """Every target with the statuses its nearest judging ancestor moves on from (None: any non-2xx).

    A fallback judges its children, and so does a loadbalance with onStatusCodes; a target no node
    judges (a single, a plain loadbalance) is judged by the default trigger codes.
    """
    yield from _judged(node, DEFAULT_TRIGGER_CODES)


def _judged(node: Node, codes: frozenset[int] | None) -> Iterator[tuple[Target, frozenset[int] | None]]:
    if isinstance(node, Target):
        yield node, codes
        return
    if isinstance(node, Fallback) or (isinstance(node, LoadBalance) and node.on_status_codes is not None):
        codes = node.on_status_codes
    for child in node.children:
        yield from _judged(child, codes)


def walk(node: Node, rng: Random, health: Health | None = None) -> Walk:
    """Yield the steps the strategy tree prescribes, skipping targets `health` says are open.

    When no target the route could use is available, the only step is a Force of the one whose
    cooldown ends first. A skip sent back for a Target (its trial was taken meanwhile) counts as
    no call: a walk that called nothing still ends with that Force.
    """
    if health is None:
        return (yield from _walk(node, rng, None))
    if not any(health.available(target) for target in usable_targets(node)):
        return (yield _soonest(node, health))
    steps = _walk(node, rng, health)
    step = next(steps)
    called = False
    while True:
        outcome = yield step
        called = called or not outcome.skipped
        try:
            step = steps.send(outcome)
        except StopIteration as stop:
            settled: Outcome = stop.value
            break
    if called:
        return settled
    return (yield _soonest(node, health))


def _soonest(node: Node, health: Health) -> Force:
    return Force(min(usable_targets(node), key=health.reopens_at))


def _walk(node: Node, rng: Random, health: Health | None) -> Walk:
    match node:
        case Target():
            if health is not None and not health.available(node):
                yield Skip(node)
                return CIRCUIT_OPEN
            outcome = yield node
            return outcome
        case Single(children=children):
            return (yield from _walk(children[0], rng, health))
        case Fallback(children=children, on_status_codes=codes):
            for child in children:
                outcome = yield from _walk(child, rng, health)
                if not triggers(codes, outcome):
                    break
            return outcome
        case LoadBalance(children=children, on_status_codes=codes):
            remaining = [child for child in children if child.weight > 0]
            if health is None:
                while True:
                    child = remaining.pop(pick_weighted([c.weight for c in remaining], rng.random()))
                    outcome = yield from _walk(child, rng, health)
                    if codes is None or not remaining or not triggers(codes, outcome):
                        return outcome
            return (yield from _balance(remaining, codes, rng=rng, health=health))
    raise TypeError(f"not a strategy node: {node!r}")


def _balance(remaining: list[Node], codes: frozenset[int] | None, *, rng: Random, health: Health) -> Walk:
    """A loadbalance that picks among children with a closed (or trial-ready) target only."""
    settled: Outcome | None = None
    while pool := [child for child in remaining if _reachable(child, health)]:
        child = pool[pick_weighted([c.weight for c in pool], rng.random())]
        remaining = [c for c in remaining if c is not child]
        outcome = yield from _walk(child, rng, health)
        if outcome.skipped:  # its trial was taken meanwhile: not a pick, pick again
            settled = settled or outcome
            continue
        settled = outcome
        if codes is None or not triggers(codes, outcome):
            return outcome
    if settled is not None:
        return settled
    # no child can be called: skip one, which tells the parent to move on
    return (yield from _walk(remaining[pick_weighted([c.weight for c in remaining], rng.random())], rng, health))


def _reachable(node: Node, health: Health) -> bool:
    return any(health.available(target) for target in usable_targets(node))
