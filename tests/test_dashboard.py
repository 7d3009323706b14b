"""The Grafana dashboard, proven against a real Prometheus scraping a real gateway.

The gateway runs as `python -m gateway serve` in front of two fake upstreams; the openai SDK
sends each kind of traffic the panels show (a success, a retry, a fallback, a stream, memory
turns with evictions, a failure, requests of a key past its limit, spend against a key's budget)
twice, with a scrape in between so that every rate() has two samples. Then every panel's query, variables substituted as Grafana would, must evaluate
without error to at least one series with a number in it. `promtool check metrics` must accept
the gateway's /metrics.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml
from aiohttp.test_utils import TestServer

from tests.support.fakes import FakeUpstream, Step, chat_completion, error_body, stream_of
from tests.support.servers import (
    PrometheusError,
    PrometheusProcess,
    free_port,
    prometheus_server,
    require_binary,
    wait_for_port,
)

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "grafana" / "dashboards" / "gateway.json"
DATASOURCES = ROOT / "grafana" / "provisioning" / "datasources" / "prometheus.yaml"
PROVIDERS = ROOT / "grafana" / "provisioning" / "dashboards" / "gateway.yaml"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}

# The metric families of the list and their labels; the route and target variables
# must filter every query on a family that has those labels.
METRIC_LABELS: dict[str, set[str]] = {
    "gateway_requests_total": {"route", "status_code", "stream"},
    "gateway_request_duration_seconds": {"route", "stream"},
    "gateway_time_to_first_token_seconds": {"route", "target"},
    "gateway_upstream_requests_total": {"route", "target", "provider", "outcome"},
    "gateway_upstream_duration_seconds": {"route", "target", "provider"},
    "gateway_fallbacks_total": {"route", "from_target", "reason"},
    "gateway_retries_total": {"route", "target", "reason"},
    "gateway_tokens_total": {"route", "target", "provider", "kind"},
    "gateway_inflight_requests": {"route"},
    "gateway_memory_requests_total": {"memory_type"},
    "gateway_memory_evicted_messages_total": {"memory_type"},
    "gateway_memory_store_duration_seconds": {"store", "operation"},
    "gateway_memory_lock_wait_seconds": set(),
    "gateway_build_info": {"version"},
    "gateway_config_routes": set(),
    "gateway_cost_usd_total": {"route", "target"},
    "gateway_rate_limited_total": {"key", "route", "limit"},
    "gateway_budget_spent_usd": {"key"},
    "gateway_budget_remaining_usd": {"key"},
}
VARIABLE_MATCHERS = {"route": 'route=~"$route"', "target": 'target=~"$target"', "from_target": 'from_target=~"$target"'}

# What Grafana puts in for its built-in variables (a 1 s scrape makes 1m at least 4 scrapes).
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
ALL = ".*"


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that shows data: rows left out, a collapsed row's panels included."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title and refId, expr) for every target of every panel."""
    return [(f"{panel['title']} [{target['refId']}]", target["expr"]) for panel in panels(dashboard)
            for target in panel["targets"]]


def substitute(expr: str, *, route: str, target: str) -> str:
    """The query as Grafana sends it, `$name` and `${name}` replaced; an unknown variable fails."""
    values = {**BUILTINS, "route": route, "target": target}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"unknown variable ${name} in {expr}"
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


# Static checks: no binaries needed.


