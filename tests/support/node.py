"""The node packages pinned in tests/clients/node (openai-node, the agent CLIs): installed on first use, and run.

A package missing here skips its test, or fails it under CI (CI=true), where it must be there.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.support.gateway import GATEWAY_KEY

NODE_DIR = Path(__file__).parent.parent / "clients" / "node"


def unavailable(message: str) -> None:
    """Skip locally; under CI (CI=true) the client must be there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI must provide it", pytrace=False)
    pytest.skip(message)


def _stale() -> bool:
    """Whether a package pinned to an exact version in package.json is missing or of another version."""
    wanted = orjson.loads((NODE_DIR / "package.json").read_bytes())["dependencies"]
    for name, version in wanted.items():
        if not version[:1].isdigit():
            continue  # a range: whatever npm ci installed from the lockfile
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.is_file() or orjson.loads(manifest.read_bytes()).get("version") != version:
            return True
    return False


def installed(path: str) -> Path:
    """NODE_DIR/node_modules/`path`, after `npm ci` installed package-lock.json when it or a pin is missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        unavailable("node and npm are not installed (Debian: apt-get install nodejs npm)")
    found = NODE_DIR / "node_modules" / path
    # pytest-xdist's workers may ask at once: one runs npm ci while the others wait, then find it done
    with open(NODE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not found.exists() or _stale():
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=NODE_DIR,
                capture_output=True,
                timeout=600,
            )
            if done.returncode != 0:
                unavailable(f"npm ci failed in {NODE_DIR}: {done.stderr.decode(errors='replace')[-500:]}")
    return found


def agent_cli(name: str) -> Path:
    """The pinned agent CLI `name` (node_modules/.bin), checked to start: its native binary must fit this machine."""
    binary = installed(f".bin/{name}")
    done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=120)
    if done.returncode != 0:
        unavailable(f"{name} --version failed: {done.stderr.decode(errors='replace')[-500:]}")
    return binary


async def run_node(script: Path, client: openai.AsyncOpenAI, scenario: str, model: str, **env: str) -> Any:
    """Run one scenario of client.mjs against the gateway `client` points at; its JSON outcome.

    A subprocess, awaited without blocking: the gateway and the fake upstreams serve on this loop.
    """
    environment = {
        **os.environ,
        "GATEWAY_URL": str(client.base_url).rstrip("/"),
        "GATEWAY_KEY": GATEWAY_KEY,
        "MODEL": model,
        **env,
    }
    process = await asyncio.create_subprocess_exec(
        "node", str(script), scenario, env=environment, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode(errors="replace")
    return orjson.loads(out)
