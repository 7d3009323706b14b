"""Strategy trees from the config (gateway.config.tree): inherited settings resolved once, names and targets checked."""

from __future__ import annotations

import textwrap

import pytest

from gateway.config.checks import NAME_EXPECTED
from gateway.config.loader import ConfigError, parse_config
from gateway.config.schema import Limits
from gateway.config.tree import OTHER_ROUTE, merged_window, route_name_problem
from gateway.core.memory.settings import MemorySettings
from gateway.core.tree import Single, Target, iter_targets
from tests.support.config_text import errors_of, loads
from tests.support.secret_env import CONFIG, SECRETS


def test_single_mode_uses_first_target_node() -> None:
    config = loads(
        """
        routes:
          s:
            strategy: {mode: single}
            targets: [{provider: mock, name: a}, {provider: mock, name: b}]
        """
    )
    assert isinstance(config.routes["s"].root, Single)


def test_provider_params_become_litellm_arguments_inherited_down_the_tree() -> None:
    config = parse_config(
        """
        routes:
          claude:
            strategy: {mode: fallback}
            provider: bedrock
            providerParams: {awsRegionName: eu-west-1, aws_secret_access_key: s3cr3t-value}
            targets:
              - {name: a, overrideParams: {model: anthropic.claude-3}}
              - {name: b, providerParams: {awsRegionName: us-east-1}}
              - {name: c, provider: anthropic, providerParams: {}}
        """
    )
    a, b, c = iter_targets(config.routes["claude"].root)
    assert dict(a.provider_params) == {"aws_region_name": "eu-west-1", "aws_secret_access_key": "s3cr3t-value"}
    assert a.param_secrets == ("s3cr3t-value",)
    assert b.provider_params["aws_region_name"] == "us-east-1"
    assert c.provider == "anthropic" and c.base_url == ""


def test_breaker_and_responses_api_settings_are_inherited_down_the_tree() -> None:
    config = parse_config(
        """
routes:
  a:
    breaker: {failures: 3, cooldownSeconds: 10}
    responsesApi: translate
    strategy: {mode: fallback}
    targets:
      - {name: one, apiKey: k, breaker: {enabled: false}}
      - {name: two, apiKey: k, responsesApi: native}
"""
    )
    one, two = config.routes["a"].root.children
    assert isinstance(one, Target) and isinstance(two, Target)
    assert (one.breaker.enabled, one.breaker.failures, one.breaker.cooldown_seconds) == (False, 3, 10.0)
    assert (two.breaker.enabled, two.breaker.failures, two.breaker.failure_rate) == (True, 3, 0.5)
    assert (one.responses_api, two.responses_api) == ("translate", "native")


def test_an_inline_tree_is_read_without_interpolation_and_with_paths_from_its_top() -> None:
    from gateway.config.loader import read_inline_route
    from gateway.core.memory.settings import MemorySettings

    tree = {"strategy": {"mode": "fallback"}, "targets": [{"baseUrl": "http://h/${HOME}", "apiKey": "${SECRET}"}]}
    route = read_inline_route(tree, name="inline", memory=MemorySettings())
    (target,) = route.root.children
    assert isinstance(target, Target) and target.api_key == "${SECRET}" and target.base_url == "http://h/${HOME}"
    with pytest.raises(ConfigError) as caught:
        read_inline_route({"targets": [{"weight": -1}]}, name="inline", memory=MemorySettings())
    assert "targets[0].weight: must be >= 0, got -1" in caught.value.errors
    with pytest.raises(ConfigError):
        read_inline_route(["not", "a", "tree"], name="inline", memory=MemorySettings())


