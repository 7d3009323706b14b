"""The docs' reference pages are written from the code at build time, and every key, flag, metric and endpoint is described.

The pages' own modules are tested in tests/cli/reference; this runs them on the real code,
and the MkDocs hook (docs/hooks/reference.py) in a real build.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli.parser import command_line
from gateway.cli.reference import commands, config_keys, endpoints, metrics
from gateway.config.json_schema import config_json_schema

ROOT = Path(__file__).resolve().parent.parent
HOOK = ROOT / "docs" / "hooks" / "reference.py"


def test_every_config_key_has_a_description() -> None:
    assert config_keys.undescribed(config_keys.sections()) == []


def test_the_configuration_page_names_every_top_level_section() -> None:
    """docs/configuration.md's table of sections, each with its page: none left out (limits once was)."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    sections = [key for key in config_json_schema()["properties"] if "_" not in key]  # snake_case: aliases
    assert sections and [key for key in sections if f"| `{key}` |" not in page] == []


def test_every_command_and_flag_has_help() -> None:
    assert [name for name, text in commands.undescribed(command_line()) if not text] == []


def test_every_metric_and_label_has_a_description() -> None:
    assert [name for name, text in metrics.undescribed() if not text] == []


def test_every_endpoint_and_its_errors_have_a_description() -> None:
    assert [name for name, text in endpoints.undescribed(endpoints.described_routes()) if not text] == []


def build(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(project / "site")],
        cwd=project, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A docs project with the hook and the four reference pages in its nav, and a page linking into them."""
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Docs\n\n[keys](reference/config.md#routes-name-retry), [cli](reference/cli.md), "
        "[metrics](reference/metrics.md), [endpoints](reference/endpoints.md)\n"
    )
    (tmp_path / "mkdocs.yml").write_text(
        f"site_name: test\nhooks: [{HOOK}]\nmarkdown_extensions: [attr_list, tables, toc]\n"
        "validation: {links: {anchors: warn}}\n"
        "nav:\n  - index.md\n  - reference/config.md\n  - reference/cli.md\n  - reference/metrics.md\n  - reference/endpoints.md\n"
    )
    return tmp_path


def test_the_hook_adds_the_pages_to_a_strict_build(project: Path) -> None:
    built = build(project)
    assert built.returncode == 0, built.stderr
    for page in ("config", "cli", "metrics", "endpoints"):
        assert (project / "site" / "reference" / page / "index.html").is_file()
    assert "gateway_requests_total" in (project / "site" / "reference" / "metrics" / "index.html").read_text()


def test_a_hand_written_reference_page_fails_the_build(project: Path) -> None:
    (project / "docs" / "reference").mkdir()
    (project / "docs" / "reference" / "cli.md").write_text("# By hand\n")
    built = build(project)
    assert built.returncode != 0
    assert "reference/cli.md is generated from the code" in built.stderr
