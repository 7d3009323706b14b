"""Commands that print (gateway.cli.main: schema, check-config) whose reader leaves early, as `| head` does: exit 0, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [["schema"], ["check-config", "configs/gateway.yaml"]])
def test_a_reader_that_leaves_early_is_no_error(command: list[str]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # gone before the command writes: every write meets a closed pipe
    errors = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, errors
    assert "Traceback" not in errors and "BrokenPipeError" not in errors
