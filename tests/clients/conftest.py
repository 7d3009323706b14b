"""Clients other than openai-python, driving a real gateway over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.node import NODE_DIR, agent_cli, installed

HERE = Path(__file__).parent
# The first of these tests in a run waits for `npm ci` too (tests/support/node.py bounds it at 600 s,
# ~800 MB on a machine without npm's cache): past the suite's five minutes, below this bound.
INSTALLING_SECONDS = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.timeout(INSTALLING_SECONDS))


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
