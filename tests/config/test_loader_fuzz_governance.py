"""Property: hostile keys, admin keys, limits and budgets give path-qualified config errors, never a traceback.

Documents are shaped like the governance sections (their real keys, hostile values from
tests/support/fuzzing.py), so examples get past the first checks and reach those between keys,
admin keys, routes and the limits' store.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.config.loader import ConfigError, parse_config
from gateway.core.settings import Config
from tests.support.fuzzing import FUZZ, HOSTILE, json_values

PATH_QUALIFIED = re.compile(r"(top level|invalid YAML|[\w$-]+(\[\d+\])*(\.[\w$-]+(\[\d+\])*)*): \S")
ROUTE_NAMES = ["fast", "smart", "nope", ""]

values = json_values | HOSTILE
positive = st.integers(min_value=-2, max_value=10**10) | values
budgets = st.fixed_dictionaries(
    {}, optional={"usd": st.floats(min_value=-1, max_value=1e12) | values, "period": st.sampled_from(["day", "week", "month", "total", "year", ""]) | values}
) | values
limits = st.fixed_dictionaries(
    {},
    optional={
        "requestsPerMinute": positive, "tokensPerMinute": positive, "concurrentRequests": positive,
        "budget": budgets, "burst": values,
    },
) | values  # fmt: skip
names = st.sampled_from(["team-a", "team-b", "ops", "a b", "", "x" * 70]) | values
secrets = st.sampled_from(["k1", "k2", "", " k", "0" * 64]) | values
keys = st.fixed_dictionaries(
    {"name": names},
    optional={
        "key": secrets, "keySha256": secrets, "routes": st.lists(st.sampled_from(ROUTE_NAMES) | values, max_size=3) | values,
        "limits": limits,
    },
) | values  # fmt: skip
admin_keys = st.fixed_dictionaries({"name": names}, optional={"key": secrets, "keySha256": secrets, "routes": values}) | values
sections = st.fixed_dictionaries(
    {},
    optional={
        "auth": st.fixed_dictionaries({}, optional={"keys": st.lists(keys, max_size=3) | values, "adminKeys": st.lists(admin_keys, max_size=2) | values}),
        "limits": st.fixed_dictionaries(
            {},
            optional={
                "store": st.sampled_from(["local", "redis", "mongo"]) | values, "defaults": limits, "path": values,
                "url": st.sampled_from(["redis://:pw@127.0.0.1:6379/0", "redis://h:1/x", "http://h"]) | values,
                "cluster": st.booleans() | values, "sentinel": values,
            },
        ),
        "memory": st.fixed_dictionaries({}, optional={"store": st.sampled_from(["sqlite", "redis", "memory"])}),
        "routes": st.fixed_dictionaries(
            {"fast": st.fixed_dictionaries({"provider": st.just("mock")}, optional={"limits": limits})},
            optional={"smart": st.fixed_dictionaries({"provider": st.just("mock")}, optional={"limits": limits})},
        ),
    },
)  # fmt: skip


@FUZZ
@given(document=sections)
@example(document={"auth": {"keys": [{"name": "a"}, {"name": "a", "key": "k", "routes": ["nope"]}]}, "routes": {"fast": {"provider": "mock"}}})
@example(document={"auth": {"adminKeys": [{"name": "a", "key": "k"}], "keys": [{"name": "a", "key": "k"}]}, "routes": {"fast": {"provider": "mock"}}})
@example(document={"limits": {"store": "redis", "cluster": True, "sentinel": {}}, "routes": {"fast": {"provider": "mock", "limits": {"budget": {}}}}})
def test_governance_shaped_documents_fail_only_with_path_qualified_errors(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    try:
        config = parse_config(text, env={})
    except ConfigError as exc:
        assert exc.errors
        for error in exc.errors:
            assert PATH_QUALIFIED.match(error), error
            assert ":pw@" not in error, error
        return
    assert isinstance(config, Config)
    for key in config.api_keys:
        assert key.routes is None or key.routes <= set(config.routes)
    assert not {key.name for key in config.api_keys} & {key.name for key in config.admin_keys}