def test_every_panel_and_target_uses_the_provisioned_datasource() -> None:
    dashboard = load_dashboard()
    assert "__inputs" not in dashboard, "a provisioned dashboard cannot ask for inputs"
    assert "${DS_" not in DASHBOARD.read_text(), "datasource placeholders left from an export"
    (datasource,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert {"type": datasource["type"], "uid": datasource["uid"]} == DATASOURCE and datasource["isDefault"]
    shown = list(panels(dashboard))
    assert len({panel["id"] for panel in shown}) == len(shown), "panel ids must be unique"
    for panel in shown:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']}: no query"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, f"{panel['title']} [{target['refId']}]"
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"] == DATASOURCE, variable["name"]


def test_the_provider_loads_the_dashboard_directory() -> None:
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_route_and_target_variables_are_multi_with_all_as_any() -> None:
    variables = {v["name"]: v for v in load_dashboard()["templating"]["list"]}
    assert set(variables) == {"route", "target"}
    for variable in variables.values():
        assert (variable["type"], variable["multi"], variable["includeAll"], variable["allValue"]) == ("query", True, True, ".*")
    assert variables["route"]["definition"] == "label_values(gateway_requests_total, route)"
    assert variables["target"]["definition"] == 'label_values(gateway_upstream_requests_total{route=~"$route"}, target)'


def test_every_query_names_known_metrics_and_filters_by_the_variables() -> None:
    for name, expr in queries(load_dashboard()):
        windows = re.findall(r"\brate\([^\[]*\[([^\]]*)\]", expr)
        assert set(windows) <= {"$__rate_interval"}, f"{name}: rate() over {windows}, not $__rate_interval"
        selectors = re.findall(r"\b(gateway_\w+?)(?:_bucket|_sum|_count)?\b(\{[^}]*\})?", expr)
        assert selectors, f"{name}: no gateway metric in {expr}"
        for metric, matchers in selectors:
            assert metric in METRIC_LABELS, f"{name}: {metric} is not one of the gateway's metrics"
            for label in METRIC_LABELS[metric] & set(VARIABLE_MATCHERS):
                assert VARIABLE_MATCHERS[label] in matchers, f"{name}: {metric} not filtered by {VARIABLE_MATCHERS[label]}"


def test_a_row_shows_refusals_by_key_and_limit_and_each_keys_budget() -> None:
    rows: dict[str, list[str]] = {}
    for panel in load_dashboard()["panels"]:  # a row's panels follow it
        if panel["type"] == "row":
            rows[panel["title"]] = []
        else:
            rows[list(rows)[-1]] += [target["expr"] for target in panel["targets"]]
    shown = " ".join(rows["Limits and budgets"])
    for metric in ("gateway_rate_limited_total", "gateway_budget_spent_usd", "gateway_budget_remaining_usd"):
        assert metric in shown
    assert "by (key, limit)" in shown


# Against a real Prometheus.

MESSAGES = [{"role": "user", "content": "hello"}]
PHASE_REQUESTS = 8  # what send_traffic sends


def usage_chunk(prompt: int, completion: int) -> bytes:
    body = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1700000000, "model": "up-model",
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


KEY = "sk-dashboard"  # a key with a budget: its spend is priced as the cost panels' is
TIGHT_KEY = "sk-tight"  # a request a minute: the second of a phase is refused


def gateway_config(primary: FakeUpstream, backup: FakeUpstream, workdir: Path) -> str:
    # primary's model is in litellm's price table (cost counted); backup's is not.
    return f"""
auth:
  keys:
    - {{name: dashboard, key: {KEY}, limits: {{budget: {{usd: 1000, period: month}}}}}}
    - {{name: tight, key: {TIGHT_KEY}, limits: {{requestsPerMinute: 1}}}}
limits: {{store: local}}
memory: {{store: sqlite, path: "{workdir / 'memory.db'}"}}
routes:
  chat:
    strategy: {{mode: fallback, onStatusCodes: [429, 500, 503]}}
    targets:
      - name: primary
        provider: openai
        baseUrl: "{primary.url}"
        apiKey: sk-primary
        overrideParams: {{model: gpt-4o-mini}}
        retry: {{attempts: 1, onStatusCodes: [503], backoffSeconds: 0.01}}
      - name: backup
        provider: openai
        baseUrl: "{backup.url}"
        apiKey: sk-backup
        overrideParams: {{model: local-model}}
"""


@asynccontextmanager
async def serving(fake: FakeUpstream, port: int) -> AsyncIterator[None]:
    server = TestServer(fake.app(), host="127.0.0.1", port=port)
    await server.start_server()
    try:
        yield
    finally:
        await server.close()


async def send_traffic(
    client: openai.AsyncOpenAI, primary: FakeUpstream, backup: FakeUpstream, prometheus: PrometheusProcess
) -> None:
    """PHASE_REQUESTS requests of the budgeted key through route `chat`: every kind of event a panel shows but refusals."""
    gate = asyncio.Event()
    primary.then(Step(gate=gate, body=chat_completion()))  # held upstream until a scrape has seen it in flight
    primary.arrived.clear()
    held = asyncio.create_task(client.chat.completions.create(model="chat", messages=MESSAGES))
    await primary.arrived.wait()
    await asyncio.to_thread(wait_for, prometheus, "sum(gateway_inflight_requests)", 1)
    gate.set()
    await held
    primary.then(Step(status=503, body=error_body(503)))  # retried on primary
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    primary.then(Step(status=429, body=error_body(429)))  # falls back to backup
    await client.chat.completions.create(model="chat", messages=MESSAGES)
    primary.then(Step(events=[*stream_of("Hel", "lo", done=False), usage_chunk(5, 2), b"data: [DONE]\n\n"]))
    stream = await client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    assert "".join([part.choices[0].delta.content or "" async for part in stream if part.choices]) == "Hello"
    for turn in range(3):  # a window of 2 messages evicts from the second turn on
        await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": f"turn {turn}"}],
            extra_headers={"memoryId": "conversation-1", "maxMessages": "2"},
        )
    primary.then(Step(status=503, body=error_body(503)), Step(status=503, body=error_body(503)))
    backup.then(Step(status=500, body=error_body(500)))
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="chat", messages=MESSAGES)


