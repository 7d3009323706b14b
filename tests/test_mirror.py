"""The tests mirror the package: a test module for each module with logic, and no test directory without its package.

A module gateway/<path>/<stem>.py is tested by tests/<path>/test_<stem>.py or by modules
tests/<path>/test_<stem>_<aspect>.py, in the same relative directory (a test module counts for
the longest module name it starts with). `__init__.py` files are
left out. tests/support (shared helpers), tests/clients (the clients as users run them) and
the top level of tests/ (repo-wide checks: architecture, fresh machine, deploy, start-up...)
mirror nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gateway"
TESTS = ROOT / "tests"

# Modules without logic of their own, so without a test module; each says why.
EXEMPT = {
    "__main__.py": "two lines that run cli.main (tested in tests/cli)",
    "observe/metrics/families.py": "Protocols only: the interface the back-ends share",
    "observe/metrics/series.py": "data only: bucket bounds and the frozen definition of each series",
}
OWN_DIRECTORIES = ("support", "clients")  # below tests/, mirroring nothing


def untested_modules(package: Path, tests: Path, *, exempt: Collection[str] = ()) -> list[str]:
    """The modules of `package` (paths relative to it) with no test module in their mirror directory under `tests`.

    A test module counts for the longest module name it starts with: tests/memory/test_sqlite_cache.py
    tests memory/sqlite_cache.py, not memory/sqlite.py.
    """
    missing = []
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package)
        if module.name == "__init__.py" or relative.as_posix() in exempt:
            continue
        siblings = [path.stem for path in module.parent.glob("*.py")]
        tested = {module_named_by(test.stem, siblings) for test in (tests / relative.parent).glob("test_*.py")}
        if module.stem not in tested:
            missing.append(relative.as_posix())
    return missing


def module_named_by(test: str, modules: Collection[str]) -> str | None:
    """The module a test module is named for: test_<stem>.py or test_<stem>_<aspect>.py, the longest such stem."""
    named = test.removeprefix("test_")
    return max((stem for stem in modules if named == stem or named.startswith(f"{stem}_")), key=len, default=None)


def homeless_tests(package: Path, tests: Path, *, own: Collection[str] = OWN_DIRECTORIES) -> list[str]:
    """The test modules (paths relative to `tests`) in a directory below it that mirrors no directory of `package`."""
    stray = []
    for directory in sorted(path for path in tests.iterdir() if path.is_dir() and path.name not in own):
        for test in sorted(directory.rglob("test_*.py")):
            relative = test.relative_to(tests)
            if not (package / relative.parent).is_dir():
                stray.append(relative.as_posix())
    return stray


def part_of(module: str) -> str:
    """The layer a module path belongs to: its first directory, or "top" for gateway/<stem>.py."""
    head, _, rest = module.partition("/")
    return head if rest else "top"


LAYERS = sorted(path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file())


@pytest.mark.parametrize("layer", [*LAYERS, "top"])
def test_every_module_with_logic_has_a_mirrored_test_module(layer: str) -> None:
    missing = [module for module in untested_modules(PACKAGE, TESTS, exempt=EXEMPT) if part_of(module) == layer]
    assert not missing, f"no tests/<path>/test_<stem>[_<aspect>].py for: {missing}"


def test_every_test_directory_mirrors_a_package_directory() -> None:
    stray = homeless_tests(PACKAGE, TESTS)
    assert not stray, f"in a tests/ directory with no gateway/ counterpart: {stray}"


def test_every_exemption_names_a_module() -> None:
    assert not [module for module in EXEMPT if not (PACKAGE / module).is_file()]


# The checks themselves, on made-up trees.


def make_tree(root: Path, *files: str) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")


def test_a_module_is_tested_by_its_name_or_an_aspect_of_it_in_its_mirror_directory(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        "gateway/__init__.py", "gateway/tokens.py", "gateway/__main__.py",
        "gateway/core/__init__.py", "gateway/core/routing.py", "gateway/core/sse.py", "gateway/core/hosts.py",
        "tests/test_tokens.py", "tests/core/test_routing.py", "tests/core/test_sse_limits.py",
        "tests/test_hosts.py",  # the right name in the wrong directory
    )  # fmt: skip
    package, tests = tmp_path / "gateway", tmp_path / "tests"
    assert untested_modules(package, tests) == ["__main__.py", "core/hosts.py"]
    assert untested_modules(package, tests, exempt={"__main__.py"}) == ["core/hosts.py"]


def test_a_test_module_counts_for_the_longest_module_name_it_starts_with(tmp_path: Path) -> None:
    make_tree(tmp_path, "gateway/memory/sqlite.py", "gateway/memory/sqlite_cache.py", "tests/memory/test_sqlite_cache.py")
    assert untested_modules(tmp_path / "gateway", tmp_path / "tests") == ["memory/sqlite.py"]
    make_tree(tmp_path, "tests/memory/test_sqlite_state.py")  # an aspect of sqlite, no module of its own
    assert untested_modules(tmp_path / "gateway", tmp_path / "tests") == []
    assert module_named_by("test_sqlite_cache_sizes", ["sqlite", "sqlite_cache"]) == "sqlite_cache"
    assert module_named_by("test_agent_bodies", ["sqlite"]) is None


def test_a_test_outside_the_mirror_is_found_unless_at_the_top_or_in_support_or_clients(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        "gateway/core/translate/reshape.py", "gateway/upstream/providers/mock.py",
        "tests/test_architecture.py", "tests/support/test_helpers.py", "tests/clients/test_node.py",
        "tests/core/translate/test_reshape.py", "tests/upstream/providers/test_mock.py",
        "tests/translate/test_reshape.py", "tests/providers/test_mock.py", "tests/core/translate/old/test_x.py",
    )  # fmt: skip
    assert homeless_tests(tmp_path / "gateway", tmp_path / "tests") == [
        "core/translate/old/test_x.py", "providers/test_mock.py", "translate/test_reshape.py",
    ]  # fmt: skip


def test_a_module_belongs_to_its_layer_and_a_top_level_one_to_top() -> None:
    assert [part_of(module) for module in ("core/memory/plain.py", "server/app.py", "tokens.py")] == ["core", "server", "top"]
