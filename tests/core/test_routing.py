from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest

from gateway.core.routing import (
    CIRCUIT_OPEN,
    Force,
    Outcome,
    Skip,
    judging_codes,
    pick_weighted,
    triggers,
    usable_targets,
    walk,
)
from gateway.core.tree import DEFAULT_TRIGGER_CODES, Fallback, LoadBalance, Node, Single, Target

OK = Outcome(200)


def t(name: str, weight: float = 1.0) -> Target:
    return Target(name=name, provider="mock", base_url="", api_key="", weight=weight)


def run(node: Node, answer: Callable[[str], Outcome], rng: random.Random | None = None) -> tuple[list[str], Outcome]:
    """Drive the walk like the dispatcher does; returns the targets tried and the settled outcome."""
    tried: list[str] = []
    gen = walk(node, rng or random.Random(1))
    target = next(gen)
    while True:
        tried.append(target.name)
        try:
            target = gen.send(answer(target.name))
        except StopIteration as stop:
            return tried, stop.value


def statuses(**by_name: int) -> Callable[[str], Outcome]:
    return lambda name: Outcome(by_name.get(name, 200))


def test_single_tries_only_the_first_target() -> None:
    tried, outcome = run(Single("s", 1, (t("a"), t("b"))), statuses(a=500))
    assert tried == ["a"] and outcome.status == 500


def test_bare_target_is_single() -> None:
    assert run(t("a"), statuses(a=429)) == (["a"], Outcome(429))


def test_fallback_in_order_until_success() -> None:
    node = Fallback("f", 1, (t("a"), t("b"), t("c")))
    assert run(node, statuses(a=500, b=200)) == (["a", "b"], OK)


def test_fallback_without_codes_triggers_on_any_non_2xx() -> None:
    node = Fallback("f", 1, (t("a"), t("b"), t("c")))
    tried, outcome = run(node, statuses(a=400, b=404, c=401))
    assert tried == ["a", "b", "c"] and outcome.status == 401


def test_fallback_with_codes_stops_on_other_statuses() -> None:
    node = Fallback("f", 1, (t("a"), t("b")), frozenset({429}))
    assert run(node, statuses(a=400)) == (["a"], Outcome(400))
    assert run(node, statuses(a=429, b=503)) == (["a", "b"], Outcome(503))


def test_transport_failures_always_trigger() -> None:
    node = Fallback("f", 1, (t("a"), t("b")), frozenset({429}))
    tried, outcome = run(node, lambda name: Outcome(504, transport=True) if name == "a" else OK)
    assert tried == ["a", "b"] and outcome.ok
    assert triggers(frozenset({429}), Outcome(502, transport=True))
    assert not triggers(frozenset({429}), Outcome(502))
    assert not triggers(None, OK)


def test_pick_weighted_is_proportional_and_skips_zero() -> None:
    assert pick_weighted([1, 0, 1], 0.0) == 0
    assert pick_weighted([1, 0, 1], 0.5) == 2
    assert pick_weighted([1, 0, 1], 0.999999) == 2
    assert pick_weighted([0, 3], 0.0) == 1
    with pytest.raises(ValueError):
        pick_weighted([0, 0], 0.3)


def test_loadbalance_proportions_over_many_picks() -> None:
    node = LoadBalance("lb", 1, (t("a", 0.75), t("b", 0.25), t("never", 0)))
    rng = random.Random(42)
    counts = Counter(run(node, statuses(), rng)[0][0] for _ in range(20000))
    assert counts["never"] == 0
    assert abs(counts["a"] / 20000 - 0.75) < 0.015
    assert abs(counts["b"] / 20000 - 0.25) < 0.015


def test_loadbalance_without_codes_tries_exactly_one() -> None:
    node = LoadBalance("lb", 1, (t("a"), t("b")))
    tried, outcome = run(node, statuses(a=503, b=503))
    assert len(tried) == 1 and outcome.status == 503


def test_loadbalance_with_codes_repicks_among_untried() -> None:
    node = LoadBalance("lb", 1, (t("a"), t("b"), t("c")), frozenset({503}))
    for seed in range(20):
        tried, outcome = run(node, statuses(a=503, b=503, c=503), random.Random(seed))
        assert sorted(tried) == ["a", "b", "c"] and outcome.status == 503
        tried, outcome = run(node, statuses(a=503, b=503), random.Random(seed))
        assert tried[-1] == "c" and len(set(tried)) == len(tried) and outcome.ok
        tried, _ = run(node, statuses(a=400, b=400, c=400), random.Random(seed))
        assert len(tried) == 1  # 400 is not a trigger


def test_nested_subtree_outcome_is_judged_by_parent() -> None:
    inner = Fallback("inner", 1, (t("x"), t("y")))  # any non-2xx triggers inside
    outer = Fallback("outer", 1, (inner, t("z")), frozenset({429}))
    # the subtree ends on y's 400: not a 429, so the outer node stops there
    assert run(outer, statuses(x=500, y=400)) == (["x", "y"], Outcome(400))
    # the subtree ends on y's 429: the outer node moves on to z
    assert run(outer, statuses(x=500, y=429)) == (["x", "y", "z"], OK)


