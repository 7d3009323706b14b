from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path

import pytest

from gateway.config.loader import DEFAULT_OPENAI_BASE_URL, ConfigError, load_config, parse_config
from gateway.core.tree import Fallback, LoadBalance, Target, iter_targets
from tests.support.secret_env import SECRETS, check_config, set_secrets

ENV = {"OPENAI_API_KEY": "sk-env", "TEAM_A_KEY": "team-a-secret"}


def load(text: str, env: dict[str, str] | None = None):
    return parse_config(textwrap.dedent(text), env=ENV if env is None else env)


def errors_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(text, env)
    return list(caught.value.errors)


# The five MultiLLMsConfig examples of the xFlow AIAgent spec, written as YAML routes.
SEED_EXAMPLES = """
routes:
  single:
    apiKey: sk-123456
    overrideParams: {model: claude-1}
  fallback:
    strategy: {mode: fallback}
    targets:
      - apiKey: sk-123456
      - apiKey: sk-789101
        overrideParams: {model: claude-1}
  fallback-429:
    strategy: {mode: fallback, onStatusCodes: [429]}
    targets:
      - apiKey: sk-123456
      - apiKey: sk-789101
  loadbalance:
    strategy: {mode: loadbalance}
    targets:
      - {apiKey: sk-123456, weight: 0.75}
      - {apiKey: sk-789101, weight: 0.25}
  combination:
    strategy: {mode: fallback, onStatusCodes: [429]}
    targets:
      - apiKey: sk-main-123456
      - strategy: {mode: loadbalance}
        targets:
          - {apiKey: sk-sub-456789, weight: 0.75}
          - {apiKey: sk-sub-987654, weight: 0.25}
"""


def test_seed_examples_load() -> None:
    config = load(SEED_EXAMPLES)
    single = config.routes["single"].root
    assert isinstance(single, Target)
    assert single.api_key == "sk-123456" and single.model == "claude-1"
    assert single.provider == "openai" and single.base_url == DEFAULT_OPENAI_BASE_URL

    fallback = config.routes["fallback"].root
    assert isinstance(fallback, Fallback) and fallback.on_status_codes is None
    assert [t.model for t in iter_targets(fallback)] == [None, "claude-1"]

    assert config.routes["fallback-429"].root.on_status_codes == frozenset({429})  # type: ignore[union-attr]

    lb = config.routes["loadbalance"].root
    assert isinstance(lb, LoadBalance)
    assert [c.weight for c in lb.children] == [0.75, 0.25]

    combo = config.routes["combination"].root
    assert isinstance(combo, Fallback) and isinstance(combo.children[1], LoadBalance)
    names = [t.name for t in iter_targets(combo)]
    assert names == ["combination.targets[0]", "combination.targets[1].targets[0]", "combination.targets[1].targets[1]"]


def test_issue_example_with_inheritance_and_env() -> None:
    config = load(
        """
        server: {host: 127.0.0.1, port: 9000, maxBodyBytes: 1000}
        auth:
          keys:
            - {name: team-a, key: "${TEAM_A_KEY}"}
            - {name: team-b, keySha256: "DIGEST"}
        defaultRoute: fast
        routes:
          fast:
            provider: openai
            apiKey: "${OPENAI_API_KEY}"
            overrideParams: {model: gpt-4o-mini}
          smart:
            strategy: {mode: fallback, onStatusCodes: [429, 500, 502, 503, 504]}
            overrideParams: {temperature: 0.5, top_p: 0.9}
            timeout: 45
            retry: {attempts: 1}
            targets:
              - name: primary
                provider: openai
                apiKey: "${OPENAI_API_KEY}"
                overrideParams: {model: gpt-4o, temperature: 0.2}
                retry: {attempts: 2, onStatusCodes: [429, 503]}
                timeout: 30
              - strategy: {mode: loadbalance}
                targets:
                  - {provider: openai, baseUrl: "http://vllm-a:8000/v1", apiKey: "", weight: 0.75}
                  - {provider: openai, baseUrl: "http://vllm-b:8000/v1/", apiKey: "", weight: 0.25}
        """.replace("DIGEST", hashlib.sha256(b"b-secret").hexdigest())
    )
    assert config.server.port == 9000 and config.server.max_body_bytes == 1000
    assert config.server.drain_seconds == 60
    assert [k.name for k in config.api_keys] == ["team-a", "team-b"]
    assert config.api_keys[0].sha256 == hashlib.sha256(b"team-a-secret").digest()
    assert config.default_route == "fast"
    primary, vllm_a, vllm_b = iter_targets(config.routes["smart"].root)
    assert primary.api_key == "sk-env"
    assert dict(primary.override_params) == {"model": "gpt-4o", "temperature": 0.2, "top_p": 0.9}
    assert primary.timeout == 30 and primary.retry.attempts == 2
    assert primary.retry.on_status_codes == frozenset({429, 503})
    assert dict(vllm_a.override_params) == {"temperature": 0.5, "top_p": 0.9}
    assert vllm_a.timeout == 45 and vllm_a.retry.attempts == 1  # inherited from the root node
    assert vllm_a.api_key == "" and vllm_b.base_url == "http://vllm-b:8000/v1"
    assert vllm_a.name == "smart.targets[1].targets[0]"


