"""CPU per request with limits off, limits counted in the process, and limits counted on Redis, in one run (issue 25).

    python bench/limits_cpu.py [--turns 3000] [--conns 8] [--rounds 10] [--only off,local,redis] [--tree DIR]

Three one-process gateways on the same route (bench/limits-off.yaml, limits-local.yaml,
limits-redis.yaml), the same key: limits off, then the key with every limit it can have
(requests and tokens per minute, concurrent requests, a monthly budget), set so high that the
load is never refused (send.py fails on any answer but 200), counted in process memory or in a
database of the run's redis-server. The load is bench/send.py's plain chat request, as in
bench/memory_cpu.py; the setups are run as bench/cpu_runs.py runs them (all at once, pinned, in
interleaved segments; CPU per request as the median segment, its ratio to limits off within
each round). The issue's aim: limits on <= 1.15x limits off, local and on Redis.

Each gateway is checked before the measured requests (a key with limits is answered with
x-ratelimit-limit-requests, the key without none) and after them: its GET /v1/gateway/usage
shows the budget spent by the run (the table's last column: settlement ran and was priced), and
the Redis setup's database holds the limits' keys (it counted there, not in its fallback).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import redis
from cpu_runs import HEADERS, Bench, Gateway, check, request, run
from cpu_table import Setup, Words
from send import body

LIMIT = "10000000"  # requestsPerMinute in limits-local.yaml and limits-redis.yaml
HASH_TAG = "{gateway-limits}"  # in every key governance stores in Redis
WORDS = Words(request="request", baseline="limits off", note="budget spent (GET /v1/gateway/usage)")

SETUPS = (
    Setup("off", "limits off (limits-off.yaml)", "limits-off.yaml", 1),
    Setup("local", "limits local, one process (limits-local.yaml)", "limits-local.yaml", 1),
    Setup("redis", "limits on Redis, one process (limits-redis.yaml)", "limits-redis.yaml", 1),
)


def limited(setup: Setup) -> bool:
    return setup.name != "off"


class LimitsBench(Bench):
    """The run's servers, with the limits' checks: the limited keys are limited, where the setup says."""

    def warm(self, gateway: Gateway) -> None:
        """Plain requests; then one whose answer shows the key's request limit, or (limits off) no limit at all."""
        super().warm(gateway)
        status, headers, answer = request(
            gateway.url("/v1/chat/completions"), method="POST", body=body("mock-1", stream=False)
        )
        check(status == 200, f"{gateway.setup.name}: probe request: {status} {answer[:300]!r}")
        shown = headers.get("x-ratelimit-limit-requests")
        wanted = LIMIT if limited(gateway.setup) else None
        check(shown == wanted, f"{gateway.setup.name}: x-ratelimit-limit-requests is {shown!r}, not {wanted!r}")

    def note(self, gateway: Gateway) -> object:
        """The budget spent, as the key's GET /v1/gateway/usage shows it; on Redis, the limits' keys must be there."""
        if not limited(gateway.setup):
            return ""
        if gateway.setup.name == "redis":
            with redis.Redis.from_url(gateway.redis_url) as client:
                stored = list(client.scan_iter(match=f"*{HASH_TAG}*", count=1000))
            check(bool(stored), f"redis: no key with {HASH_TAG} in {gateway.redis_url}: limits were not counted there")
        status, _, answer = request(gateway.url("/v1/gateway/usage"), headers=HEADERS)
        check(status == 200, f"{gateway.setup.name}: GET /v1/gateway/usage: {status} {answer[:300]!r}")
        budget = json.loads(answer)["limits"]["budget"]
        check(budget["spent_usd"] > 0, f"{gateway.setup.name}: nothing spent of the budget: {budget}")
        return f"${budget['spent_usd']:.4f}"


def main(argv: Sequence[str] | None = None) -> int:
    return run(LimitsBench, SETUPS, doc=__doc__ or "", words=WORDS, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
