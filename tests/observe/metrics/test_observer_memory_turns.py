"""A memory turn's one report adds to every series exactly as the finer events it stands for do."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gateway.config.loader import parse_config
from gateway.observe.metrics import LOCK_BUCKETS, STORE_BUCKETS, Metrics
from gateway.observe.trace import Observer, Trace

CONFIG = parse_config("routes:\n  chat: {provider: mock}\n")
# every bound, a hair on either side of it, nothing, and far past the last
BOUNDS = sorted({*STORE_BUCKETS, *LOCK_BUCKETS})
times = st.one_of(
    st.sampled_from([0.0, 1e-9, 1000.0, *BOUNDS, *(b * (1 + 1e-12) for b in BOUNDS), *(b * (1 - 1e-12) for b in BOUNDS)]),
    st.floats(0, 40, allow_nan=False),
)


@given(
    turns=st.lists(
        st.tuples(times, times, st.one_of(st.none(), times), st.sampled_from(["token_window", "round_window"]), st.integers(0, 30)),
        min_size=1,
        max_size=6,
    )
)
def test_a_turns_report_counts_as_its_finer_events(turns: list[tuple[float, float, float | None, str, int]]) -> None:
    whole, finer = Metrics(CONFIG, prices={}), Metrics(CONFIG, prices={})
    for waited, loaded, appended, memory_type, evicted in turns:
        for metrics, report in ((whole, whole.memory_turn), (finer, lambda *args, **kwargs: Observer.memory_turn(finer, *args, **kwargs))):
            trace = Trace(metrics)
            trace.memory_type, trace.evicted = memory_type, evicted
            report(trace, "sqlite", waited=waited, loaded=loaded, appended=appended, stored=2)
    assert samples(whole) == samples(finer)


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample's value but zeros: a turn makes its store's append series at once, an append event on first use."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.value
    }
