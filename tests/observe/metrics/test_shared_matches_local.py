"""One process's plain numbers and a worker's published ones (merged at scrape) report the same series for the same events."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gateway.observe.metrics import MULTIPROC_ENV

# Every event a request reports, on series made at load and on ones made on first use (a 418,
# a new outcome), priced targets, a stream, an unresolved request and one that is no model request.
SCRIPT = """
from gateway.config.loader import parse_config
from gateway.observe.metrics import Metrics, Price
from gateway.observe.trace import Trace

config = parse_config(
    "routes:\\n"
    "  chat:\\n"
    "    strategy: {mode: fallback}\\n"
    "    targets:\\n"
    "      - {name: a, provider: mock, retry: {attempts: 1}}\\n"
    "      - {name: b, provider: mock}\\n"
)
metrics = Metrics(config, prices={"chat": Price(0.5, 2.0)})
route = config.routes["chat"]
a, b = route.root.children
for stream, status in ((False, 200), (True, 200), (False, 418), (True, 503)):
    trace = Trace(metrics, "req", method="POST", path="/v1/chat/completions")
    trace.endpoint = "chat/completions"
    trace.resolved(route, stream=stream)
    trace.attempt_ended(a, "503", 0.07)
    trace.retried(a, "503")
    trace.attempt_ended(a, "429", 3.0)
    trace.fell_back(a, "429")
    trace.first_token(b)
    trace.usage(a, {"prompt_tokens": 3, "completion_tokens": 4})
    trace.usage(b, {"prompt_tokens": 5})
    trace.attempt_ended(b, "200", 0.05)
    trace.memory_planned("token_window", 2)
    trace.end(status)
unresolved = Trace(metrics, "req", method="POST", path="/v1/chat/completions")
unresolved.endpoint = "chat/completions"
unresolved.end(401)
Trace(metrics, "req", method="GET", path="/v1/models").end(200)
metrics.store_timed("sqlite", "load", 0.002)
metrics.lock_waited("sqlite", 0.001)
print(metrics.exposition().decode())
"""


# Sums of times the clock measured (the request's, the first token's): they differ run to run.
CLOCKED = ("gateway_request_duration_seconds_sum", "gateway_time_to_first_token_seconds_sum")


def samples(env: dict[str, str]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=True)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
        if sample.name not in CLOCKED
    }


def test_plain_numbers_and_published_ones_show_the_same_samples(tmp_path: Path) -> None:
    alone = {key: value for key, value in os.environ.items() if key != MULTIPROC_ENV}
    local, shared = samples(alone), samples({**alone, MULTIPROC_ENV: str(tmp_path)})
    assert local == shared
    assert local["gateway_requests_total", (("route", "chat"), ("status_code", "418"), ("stream", "false"))] == 1
    assert local["gateway_requests_total", (("route", "other"), ("status_code", "401"), ("stream", "false"))] == 1
    assert local["gateway_inflight_requests", (("route", "chat"),)] == 0
    assert local["gateway_cost_usd_total", (("route", "chat"), ("target", "a"))] == 4 * (3 * 0.5 + 4 * 2.0)
    assert local["gateway_cost_usd_total", (("route", "chat"), ("target", "b"))] == 4 * 5 * 0.5
    tokens = (("kind", "prompt"), ("provider", "mock"), ("route", "chat"), ("target", "b"))
    assert local["gateway_tokens_total", tokens] == 4 * 5
    upstream = (("provider", "mock"), ("route", "chat"), ("target", "a"))
    assert local["gateway_upstream_requests_total", (("outcome", "429"), *upstream)] == 4
    assert local["gateway_upstream_duration_seconds_bucket", (("le", "0.1"), *upstream)] == 4  # 0.07 in, 3.0 out
    assert local["gateway_request_duration_seconds_count", (("route", "chat"), ("stream", "true"))] == 2
