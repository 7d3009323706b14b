"""Observers as one: each event reaches every observer that takes it, in order, however many there are."""

from __future__ import annotations

import pytest

from gateway.config.loader import parse_config
from gateway.core.tree import Target
from gateway.observe import trace as observe


class Recorder(observe.Observer):
    """Takes request_ended and usage (and nothing else), writing down who was told what."""

    def __init__(self, name: str, told: list[tuple[str, str]]) -> None:
        self.name, self.told = name, told

    def request_ended(self, trace: observe.Trace) -> None:
        self.told.append((self.name, f"ended {trace.status}"))

    def usage(self, trace: observe.Trace, target: Target, *, prompt: int, completion: int) -> None:
        self.told.append((self.name, f"usage {prompt}+{completion}"))


def target() -> Target:
    node = parse_config("routes:\n  m: {provider: mock}\n").routes["m"].root
    assert isinstance(node, Target)
    return node


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_every_observer_that_takes_an_event_is_told_in_order(count: int) -> None:
    told: list[tuple[str, str]] = []
    recorders = [Recorder(f"r{number}", told) for number in range(count)]
    observer = observe.combine([observe.Observer(), *recorders, observe.Observer()])
    trace = observe.Trace(observer, request_id="req_1")
    trace.memory_stored(3)  # taken by nobody: a no-op
    trace.usage(target(), {"prompt_tokens": 2, "completion_tokens": 1})
    trace.end(200)
    names = [recorder.name for recorder in recorders]
    assert told == [(name, "usage 2+1") for name in names] + [(name, "ended 200") for name in names]


def test_observers_nest() -> None:
    told: list[tuple[str, str]] = []
    inner = observe.combine([Recorder("a", told), Recorder("b", told)])
    observer = observe.combine([inner, Recorder("c", told)])
    observe.Trace(observer).end(404)
    assert told == [("a", "ended 404"), ("b", "ended 404"), ("c", "ended 404")]


def test_a_trace_starts_from_the_defaults_and_keeps_its_own_values() -> None:
    first, second = observe.Trace(request_id="req_1", tenant="team-a"), observe.Trace()
    first.attempt_ended(target(), "200", 0.01)
    assert (first.attempts, first.tenant, first.route, first.status) == (1, "team-a", None, 0)
    assert (second.attempts, second.tenant, second.request_id, second.target) == (0, None, "", None)
    assert second.observer is not None and second.duration >= 0


class MemoryRecorder(observe.Observer):
    """Takes the finer memory events (not memory_turn), writing down what it was told."""

    def __init__(self, told: list[str]) -> None:
        self.told = told

    def lock_waited(self, store: str, seconds: float) -> None:
        self.told.append(f"lock {store} {seconds}")

    def store_timed(self, store: str, operation: str, seconds: float) -> None:
        self.told.append(f"{operation} {store} {seconds}")

    def memory_planned(self, trace: observe.Trace, memory_type: str, evicted: int) -> None:
        self.told.append(f"planned {memory_type} {evicted}")

    def memory_stored(self, trace: observe.Trace, messages: int) -> None:
        self.told.append(f"stored {messages}")


@pytest.mark.parametrize("alone", [True, False])
def test_a_memory_turn_reaches_an_observer_of_the_finer_events_as_those(alone: bool) -> None:
    told: list[str] = []
    recorder = MemoryRecorder(told)
    observer = recorder if alone else observe.combine([recorder, Recorder("r", [])])
    trace = observe.Trace(observer)
    trace.memory_type, trace.evicted = "token_window", 4
    observer.memory_turn(trace, "sqlite", waited=0.5, loaded=0.25, appended=0.125, stored=2)
    observer.memory_turn(trace, "sqlite", waited=0.5, loaded=0.25, appended=None, stored=0)  # a turn whose upstream failed: no write
    turn = ["lock sqlite 0.5", "load sqlite 0.25", "planned token_window 4"]
    assert told == [*turn, "append sqlite 0.125", "stored 2", *turn]


def test_the_model_sent_is_the_target_s_own_else_the_request_s_else_the_route_s_name() -> None:
    routes = parse_config("routes:\n  m: {provider: mock}\n  o: {provider: mock, overrideParams: {model: gpt-4o}}\n").routes
    plain, named = routes["m"].root, routes["o"].root
    assert isinstance(plain, Target) and isinstance(named, Target)
    trace = observe.Trace()
    assert trace.model_sent(plain) == ""  # nothing resolved yet
    trace.resolved(routes["m"], stream=False)
    assert trace.model_sent(plain) == "m"
    trace.resolved(routes["m"], stream=False, model="gpt-4o-mini")
    assert (trace.model, trace.model_sent(plain), trace.model_sent(None)) == ("gpt-4o-mini", "gpt-4o-mini", "gpt-4o-mini")
    assert trace.model_sent(named) == "gpt-4o"