def test_minimal_benchmark_config_loads() -> None:
    config = load(
        """
        routes:
          mock-1:
            provider: openai
            baseUrl: http://127.0.0.1:18080/v1
            apiKey: sk-bench
        """
    )
    target = config.routes["mock-1"].root
    assert isinstance(target, Target) and target.base_url == "http://127.0.0.1:18080/v1"
    assert target.timeout == 600 and target.stream_idle_timeout == 120 and target.retry.attempts == 0


def test_shipped_configs_load() -> None:
    config = load_config("configs/gateway.yaml")
    assert all(t.provider == "mock" for r in config.routes.values() for t in iter_targets(r.root))


def test_portkey_snake_case_aliases_load_unchanged() -> None:
    config = load(
        """
        routes:
          pk:
            strategy: {mode: fallback, on_status_codes: [429]}
            targets:
              - provider: openai
                api_key: sk-one
                override_params: {model: gpt-4o, max_tokens: 10}
                retry: {attempts: 2, on_status_codes: [503]}
              - provider: openai
                api_key: sk-two
                base_url: http://other:9000/v1
        """
    )
    first, second = iter_targets(config.routes["pk"].root)
    assert first.api_key == "sk-one" and dict(first.override_params) == {"model": "gpt-4o", "max_tokens": 10}
    assert first.retry.on_status_codes == frozenset({503})
    assert second.base_url == "http://other:9000/v1"


def test_env_default_and_numbers_from_env() -> None:
    config = load(
        """
        server: {port: "${PORT:-8181}"}
        routes:
          r: {provider: openai, apiKey: "${MISSING_KEY:-}", baseUrl: "${BASE:-http://h:1/v1}"}
        """,
        env={},
    )
    assert config.server.port == 8181
    target = config.routes["r"].root
    assert isinstance(target, Target) and target.api_key == "" and target.base_url == "http://h:1/v1"

