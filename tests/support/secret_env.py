"""A config whose keys, tokens, headers and URLs come from the environment, to show none of them is ever shown."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateway.cli.main import main

SECRETS = {
    "OPENAI_KEY": "sk-env-key-0001",
    "TENANT_TOKEN": "tenant-token-0002",
    "USER_TAG": "user-tag-0003",
    "TEAM_HEADER": "team-header-0004",
    "REDIS_PASSWORD": "redis-pass-0005",
    "GATEWAY_KEY": "gw-key-0006",
    "WHOLE_URL": "https://whole.example/v1/path-token-0007/",
    "BACKUP_KEY": "sk-backup-0008",
}

CONFIG = """
memory: {store: redis, url: "redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0"}
auth: {keys: [{name: ops, key: "${GATEWAY_KEY}"}]}
routes:
  smart:
    strategy: {mode: fallback}
    overrideParams: {user: "${USER_TAG}", metadata: {tags: ["${USER_TAG}", plain]}}
    headers: {x-team: "${TEAM_HEADER}"}
    targets:
      - name: primary
        provider: openai
        apiKey: ${OPENAI_KEY}
        baseUrl: https://api.example/v1/${TENANT_TOKEN}/x
      - name: backup
        provider: openai
        apiKey: "${BACKUP_KEY:-unused}"
        baseUrl: ${WHOLE_URL}
        overrideParams: {model: "gpt-${MISSING:-4o}"}
"""


def set_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put SECRETS in the environment (and MISSING out of it), as a process reading CONFIG would find them."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MISSING", raising=False)


def check_config(tmp_path: Path, text: str) -> int | str | None:
    """check-config's exit code on `text`."""
    path = tmp_path / "g.yaml"
    path.write_text(textwrap.dedent(text))
    try:
        return main(["check-config", str(path)])
    except SystemExit as exit_:
        return exit_.code
