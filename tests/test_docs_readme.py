"""The README stays a short front page: its two commands first, the docs build in CI, links that resolve."""

from __future__ import annotations

import re
import tomllib

from tests.support.doc_blocks import ROOT, blocks_of

README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def marked_command(marker: str) -> str:
    """The command in the `sh` block right after `<!-- marker -->`, as .ci/run reads it."""
    lines = README.read_text().splitlines()
    at = lines.index(f"<!-- {marker} -->")
    assert lines[at + 1] == "```sh"
    return lines[at + 2]


def test_the_readme_is_at_most_150_lines() -> None:
    assert len(README.read_text().splitlines()) <= 150


def test_the_readme_opens_with_the_run_and_test_commands() -> None:
    text = README.read_text()
    first_section = text.index("\n## ")
    assert text.index("<!-- run-command -->") < text.index("<!-- test-command -->") < first_section
    assert marked_command("run-command") == "pip install . && gateway serve"


def test_the_test_command_installs_and_builds_the_docs() -> None:
    command = marked_command("test-command")
    extras = re.search(r"pip install -e '\.\[([\w,]+)\]'", command)
    assert extras is not None and {"test", "docs"} <= set(extras.group(1).split(","))
    for step in ("ruff check .", "mypy", "lint-imports", "mkdocs build --strict", "pytest"):
        assert step in command
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert any(requirement.startswith("mkdocs-material") for requirement in declared)


def test_every_relative_link_in_the_readme_names_a_file_that_exists() -> None:
    targets = [target for target in _LINK.findall(README.read_text()) if "://" not in target]
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_the_readme_shows_an_example_of_routing_memory_and_monitoring() -> None:
    sections = {block.text for block in blocks_of(README)}
    assert any("strategy:" in text for text in sections)
    assert any("memoryId" in text for text in sections)
    assert any("/metrics" in text for text in sections)