@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "routes: {r: {strategy: {mode: fallback}, targets: []}}",
            "routes.r.targets: must be a non-empty list, got an empty list",
        ),
        (
            "routes: {r: {strategy: {mode: roundrobin}, targets: [{provider: mock}]}}",
            "routes.r.strategy.mode: must be one of single, fallback, loadbalance, got 'roundrobin'",
        ),
        (
            "routes: {r: {strategy: {mode: loadbalance}, targets: [{provider: mock, weight: 0}, {provider: mock, weight: 0}]}}",
            "routes.r.targets: a loadbalance needs at least one target with weight > 0",
        ),
        (
            """
            routes:
              smart:
                strategy: {mode: loadbalance}
                targets: [{provider: mock}, {provider: mock, weight: -1}]
            """,
            "routes.smart.targets[1].weight: must be >= 0, got -1",
        ),
        (
            "routes: {r: {strategy: {mode: fallback, onStatusCodes: [429, 600]}, targets: [{provider: mock}]}}",
            "routes.r.strategy.onStatusCodes[1]: must be a status code between 100 and 599, got 600",
        ),
        (
            "routes: {r: {provider: mock, retry: {attempts: 1, onStatusCodes: [99]}}}",
            "routes.r.retry.onStatusCodes[0]: must be a status code between 100 and 599, got 99",
        ),
        (
            "routes: {r: {strategy: {mode: fallback}, targets: [{provider: mock, name: a}, {provider: mock, name: a}]}}",
            "routes.r.targets[1].name: duplicate target name 'a' (also at routes.r.targets[0])",
        ),
        (
            "defaultRoute: nope\nroutes: {r: {provider: mock}}",
            "defaultRoute: no route named 'nope' (routes: r)",
        ),
        (
            "routes: {r: {provider: mock, wieght: 2}}",
            "routes.r.wieght: unknown key",
        ),
        (
            "routes: {r: {provider: anthropic-ish}}",
            "routes.r.provider: unknown provider 'anthropic-ish' (openai, mock, or a provider litellm knows",
        ),
        (
            "routes: {r: {provider: openai, apiKey: '${NOT_SET_ANYWHERE}'}}",
            "routes.r.apiKey: environment variable NOT_SET_ANYWHERE is not set",
        ),
        (
            "routes: {r: {provider: mock, timeout: fast}}",
            "routes.r.timeout: must be a number, got 'fast'",
        ),
        (
            "routes: {r: {provider: openai, baseUrl: 'ftp://x'}}",
            "routes.r.baseUrl: must be an http(s) URL, got 'ftp://x'",
        ),
        (
            "routes: {r: {targets: [{provider: mock}]}}",
            "routes.r.strategy: is required when targets is given",
        ),
        ("server: {port: 70000}\nroutes: {r: {provider: mock}}", "server.port: must be between 0 and 65535, got 70000"),
        ("auth: {keys: [{name: a}]}\nroutes: {r: {provider: mock}}", "auth.keys[0]: needs exactly one of key or keySha256"),
        (
            "auth: {keys: [{name: a, key: 'clé'}]}\nroutes: {r: {provider: mock}}",
            "auth.keys[0].key: must be printable ASCII without leading or trailing spaces",
        ),
        ("server: {maxResponseBytes: 0}\nroutes: {r: {provider: mock}}", "server.maxResponseBytes: must be >= 1, got 0"),
        ("server: {bodyReadTimeoutSeconds: 0}\nroutes: {r: {provider: mock}}", "server.bodyReadTimeoutSeconds: must be > 0, got 0"),
        (
            "cors: {allowOrigins: ['ftp://x']}\nroutes: {r: {provider: mock}}",
            "cors.allowOrigins[0]: must be '*' or an origin like https://app.example.com, got 'ftp://x'",
        ),
        (
            "cors: {allowOrigins: ['http://h:99999']}\nroutes: {r: {provider: mock}}",
            "cors.allowOrigins[0]: must be '*' or an origin like https://app.example.com, got 'http://h:99999'",
        ),
        ("routes: {}", "routes: must be a mapping with at least one route"),
        (
            "auth: {keys: [{name: 'a:b', key: k}]}\nroutes: {r: {provider: mock}}",
            "auth.keys[0].name: must be 1-64 letters, digits or ._@- (it names the tenant), got 'a:b'",
        ),
        ("routes: {r: {provider: mock, api_key: a, apiKey: b}}", "routes.r.apiKey: given twice"),
    ],
)
def test_rejections_name_the_path(text: str, message: str) -> None:
    errors = errors_of(text)
    assert any(e.startswith(message) for e in errors), errors


def test_every_error_is_reported_at_once() -> None:
    errors = errors_of(
        """
        defaultRoute: missing
        routes:
          a: {provider: mock, weight: -2, timeout: 0}
          b: {strategy: {mode: nope}, targets: [{provider: mock, bogus: 1}]}
        """
    )
    assert len(errors) == 5, errors


def test_invalid_yaml_and_top_level() -> None:
    assert errors_of("routes: [")[0].startswith("invalid YAML")
    assert errors_of("- a\n- b") == ["top level: must be a mapping, got a list"]


