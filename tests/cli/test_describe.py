"""check-config's tree of a route (gateway.cli.describe): inherited settings resolved, secrets left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import main


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