async def send_past_the_limit(tight: openai.AsyncOpenAI) -> int:
    """Two requests of the key allowed one a minute: the refusals (one, or both after the first phase)."""
    refused = 0
    for _ in range(2):
        try:
            await tight.chat.completions.create(model="chat", messages=MESSAGES)
        except openai.RateLimitError as exc:
            assert exc.code == "rate_limit_exceeded", exc.body
            refused += 1
    assert refused >= 1
    return refused


def wait_for(prometheus: PrometheusProcess, expr: str, at_least: float, timeout: float = 20) -> None:
    """Until Prometheus has scraped a /metrics where `expr` is at least `at_least`."""
    deadline = time.monotonic() + timeout
    seen: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        seen = prometheus.query(expr)
        if seen and float(seen[0]["value"][1]) >= at_least:
            return
        time.sleep(0.1)  # polling: a scrape is not an event we can await
    raise AssertionError(f"Prometheus never saw {expr} >= {at_least} (last: {seen}); log: {prometheus.log()}")


@contextmanager
def gateway_process(config: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process, timeout=30)
        yield process
    finally:
        process.terminate()
        process.wait(20)


@dataclass
class Scraped:
    prometheus: PrometheusProcess
    started: float  # when the traffic began (Unix time)
    metrics: str  # the gateway's /metrics after the traffic


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """A gateway that served two rounds of traffic, and a Prometheus that scraped it after each."""
    workdir = tmp_path_factory.mktemp("dashboard")
    gateway_port = free_port()
    primary, backup = FakeUpstream(), FakeUpstream()
    ports = free_port(), free_port()
    primary.url, backup.url = (f"http://127.0.0.1:{port}/v1" for port in ports)
    config = workdir / "gateway.yaml"
    config.write_text(gateway_config(primary, backup, workdir))

    async def traffic(prometheus: PrometheusProcess) -> None:
        base_url = f"http://127.0.0.1:{gateway_port}/v1"
        async with serving(primary, ports[0]), serving(backup, ports[1]), openai.AsyncOpenAI(
            base_url=base_url, api_key=KEY, max_retries=0, timeout=20
        ) as client, openai.AsyncOpenAI(base_url=base_url, api_key=TIGHT_KEY, max_retries=0, timeout=20) as tight:
            refused = 0
            for phase in (1, 2):
                await send_traffic(client, primary, backup, prometheus)
                refused += await send_past_the_limit(tight)
                total = phase * PHASE_REQUESTS
                await asyncio.to_thread(wait_for, prometheus, "sum(gateway_requests_total)", total)
                await asyncio.to_thread(wait_for, prometheus, "sum(gateway_rate_limited_total)", refused)

    with prometheus_server(workdir, [f"127.0.0.1:{gateway_port}"]) as prometheus, gateway_process(
        config, gateway_port, workdir / "gateway.log"
    ):
        started = time.time()
        try:
            asyncio.run(traffic(prometheus))
        except Exception as exc:
            log = (workdir / "gateway.log").read_text(errors="replace")[-4000:]
            raise AssertionError(f"traffic failed: {exc!r}\ngateway log:\n{log}") from exc
        with urllib.request.urlopen(f"http://127.0.0.1:{gateway_port}/metrics", timeout=10) as response:
            yield Scraped(prometheus, started, response.read().decode())