def test_memory_block_and_route_defaults() -> None:
    config = load(
        """
        memory:
          store: redis
          url: redis://cache:6379/2
          path: /var/lib/gateway/m.db
          ttlSeconds: 3600
          maxStoredMessages: 50
          lockTimeoutSeconds: 5
          defaults: {memoryType: token_window, maxMessages: 10, maxTokens: 2000, maxRounds: 2, maxChars: 5000}
          limits: {maxMessages: 100, maxTokens: 64000, maxRounds: 20, maxChars: 100000}
        routes:
          plain: {provider: mock}
          smart:
            provider: mock
            memory: {memoryType: round_window, maxRounds: 4}
        """
    )
    memory = config.memory
    assert (memory.store, memory.url, memory.path) == ("redis", "redis://cache:6379/2", "/var/lib/gateway/m.db")
    assert (memory.ttl_seconds, memory.max_stored_messages, memory.lock_timeout_seconds) == (3600, 50, 5)
    assert memory.defaults.memory_type == "token_window" and memory.defaults.max_tokens == 2000
    assert memory.limits.max_tokens == 64000
    assert config.routes["plain"].memory == memory.defaults
    smart = config.routes["smart"].memory
    assert (smart.memory_type, smart.max_rounds, smart.max_tokens) == ("round_window", 4, 2000)


def test_memory_defaults_without_a_block() -> None:
    config = load("routes: {r: {provider: mock}}")
    assert config.memory.store == "sqlite" and config.memory.path == "./data/memory.db"
    assert config.memory.ttl_seconds == 30 * 24 * 3600 and config.memory.max_stored_messages == 1000
    assert config.memory.lock_timeout_seconds == 120
    assert config.routes["r"].memory.memory_type == "message_window" and config.routes["r"].memory.max_messages == 20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("memory: {store: mongo}", "memory.store: must be one of sqlite, memory, redis, got 'mongo'"),
        ("memory: {defaults: {memoryType: forever}}", "memory.defaults.memoryType: must be one of message_window"),
        ("memory: {defaults: {maxTokens: 0}}", "memory.defaults.maxTokens: must be >= 1, got 0"),
        ("memory: {limits: {memoryType: token_window}}", "memory.limits.memoryType: unknown key"),
        ("memory: {ttlSeconds: -1}", "memory.ttlSeconds: must be > 0, got -1"),
        ("memory: {colour: blue}", "memory.colour: unknown key"),
    ],
)
def test_memory_rejections(text: str, message: str) -> None:
    errors = errors_of(text + "\nroutes: {r: {provider: mock}}")
    assert any(e.startswith(message) for e in errors), errors


def test_route_memory_rejection() -> None:
    errors = errors_of("routes: {r: {provider: mock, memory: {maxRounds: x}}}")
    assert "routes.r.memory.maxRounds: must be an integer, got 'x'" in errors


@pytest.mark.parametrize("path", sorted([*Path("configs").rglob("*.yaml"), *Path("bench").glob("*.yaml")]), ids=str)
def test_every_shipped_config_loads(path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-x", "TEAM_A_KEY": "a", "WEB_KEY": "w", "MOBILE_KEY_SHA256": "0" * 64,
           "BENCH_REDIS_URL": "redis://127.0.0.1:6379/0"}  # the guard sets it to the redis-server it starts
    config = load_config(path, env=env)
    assert config.routes

def test_any_provider_litellm_knows_is_accepted() -> None:
    config = parse_config("routes: {r: {provider: deepseek, overrideParams: {model: deepseek-chat}}}")
    assert config.routes["r"].first_target.provider == "deepseek"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("{provider: anthropic, providerParams: {awsRegionName: x}}", "routes.r.providerParams.awsRegionName: unknown for provider anthropic (expected one of: none)"),
        ("{provider: azure, providerParams: {apiVersion: [1]}}", "routes.r.providerParams.apiVersion: must be a string, got a list"),
        ("{provider: bedrock, providerParams: {region: x}}", "routes.r.providerParams.region: unknown for provider bedrock (expected one of: awsRegionName"),
    ],
)
def test_bad_provider_params_name_their_path(params: str, message: str) -> None:
    errors = errors_of(f"routes: {{r: {params}}}")
    assert any(e.startswith(message) for e in errors), errors

