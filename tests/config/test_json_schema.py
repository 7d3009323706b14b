"""`gateway schema`: the config file's JSON Schema, which every shipped config validates against as written.

Editors read it from configs/gateway.schema.json (the `# yaml-language-server: $schema=` first
line of each shipped YAML file), so that file must be what `gateway schema` prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from gateway.cli.main import main
from gateway.config.loader import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA_FILE = ROOT / "configs" / "gateway.schema.json"
SHIPPED = sorted(
    {
        *ROOT.joinpath("configs").rglob("*.yaml"),
        ROOT / "deploy" / "gateway.yaml",
        ROOT / "gateway" / "default.yaml",
    }
)
# values for the ${VAR}s the shipped files use, so that they also load
PLACEHOLDERS = {
    "OPENAI_API_KEY": "sk-x", "TEAM_A_KEY": "a", "WEB_KEY": "w", "MOBILE_KEY_SHA256": "0" * 64, "GATEWAY_KEY": "gw",
}  # fmt: skip


def printed_schema(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["schema"]) == 0
    schema: dict[str, Any] = json.loads(capsys.readouterr().out)
    return schema


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_schema_file_is_what_gateway_schema_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """Regenerate it with `gateway schema > configs/gateway.schema.json`."""
    assert json.loads(SCHEMA_FILE.read_text()) == printed_schema(capsys)
    assert SCHEMA_FILE.read_text() == json.dumps(printed_schema(capsys), indent=2) + "\n"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_shipped_config_validates_against_the_schema_and_loads(
    path: Path, validator: Draft202012Validator
) -> None:
    text = path.read_text()
    first_line = text.splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema="), first_line
    assert (path.parent / first_line.partition("$schema=")[2]).resolve() == SCHEMA_FILE
    assert [error.message for error in validator.iter_errors(yaml.safe_load(text))] == []
    assert load_config(path, env=PLACEHOLDERS).routes


def test_check_jsonschema_validates_the_shipped_configs() -> None:
    """What a CI job or an editor's command would run."""
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA_FILE), *map(str, SHIPPED)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    "text",
    [
        "routes: {r: {provider: mock}}",
        "server: {port: '${PORT:-8181}', drainSeconds: '${DRAIN}'}\nroutes: {r: {provider: mock, weight: '${W}'}}",
        "metrics: {enabled: '${METRICS:-true}'}\nroutes: {r: {strategy: {mode: '${MODE}'}, targets: [{provider: mock}]}}",
        "routes: {r: {strategy: {mode: fallback, on_status_codes: [429]}, targets: [{api_key: k, base_url: 'http://h/v1'}]}}",
        "routes: {r: {provider: mock, timeout: null, memory: {memoryType: round_window, maxRounds: 2}}}",
    ],
)
def test_the_schema_takes_what_the_loader_takes(text: str, validator: Draft202012Validator) -> None:
    env = {"DRAIN": "5", "W": "2", "MODE": "fallback"}
    parse_config(text, env=env)
    assert [error.message for error in validator.iter_errors(yaml.safe_load(text))] == []


@pytest.mark.parametrize(
    "text",
    [
        "server: {port: 70000}\nroutes: {r: {provider: mock}}",
        "server: {port: eighty}\nroutes: {r: {provider: mock}}",
        "routes: {r: {provider: mock, wieght: 2}}",
        "routes: {r: {provider: mock, weight: -1}}",
        "routes: {r: {strategy: {mode: roundrobin}, targets: [{provider: mock}]}}",
        "routes: {r: {strategy: {mode: fallback, onStatusCodes: ['${CODE}']}, targets: [{provider: mock}]}}",
        "routes: {r: {provider: mock, targets: []}}",
        "routes: {r: {provider: mock, retry: {attempts: 11}}}",
        "auth: {keys: [{key: k}]}\nroutes: {r: {provider: mock}}",
        "memory: {store: mongo}\nroutes: {r: {provider: mock}}",
        "routes: {}",
        "server: {host: h}",
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(text: str, validator: Draft202012Validator) -> None:
    with pytest.raises(ConfigError):
        parse_config(text, env={"CODE": "429"})
    assert list(validator.iter_errors(yaml.safe_load(text)))


def test_every_key_says_what_it_is_for(capsys: pytest.CaptureFixture[str]) -> None:
    schema = printed_schema(capsys)
    described = {**schema["$defs"], "ConfigFile": schema}
    for name, definition in described.items():
        assert definition.get("description"), name
        for key, value in definition.get("properties", {}).items():
            referred = value.get("$ref", "").rpartition("/")[2]
            assert value.get("description") or described.get(referred, {}).get("description"), f"{name}.{key}"