def test_env_values_are_each_targets_substituted_pieces() -> None:
    config = parse_config(textwrap.dedent(CONFIG), env=SECRETS)
    targets = {target.name: target for target in iter_targets(config.routes["smart"].root)}
    primary, backup = targets["primary"], targets["backup"]
    assert set(primary.env_values) == {"sk-env-key-0001", "tenant-token-0002", "user-tag-0003", "team-header-0004"}
    assert set(backup.env_values) == {
        "sk-backup-0008", "https://whole.example/v1/path-token-0007/", "https://whole.example/v1/path-token-0007",
        "user-tag-0003", "team-header-0004",
    }  # fmt: skip
    assert backup.env_refs["sk-backup-0008"] == "${BACKUP_KEY:-unused}"
    assert primary.env_refs["tenant-token-0002"] == "${TENANT_TOKEN}"
    # a node that sets a setting again replaces what it inherited, values from the environment included
    plain = parse_config(
        textwrap.dedent("""
        routes:
          r:
            strategy: {mode: single}
            apiKey: ${OPENAI_KEY}
            targets: [{provider: openai, apiKey: written-key}]
        """),
        env=SECRETS,
    )
    assert plain.routes["r"].first_target.env_values == ()


def test_a_node_name_from_the_environment_is_refused() -> None:
    """Names are shown in answer headers, metrics labels, logs and the health page."""
    text = "routes:\n  r:\n    strategy: {mode: fallback}\n    targets:\n      - {name: '${TEAM}', provider: mock}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={"TEAM": "team-secret-0010"})
    assert caught.value.errors == (
        "routes.r.targets[0].name: must be written out, not taken from the environment (it is shown in headers and metrics)",
    )



def test_a_route_name_is_printable_text_and_not_the_metrics_label_of_no_route() -> None:
    assert route_name_problem("smart") is None and route_name_problem("智能 1") is None
    assert route_name_problem("a\nb") == f"a route name {NAME_EXPECTED}"
    assert "is reserved" in (route_name_problem(OTHER_ROUTE) or "")


def test_settings_are_merged_key_by_key_and_deeper_values_win() -> None:
    config = loads(
        """
        routes:
          r:
            strategy: {mode: fallback}
            overrideParams: {temperature: 0.5, top_p: 0.9}
            headers: {x-team: a, x-env: prod}
            retry: {attempts: 2, onStatusCodes: [429]}
            targets:
              - {name: t, overrideParams: {temperature: 0.2}, headers: {x-team: b}, retry: {backoffSeconds: 1}}
        """
    )
    target = config.routes["r"].first_target
    assert dict(target.override_params) == {"temperature": 0.2, "top_p": 0.9}
    assert dict(target.headers) == {"x-team": "b", "x-env": "prod"}
    retry = target.retry
    assert (retry.attempts, retry.on_status_codes, retry.backoff_seconds) == (2, frozenset({429}), 1.0)


def test_a_node_that_names_another_provider_starts_its_provider_params_afresh() -> None:
    config = loads(
        """
        routes:
          r:
            strategy: {mode: fallback}
            provider: bedrock
            providerParams: {awsRegionName: eu-west-1}
            targets:
              - {name: same}
              - {name: other, provider: sagemaker}
        """
    )
    same, other = iter_targets(config.routes["r"].root)
    assert dict(same.provider_params) == {"aws_region_name": "eu-west-1"}
    assert dict(other.provider_params) == {}


def test_a_routes_memory_window_gives_its_settings_over_the_defaults() -> None:
    defaults = MemorySettings(max_messages=10, max_rounds=2)
    window = merged_window(Limits.model_validate({"maxRounds": 4}), defaults)
    assert window == MemorySettings(max_messages=10, max_rounds=4)


def test_a_loadbalance_of_zero_weights_and_a_duplicate_name_are_told_at_their_paths() -> None:
    errors = errors_of(
        """
        routes:
          r:
            strategy: {mode: loadbalance}
            targets: [{provider: mock, name: a, weight: 0}, {provider: mock, name: a, weight: 0}]
        """
    )
    assert errors == [
        "routes.r.targets[1].name: duplicate target name 'a' (also at routes.r.targets[0])",
        "routes.r.targets: a loadbalance needs at least one target with weight > 0",
    ]
