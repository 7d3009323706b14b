"""Hypothesis strategies for configs and JSON shaped like them, shared by the config loader's and the gateway's fuzz tests.

Documents are drawn both as raw values and shaped like a config (real keys, hostile values), so
examples get past the first check.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAMES = st.builds(
    str.__add__, st.sampled_from(string.ascii_letters), st.text(string.ascii_letters + string.digits + "_", max_size=7)
)
HOSTILE = st.sampled_from(
    [
        "openai", "mock", "anthropic", "bedrock", "fallback", "loadbalance", "single", "native",
        "http://h:99999/v1", "http://[::1/v1", "ftp://x", "https://api.example.com/v1", "http://127.0.0.1:1/v1",
        "${UNSET}", "${X:-7}", "", " ", "é", "\u0000", -1, 0, 0.5, 1, 600, 10**400, -(10**400), 1e308,
        True, None, [], {}, [429, 500], [99, 600], ["x"],
    ]
)  # fmt: skip
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | HOSTILE
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3), max_leaves=6
)

SECTION_KEYS = {
    "strategy": ["mode", "onStatusCodes", "on_status_codes"],
    "retry": ["attempts", "onStatusCodes", "backoffSeconds", "maxBackoffSeconds", "maxRetryAfterSeconds"],
    "breaker": ["enabled", "failures", "failureRate", "minRequests", "windowSeconds", "cooldownSeconds"],
    "mock": ["latency", "reply", "statuses", "chunkSize", "chunkDelay"],
    "memory": ["memoryType", "maxMessages", "maxTokens", "maxRounds", "maxChars"],
    "providerParams": ["awsRegionName", "apiVersion", "vertexProject", "aws_region_name", "region"],
    "headers": ["x-a", "authorization", "Host"],
    "overrideParams": ["model", "temperature", "api_base"],
    "limits": ["requestsPerMinute", "tokensPerMinute", "concurrentRequests", "budget"],
}
LEAF_KEYS = ["provider", "apiKey", "api_key", "baseUrl", "base_url", "name", "weight", "timeout", "streamIdleTimeout", "responsesApi"]


def sections(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys) | NAMES, json_values, max_size=4)


section_values = st.one_of(*(sections(keys) for keys in SECTION_KEYS.values()))
base_nodes = st.dictionaries(st.sampled_from([*LEAF_KEYS, *SECTION_KEYS]) | NAMES, json_values | section_values, max_size=5)
nodes = st.recursive(
    base_nodes,
    lambda inner: st.builds(lambda node, children: {**node, "targets": children}, base_nodes, st.lists(inner, max_size=3)),
    max_leaves=4,
)
TOP_SECTIONS = {
    "server": ["host", "port", "maxBodyBytes", "maxResponseBytes", "bodyReadTimeoutSeconds", "backlog", "drainSeconds"],
    "cors": ["allowOrigins", "allowHeaders", "maxAgeSeconds"],
    "metrics": ["enabled", "path", "requireAuth", "streamUsage"],
    "breakers": ["store", "url"],
    "requestConfig": ["enabled", "allowedHosts"],
    "auth": ["keys", "adminKeys"],
    "limits": ["store", "defaults", "path", "url", "cluster", "sentinel"],
    "memory": ["store", "path", "url", "ttlSeconds", "defaults", "limits", "lockTimeoutSeconds"],
}
documents = st.fixed_dictionaries(
    {},
    optional={
        "routes": st.dictionaries(NAMES | st.just("other"), nodes | json_values, max_size=3) | json_values,
        "defaultRoute": NAMES | json_values,
        **{name: sections(keys) | json_values for name, keys in TOP_SECTIONS.items()},
    },
)