def test_fallback_over_nested_loadbalance() -> None:
    lb = LoadBalance("lb", 1, (t("sub-a", 0.75), t("sub-b", 0.25)))
    root = Fallback("root", 1, (t("main"), lb), frozenset({429}))
    tried, outcome = run(root, statuses(main=429), random.Random(3))
    assert tried[0] == "main" and tried[1] in {"sub-a", "sub-b"} and len(tried) == 2 and outcome.ok


# ---------------------------------------------------------------- with circuit breakers


class Open:
    """A Health where the named targets are open; `reopens` says when each one's cooldown ends."""

    def __init__(self, *names: str, reopens: dict[str, float] | None = None) -> None:
        self.open = set(names)
        self.reopens = reopens or {}

    def available(self, target: Target) -> bool:
        return target.name not in self.open

    def reopens_at(self, target: Target) -> float:
        return self.reopens.get(target.name, 0.0)


def steps(
    node: Node, answer: Callable[[str], Outcome], health: Open, rng: random.Random | None = None
) -> tuple[list[str], Outcome]:
    """Drive the walk like the dispatcher does: 'skip:a' for a skip, 'force:a' for a forced call."""
    taken: list[str] = []
    gen = walk(node, rng or random.Random(1), health)
    step = next(gen)
    while True:
        if isinstance(step, Skip):
            taken.append(f"skip:{step.target.name}")
            outcome = CIRCUIT_OPEN
        elif isinstance(step, Force):
            taken.append(f"force:{step.target.name}")
            outcome = answer(step.target.name)
        else:
            taken.append(step.name)
            outcome = answer(step.name)
        try:
            step = gen.send(outcome)
        except StopIteration as stop:
            return taken, stop.value


def test_fallback_skips_an_open_target_as_a_transport_failure_even_with_codes() -> None:
    node = Fallback("f", 1, (t("a"), t("b")), frozenset({429}))
    assert steps(node, statuses(), Open("a")) == (["skip:a", "b"], OK)


def test_the_last_real_failure_is_not_hidden_by_a_skipped_loadbalance_child() -> None:
    node = LoadBalance("lb", 1, (t("a"), t("b"), t("c")), frozenset({503}))
    for seed in range(10):
        taken, outcome = steps(node, statuses(a=503, b=503), Open("c"), random.Random(seed))
        assert sorted(taken) == ["a", "b"] and outcome == Outcome(503)


def test_loadbalance_picks_among_closed_children_only() -> None:
    node = LoadBalance("lb", 1, (t("a", 0.9), t("b", 0.1)))
    picked = Counter(steps(node, statuses(), Open("a"), random.Random(seed))[0][0] for seed in range(200))
    assert picked == {"b": 200}


def test_a_loadbalance_with_every_child_open_is_skipped_and_its_parent_moves_on() -> None:
    lb = LoadBalance("lb", 1, (t("a"), t("b")))
    node = Fallback("f", 1, (lb, t("c")), frozenset({429}))
    taken, outcome = steps(node, statuses(), Open("a", "b"))
    assert taken[0] in {"skip:a", "skip:b"} and taken[1:] == ["c"] and outcome == OK


def test_every_usable_target_open_tries_the_one_whose_cooldown_ends_first() -> None:
    node = Fallback("f", 1, (t("a"), LoadBalance("lb", 1, (t("b"), t("never", 0))), t("c")))
    health = Open("a", "b", "c", "never", reopens={"a": 30.0, "b": 10.0, "c": 20.0, "never": 1.0})
    assert steps(node, statuses(b=500), health) == (["force:b"], Outcome(500))
    # a single's other children are no candidates either
    single = Single("s", 1, (t("x"), t("y")))
    assert steps(single, statuses(), Open("x", "y", reopens={"x": 9.0, "y": 1.0})) == (["force:x"], OK)


def test_a_walk_whose_only_call_was_refused_still_forces_one() -> None:
    """The dispatcher sends CIRCUIT_OPEN back for a Target whose trial another request took."""
    node = Fallback("f", 1, (t("a"), t("b")))
    gen = walk(node, random.Random(1), Open("b", reopens={"a": 5.0, "b": 3.0}))
    step = next(gen)
    assert isinstance(step, Target) and step.name == "a"
    step = gen.send(CIRCUIT_OPEN)  # a's trial was taken meanwhile
    assert isinstance(step, Skip) and step.target.name == "b"
    step = gen.send(CIRCUIT_OPEN)
    assert isinstance(step, Force) and step.target.name == "b"
    with pytest.raises(StopIteration) as stop:
        gen.send(OK)
    assert stop.value.value == OK


def test_usable_targets_and_judging_codes() -> None:
    a, b, c, d, e = t("a"), t("b"), t("c", 0), t("d"), t("e")
    tree = Fallback("f", 1, (Single("s", 1, (a, b)), LoadBalance("lb", 1, (c, d)), LoadBalance("lbc", 1, (e,), frozenset({429}))), frozenset({503}))
    assert [x.name for x in usable_targets(tree)] == ["a", "d", "e"]
    assert {x.name: codes for x, codes in judging_codes(tree)} == {
        "a": frozenset({503}), "b": frozenset({503}), "c": frozenset({503}), "d": frozenset({503}), "e": frozenset({429}),
    }  # fmt: skip
    assert dict((x.name, codes) for x, codes in judging_codes(Fallback("g", 1, (a,)))) == {"a": None}
    assert dict((x.name, codes) for x, codes in judging_codes(a)) == {"a": DEFAULT_TRIGGER_CODES}
