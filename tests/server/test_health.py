"""gateway.server.health: /healthz, /readyz and the breakers' page /v1/gateway/health, on a real gateway.

/readyz over a memory store whose writes fail is in test_store_heal_e2e.py; the breakers' states
step by step in test_breakers_e2e.py.
"""

from __future__ import annotations

import datetime
from typing import Any

from gateway.server.keys import LIFECYCLE
from tests.support.gateway import Gateway, app_of
from tests.support.plain_http import CONFIG, call

MESSAGES: Any = [{"role": "user", "content": "hi"}]


async def test_health_endpoints_need_no_key(gateway: Gateway) -> None:
    client = await gateway(CONFIG)
    assert (await call(client, "GET", "/healthz"))[:1] == (200,)
    status, _, payload = await call(client, "GET", "/readyz")
    assert status == 200 and payload == {"status": "ready"}


async def test_readyz_reports_draining(gateway: Gateway) -> None:
    client = await gateway("routes: {m: {provider: mock}}")
    app = app_of(client)
    app[LIFECYCLE].draining = True
    status, _, payload = await call(client, "GET", "/readyz")
    assert status == 503 and payload == {"status": "draining"}


async def test_the_health_page_is_degraded_while_a_breaker_is_open_and_says_until_when(gateway: Gateway) -> None:
    client = await gateway("""
        routes:
          m:
            strategy: {mode: fallback}
            breaker: {failures: 1, cooldownSeconds: 60}
            targets:
              - {name: flaky, provider: mock, mock: {statuses: [500]}}
              - {name: steady, provider: mock}
          quiet: {provider: mock, breaker: {enabled: false}}
    """)
    status, _, page = await call(client, "GET", "/v1/gateway/health")
    assert status == 200 and page["status"] == "ok" and page["breakers"] == "local"
    before = datetime.datetime.now(datetime.UTC)
    await client.chat.completions.create(model="m", messages=MESSAGES)  # flaky fails once: its breaker opens
    status, _, page = await call(client, "GET", "/v1/gateway/health")
    assert status == 200 and page["status"] == "degraded"
    flaky, steady = page["routes"]["m"]["targets"]
    assert flaky["name"] == "flaky" and flaky["state"] == "open"
    assert (flaky["requests"], flaky["failures"], flaky["failureRate"]) == (1, 1, 1.0)
    assert 0 < flaky["cooldownSeconds"] <= 60
    ends = datetime.datetime.fromisoformat(flaky["cooldownEndsAt"])
    assert before < ends <= before + datetime.timedelta(seconds=61)
    assert steady["state"] == "closed" and steady["cooldownEndsAt"] is None and steady["cooldownSeconds"] is None
    assert page["routes"]["quiet"]["targets"] == [{
        "name": "quiet", "state": "disabled", "failureRate": 0.0, "requests": 0, "failures": 0,
        "consecutiveFailures": 0, "cooldownEndsAt": None, "cooldownSeconds": None,
    }]  # fmt: skip

