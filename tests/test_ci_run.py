"""The test files .ci/run names for its pass on aiohttp's public API alone exist, and include both fallbacks' own tests."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doc_blocks import ROOT

CI_RUN = ROOT / ".ci" / "run"
INTERNALS_TESTS = {"tests/server/test_aiohttp_internals.py", "tests/upstream/test_aiohttp_internals.py"}
SWITCHED_OFF_RUN = "GATEWAY_AIOHTTP_INTERNALS=off pytest"


def listed(variable: str) -> list[str]:
    """The entries (paths or globs) of the double-quoted list .ci/run assigns to `variable`."""
    found = re.search(rf'^{variable}="([^"$`]*)"$', CI_RUN.read_text(), re.MULTILINE)
    assert found is not None, f'no {variable}="..." in .ci/run'
    return found.group(1).split()


def is_test_file(path: Path) -> bool:
    """Whether `path` is a file pytest collects tests from."""
    return path.is_file() and path.name.startswith("test_") and path.suffix == ".py"


def test_every_entry_of_the_fallback_pass_names_test_files() -> None:
    entries = listed("fallback_tests")
    assert entries
    for entry in entries:
        matched = sorted(ROOT.glob(entry))
        assert matched, f"{entry} (fallback_tests in .ci/run) matches no file"
        assert all(is_test_file(path) for path in matched), entry


def test_the_fallback_pass_runs_both_aiohttp_internals_modules_tests_with_the_switch_off() -> None:
    matched = [path for entry in listed("fallback_tests") for path in ROOT.glob(entry)]
    files = {path.relative_to(ROOT).as_posix() for path in matched}
    assert files >= INTERNALS_TESTS
    runs = [line for line in CI_RUN.read_text().splitlines() if line.startswith(SWITCHED_OFF_RUN)]
    assert len(runs) == 1 and runs[0].endswith(" $fallback_tests")
