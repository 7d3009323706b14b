"""Property tests: the config loader never crashes; what it refuses it refuses with path-qualified errors.

The strategies (tests/support/fuzzing.py) draw raw text, and documents shaped like a config.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.config.loader import ConfigError, parse_config, read_inline_route
from gateway.core.memory.settings import MemorySettings
from gateway.core.settings import Config
from tests.support.fuzzing import FUZZ, documents, json_values, nodes

# path ": " message, where a path is dotted names with [i] indexes (or the two whole-document cases)
PATH_QUALIFIED = re.compile(r"(top level|invalid YAML|[\w$-]+(\[\d+\])*(\.[\w$-]+(\[\d+\])*)*): \S")


def assert_only_path_qualified(load: Any) -> Any:
    try:
        return load()
    except ConfigError as exc:
        assert exc.errors
        for error in exc.errors:
            assert PATH_QUALIFIED.match(error), error
        return None


@FUZZ
@given(text=st.text(max_size=200))
@example(text="{a: " * 2000 + "1" + "}" * 2000)  # nesting deeper than the YAML reader recurses
def test_any_text_is_a_config_or_a_config_error(text: str) -> None:
    try:
        parse_config(text, env={})
    except ConfigError as exc:
        assert exc.errors


@FUZZ
@given(document=documents)
@example(document={"routes": {"r": {"baseUrl": "http://h:99999/v1"}}})  # yarl refuses the port
@example(document={"routes": {"r": {"provider": "mock", "timeout": 10**400}}})  # beyond a float
@example(document={"routes": {"r": {"provider": "mock", "retry": {"attempts": 10**400}}}})
def test_config_shaped_documents_fail_only_with_path_qualified_errors(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    config = assert_only_path_qualified(lambda: parse_config(text, env={}))
    assert config is None or isinstance(config, Config)


@FUZZ
@given(data=nodes | json_values)
@example(data={"baseUrl": "http://[::1/v1"})
def test_any_json_value_is_an_inline_route_or_a_config_error(data: Any) -> None:
    assert_only_path_qualified(lambda: read_inline_route(data, name="inline", memory=MemorySettings()))
