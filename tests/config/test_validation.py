"""The schema pass (gateway.config.validation): every problem at once, each once, at the place written."""

from __future__ import annotations

from gateway.config.loader import parse_config
from gateway.config.problems import Problems
from gateway.config.schema import ConfigFile, Node
from gateway.config.validation import placed, validated
from tests.support.config_text import errors_of


def test_a_refused_item_keeps_the_index_of_the_items_after_it() -> None:
    errors = errors_of(
        "routes: {r: {strategy: {mode: fallback}, targets: [5, {provider: nope}, {weight: x}]}}"
    )
    assert errors[:2] == [
        "routes.r.targets[0]: must be a mapping, got 5",
        "routes.r.targets[2].weight: must be a number, got 'x'",
    ]
    assert errors[2].startswith("routes.r.targets[1].provider: unknown provider 'nope'")
    assert len(errors) == 3


def test_a_mappings_own_check_is_not_told_a_value_already_refused_is_missing() -> None:
    """The key is refused (empty), so "needs exactly one of key or keySha256" would only repeat it."""
    errors = errors_of("auth: {keys: [{name: a, key: '${UNSET}'}]}\nroutes: {r: {provider: mock}}")
    assert errors == [
        "auth.keys[0].key: environment variable UNSET is not set",
        "auth.keys[0].key: must not be empty",
    ]


def test_a_mappings_own_check_runs_once_its_values_are_valid() -> None:
    errors = errors_of(
        "auth: {keys: [{name: 'a b'}, {name: c, key: k, keySha256: '"
        + "0" * 64
        + "'}]}\nroutes: {r: {provider: mock}}"
    )
    assert errors == [
        "auth.keys[0].name: must be 1-64 letters, digits or ._@- (it names the tenant), got 'a b'",
        "auth.keys[1]: needs exactly one of key or keySha256",
    ]


def test_a_missing_key_is_told_once_and_its_mapping_left_out() -> None:
    errors = errors_of("routes: {r: {strategy: {onStatusCodes: [600]}, targets: [{provider: mock}]}}")
    assert errors == [
        "routes.r.strategy.mode: is required",
        "routes.r.strategy.onStatusCodes[0]: must be a status code between 100 and 599, got 600",
    ]


def test_both_spellings_of_a_key_are_one_problem() -> None:
    assert errors_of("routes: {r: {provider: mock, api_key: a, apiKey: b}}") == [
        "routes.r.apiKey: given twice (snake_case and camelCase spellings of one key)"
    ]


def test_nothing_left_to_validate_is_none() -> None:
    problems = Problems()
    assert validated(Node, {"strategy": 5, "targets": "x"}, problems) is not None
    assert problems.messages == [
        "strategy: must be a mapping, got 5",
        "targets: must be a non-empty list, got 'x'",
    ]
    assert validated(Node, [1], Problems()) is None


def test_a_route_whose_name_cannot_be_one_is_refused_unread() -> None:
    assert errors_of("routes: {other: 5, m: {provider: mock}}") == [
        "routes.other: the name 'other' is reserved (metrics count requests that resolve to no route under it)"
    ]


def test_a_node_that_names_refused_targets_is_still_a_strategy_node() -> None:
    """Its settings are inherited by targets, so they are not checked as a target's."""
    assert errors_of("routes: {r: {providerParams: {region: x}, targets: []}}") == [
        "routes.r.targets: must be a non-empty list, got an empty list",
        "routes.r.strategy: is required when targets is given (mode: single, fallback or loadbalance)",
    ]
    assert errors_of("routes: {r: {strategy: {}}}") == [
        "routes.r.strategy.mode: is required",
        "routes.r.targets: must be a non-empty list",
    ]


def test_each_gateway_key_tells_all_its_problems() -> None:
    errors = errors_of("auth: {keys: [null, {}, {zvn: 1}]}\nroutes: {r: {provider: mock}}")
    assert errors == [
        "auth.keys[0]: must be a mapping, got null",
        "auth.keys[1].name: is required",
        "auth.keys[1]: needs exactly one of key or keySha256",
        "auth.keys[2].zvn: unknown key (expected one of: key, keySha256, limits, name, routes)",
        "auth.keys[2].name: is required",
        "auth.keys[2]: needs exactly one of key or keySha256",
    ]


def test_of_two_spellings_the_later_is_read_and_told() -> None:
    assert errors_of("routes: {r: {provider: openai, base_url: 'http://h/v1', baseUrl: {a: 1}}}") == [
        "routes.r.baseUrl: given twice (snake_case and camelCase spellings of one key)",
        "routes.r.baseUrl: must be a string, got a mapping",
    ]


def test_the_memory_path_is_shown_as_written_only_when_the_file_has_a_memory_section() -> None:
    assert parse_config("routes: {r: {provider: mock}}").memory.shown_path == ""
    assert parse_config("memory: {}\nroutes: {r: {provider: mock}}").memory.shown_path == "./data/memory.db"


def test_a_mappings_missing_key_leaves_the_mapping_out_and_the_rest_of_the_file_is_still_checked() -> None:
    """A key a mapping's own check asks for is not there to leave out: its mapping is, and the checks after the pass still run."""
    assert errors_of("memory: {sentinel: {nodes: ['s:1']}}\ndefaultRoute: nope\nroutes: {r: {provider: mock}}") == [
        "memory.sentinel.masterName: is required",
        "defaultRoute: no route named 'nope' (routes: r)",
    ]
    assert errors_of("auth: {keys: [{key: k}, {name: a, key: j, routes: [nope]}]}\nroutes: {r: {provider: mock}}") == [
        "auth.keys[0].name: is required",
        "auth.keys[1].routes[0]: no route named 'nope' (routes: r)",
    ]


def test_placed_gives_a_validated_lists_items_their_places_in_the_file() -> None:
    problems = Problems()
    checked = validated(ConfigFile, {"auth": {"keys": [{}, {"name": "a", "key": "k"}, 5, {"name": "b", "key": "j"}]}}, problems)
    assert checked is not None
    assert [(index, key.name) for index, key in placed(checked.auth.keys, ("auth", "keys"), problems)] == [(1, "a"), (3, "b")]
