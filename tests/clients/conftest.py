"""Clients other than openai-python, driving a real gateway over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.node import NODE_DIR, agent_cli, installed


@pytest.fixture(scope="session")
def node_client() -> Path:
    """tests/clients/node/client.mjs with openai-node installed beside it (npm ci on first use)."""
    installed("openai")
    return NODE_DIR / "client.mjs"


@pytest.fixture(scope="session")
def claude_code() -> Path:
    """Claude Code (@anthropic-ai/claude-code, pinned in node/package.json), installed on first use."""
    return agent_cli("claude")


@pytest.fixture(scope="session")
def codex_cli() -> Path:
    """The Codex CLI (@openai/codex, pinned in node/package.json), installed on first use."""
    return agent_cli("codex")