def test_breaker_request_config_and_responses_api_errors_are_path_qualified() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            """
breakers: {store: disk}
requestConfig: {enabled: maybe, allowedHosts: [""]}
routes: {a: {apiKey: k, responsesApi: both, breaker: {failureRate: 2, cooldownSeconds: 60, maxCooldownSeconds: 30}}}
"""
        )
    assert set(caught.value.errors) == {
        "breakers.store: must be local or redis, got 'disk'",
        "requestConfig.enabled: must be true or false, got 'maybe'",
        "requestConfig.allowedHosts[0]: must be a non-empty string, got ''",
        "routes.a.responsesApi: must be native or translate, got 'both'",
        "routes.a.breaker.failureRate: must be a fraction between 0 and 1, got 2",
        "routes.a.breaker.maxCooldownSeconds: must be >= cooldownSeconds",
    }

def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("routes:\n  caf\xe9: {provider: mock}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_check_config_errors_show_references_and_mask_userinfo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_secrets(monkeypatch)
    text = """
    memory: {store: redis, url: "redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0?cluster=${USER_TAG}"}
    routes:
      a: {provider: openai, apiKey: "${OPENAI_KEY}", baseUrl: "https://user:${TENANT_TOKEN}@api.example/v1"}
      b: {provider: openai, baseUrl: "ftp://user:${TEAM_HEADER}@api.example/v1"}
      c: {provider: openai, apiKey: k, weight: "${GATEWAY_KEY}"}
      d: {provider: openai, apiKey: k, baseUrl: "https://api.example/v1/${TENANT_TOKEN}?x=1"}
    """
    code = check_config(tmp_path, text)
    out, err = capsys.readouterr()
    assert code == 2
    for value in SECRETS.values():
        assert value not in out + err
    assert "routes.a.baseUrl: must not carry credentials" in err
    assert "routes.b.baseUrl: must be an http(s) URL, got 'ftp://***@api.example/v1'" in err
    assert "routes.c.weight: must be a number, got '${GATEWAY_KEY}'" in err
    assert "https://api.example/v1/${TENANT_TOKEN}?x=1" in err
    assert "memory.url: query option 'cluster'" in err


def test_numbers_and_booleans_from_the_environment_are_settings_not_secrets() -> None:
    # shown in errors as they are: masking '1' or 'true' everywhere would garble every message
    with pytest.raises(ConfigError) as caught:
        parse_config("routes: {m: {provider: mock, timeout: '${T}', weight: '${W}'}}", env={"T": "-5", "W": "true"})
    assert "routes.m.timeout: must be > 0, got -5" in caught.value.errors
    assert "routes.m.weight: must be a number, got a boolean" in caught.value.errors


def test_the_configs_repr_carries_no_secret() -> None:
    config = parse_config(
        "memory: {store: redis, url: 'redis://:pw-0009@h:6379/0'}\n"
        "breakers: {store: redis, url: 'redis://:pw-0010@h:6379/1'}\n"
        "routes: {m: {provider: openai, apiKey: sk-0011, baseUrl: 'https://h/v1/${TOKEN}', headers: {x-key: '${TOKEN}'}}}",
        env={"TOKEN": "tok-0012"},
    )
    shown = repr(config)
    assert not {"pw-0009", "pw-0010", "sk-0011", "tok-0012"} & set(re.findall(r"[\w-]+", shown))
    assert "base_url='https://h/v1/${TOKEN}'" in shown


@pytest.mark.parametrize("token", ["tenantsecret42\n", "tenant\tsecret42", "tenantsecret42\x00", "tenant'secret\"42\r\n"])
def test_a_value_with_control_characters_is_shown_as_its_reference_in_errors(token: str) -> None:
    """A token read from a file keeps its newline: the error quotes the URL with repr, escapes and all."""
    with pytest.raises(ConfigError) as caught:
        parse_config("routes:\n  a: {provider: openai, baseUrl: 'http://h/v1/${TOK}/x'}\n", env={"TOK": token})
    told = "\n".join(caught.value.errors)
    assert "secret" not in told and "${TOK}" in told, told

