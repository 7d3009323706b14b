"""check-config's tree of a route (gateway.cli.describe): inherited settings resolved, secrets left out."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.cli.describe import describe_route
from gateway.cli.main import main
from gateway.config.loader import parse_config
from tests.support.secret_env import CONFIG, SECRETS, check_config, set_secrets


def test_check_config_prints_resolved_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        """
routes:
  smart:
    strategy: {mode: fallback, onStatusCodes: [429]}
    overrideParams: {temperature: 0.3}
    timeout: 12
    targets:
      - {name: primary, provider: openai, apiKey: sk-hidden, overrideParams: {model: gpt-4o}}
      - strategy: {mode: loadbalance}
        targets: [{provider: mock, weight: 3}, {provider: mock, weight: 1}]
"""
    )
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sk-hidden" not in out
    lines = out.splitlines()
    assert lines[2] == "  - fallback smart: weight=1 onStatusCodes=[429]"
    assert lines[3].startswith("    - target primary: provider=openai weight=1 baseUrl=https://api.openai.com/v1 apiKey=set timeout=12s")
    assert "overrideParams={'temperature': 0.3, 'model': 'gpt-4o'}" in lines[3]
    assert lines[4] == "    - loadbalance smart.targets[1]: weight=1"
    assert lines[5].startswith("      - target smart.targets[1].targets[0]: provider=mock weight=3")
    assert "overrideParams={'temperature': 0.3}" in lines[5] and "timeout=12s" in lines[5]


def test_check_config_shows_references_not_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_secrets(monkeypatch)
    code = check_config(tmp_path, CONFIG)
    out, err = capsys.readouterr()
    assert code == 0, err
    for value in SECRETS.values():
        assert value not in out + err
        assert value.rstrip("/") not in out + err
    assert "baseUrl=https://api.example/v1/${TENANT_TOKEN}/x" in out
    assert "baseUrl=${WHOLE_URL}" in out
    assert "'user': '${USER_TAG}'" in out
    assert "'tags': ['${USER_TAG}', 'plain']" in out
    assert "'model': 'gpt-4o'" in out  # a default written in the file is no secret



def test_a_route_is_described_with_its_memory_and_each_target_without_secrets() -> None:
    config = parse_config(
        textwrap.dedent(
            """
            memory: {defaults: {memoryType: token_window, maxMessages: 8, maxTokens: 900}}
            routes:
              r:
                provider: openai
                baseUrl: "https://api.example/v1/${TOKEN}"
                headers: {x-team: "${TOKEN}", x-b: plain}
                overrideParams: {user: "${TOKEN}", metadata: {url: "https://u:pw@h.example/${TOKEN}"}}
                retry: {attempts: 2, onStatusCodes: [503, 429]}
            """
        ),
        env={"TOKEN": "tok-0001"},
    )
    lines = list(describe_route(config.routes["r"]))
    assert lines[0] == "r  (memory defaults: token_window, maxMessages=8, maxTokens=900)"
    assert lines[1] == (
        "  - target r: provider=openai weight=1 baseUrl=https://api.example/v1/${TOKEN} apiKey=none"
        " timeout=600s streamIdleTimeout=120s retry=2x on [429, 503]"
        " overrideParams={'user': '${TOKEN}', 'metadata': {'url': 'https://***@h.example/${TOKEN}'}}"
        " headers=['x-b', 'x-team']"
    )
    assert len(lines) == 2 and not any("tok-0001" in line or "pw" in line for line in lines)