def shows_something(series: list[dict[str, Any]]) -> bool:
    """Some point of some series is a number above zero: the panel is not empty or flat at 0."""
    return any(math.isfinite(value) and value > 0
               for one in series for value in (float(text) for _, text in one["values"]))


@pytest.mark.parametrize(("route", "target"), [(ALL, ALL), ("chat", "primary")], ids=["all", "chat-primary"])
def test_every_panel_query_shows_the_traffic(scraped: Scraped, route: str, target: str) -> None:
    failures = []
    end = time.time()  # steps count back from now, so the last one sees the last scrape
    start = end - math.ceil(end - scraped.started)
    for name, expr in queries(load_dashboard()):
        query = substitute(expr, route=route, target=target)
        try:
            series = scraped.prometheus.query_range(query, start=start, end=end)
        except PrometheusError as exc:
            failures.append(f"{name}: error {exc}\n    {query}")
            continue
        if not series:
            failures.append(f"{name}: no series\n    {query}")
        elif not shows_something(series):
            failures.append(f"{name}: nothing above 0 in {[one['metric'] for one in series]}\n    {query}")
        for one in series:  # a concrete choice narrows the panel to it
            labels = one["metric"]
            assert route == ALL or labels.get("route", route) == route, f"{name}: {labels}"
            assert target == ALL or labels.get("target", labels.get("from_target", target)) == target, f"{name}: {labels}"
    assert not failures, "panels without data:\n" + "\n".join(failures)


def label_values(prometheus: PrometheusProcess, definition: str, *, route: str) -> set[str]:
    """What Grafana lists for a `label_values(selector, label)` variable."""
    match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", definition)
    assert match, definition
    selector = substitute(match.group(1), route=route, target=ALL)
    return {labels[match.group(2)] for labels in prometheus.series(selector) if match.group(2) in labels}


def test_the_variables_list_the_routes_and_targets_that_had_traffic(scraped: Scraped) -> None:
    variables = {v["name"]: v["definition"] for v in load_dashboard()["templating"]["list"]}
    routes = label_values(scraped.prometheus, variables["route"], route=ALL)
    assert "chat" in routes and routes <= {"chat", "other"}  # other: model names that are no route
    for route in (ALL, "chat"):
        assert label_values(scraped.prometheus, variables["target"], route=route) == {"primary", "backup"}
    assert label_values(scraped.prometheus, variables["target"], route="no-such-route") == set()


def test_promtool_accepts_the_metrics(scraped: Scraped) -> None:
    promtool = require_binary("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=scraped.metrics.encode(), capture_output=True, timeout=30)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
