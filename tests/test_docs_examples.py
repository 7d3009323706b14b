"""The documentation's examples work: configurations pass check-config, code runs against the mock.

Every `yaml` block of the README and docs/, and every file in configs/examples/, passes
`gateway check-config` with a placeholder for each `${VAR}`. Every `python` block, and every `sh`
block that calls the gateway at localhost:8080, runs against a real `gateway serve` on the
offline default and must exit 0, printing what its `<!-- output: ... -->` lines say. Every `json`
block parses. A block in any other language than these and `text` fails, unless marked
`<!-- example: not-run -->`; blocks marked so or `<!-- example: needs-provider -->` are skipped
by design (docs/contributing.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.cli import main as cli
from tests.support.doc_blocks import ROOT, Block, Mark, all_blocks, blocks_of, unknown_language
from tests.support.servers import free_port, wait_for_port

GATEWAY = "localhost:8080"
MOCK_ROUTES = "routes: {mock-1: {provider: mock}}\n"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")

BLOCKS = all_blocks()
CONFIGS = [block for block in BLOCKS if block.language == "yaml"]
JSON_BLOCKS = [block for block in BLOCKS if block.language == "json"]
PROGRAMS = [
    block
    for block in BLOCKS
    if block.language == "python" or (block.language == "sh" and GATEWAY in block.text)
]
EXAMPLE_FILES = sorted((ROOT / "configs" / "examples").glob("*.yaml"))


def placeholder(name: str) -> str:
    """A value for the environment variable `name` of the kind its name says it holds."""
    if name.endswith("SHA256"):
        return "0" * 64
    if name.startswith("REDIS") and name.endswith("URL"):
        return "redis://127.0.0.1:6379/0"
    if name.endswith("URL"):
        return "http://127.0.0.1:8000/v1"
    if name.endswith("HOST"):
        return "127.0.0.1"
    return "placeholder-secret"


def check_config(
    text: str, tmp_path: Path, *, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fail with check-config's own output unless `text` passes it."""
    for name in _VARIABLE.findall(text):
        monkeypatch.setenv(name, placeholder(name))
    loaded = yaml.safe_load(text)
    if isinstance(loaded, dict) and "routes" not in loaded:  # a section shown on its own
        text += MOCK_ROUTES
    path = tmp_path / "example.yaml"
    path.write_text(text)
    try:
        status = cli.main(["check-config", str(path)])
    except SystemExit as refused:  # check-config exits 2 with each error printed
        status = refused.code
    printed = capsys.readouterr()
    assert status == 0, f"check-config refused it:\n{printed.out}{printed.err}\n--- the block:\n{text}"


def skip_if_marked(block: Block) -> None:
    if block.mark is not None:
        pytest.skip(f"marked {block.mark}: skipped by design")


@pytest.mark.parametrize("block", CONFIGS, ids=[block.where for block in CONFIGS])
def test_a_configuration_block_passes_check_config(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skip_if_marked(block)
    check_config(block.text, tmp_path, monkeypatch=monkeypatch, capsys=capsys)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[path.name for path in EXAMPLE_FILES])
def test_an_example_configuration_passes_check_config(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    check_config(path.read_text(), tmp_path, monkeypatch=monkeypatch, capsys=capsys)


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=[block.where for block in JSON_BLOCKS])
def test_a_json_block_parses(block: Block) -> None:
    skip_if_marked(block)
    json.loads(block.text)


def test_every_block_is_in_a_language_the_tests_know() -> None:
    assert unknown_language(BLOCKS) == []


def test_a_block_in_an_unknown_language_is_found_unless_marked_not_run(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```toml\na = 1\n```\n\n```yml\nroutes: {}\n```\n\n<!-- example: not-run -->\n```js\nx()\n```\n")
    blocks = list(blocks_of(page, root=tmp_path))
    assert [block.language for block in blocks] == ["toml", "yaml", "js"]
    assert unknown_language(blocks) == ["page.md:1 (toml)"]
    assert blocks[2].mark is Mark.NOT_RUN


def test_the_documentation_has_examples_of_each_kind() -> None:
    """The collection itself works: a parser that found nothing would pass every test above."""
    assert len(CONFIGS) >= 5
    assert len(EXAMPLE_FILES) >= 3
    assert {block.language for block in PROGRAMS} == {"python", "sh"}
    assert any(block.output for block in PROGRAMS)


@pytest.fixture(scope="module")
def mock_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`gateway serve` on the packaged offline default, in a directory of its own; yields its port."""
    workdir = tmp_path_factory.mktemp("docs-gateway")
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_CONFIG"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", cli.PACKAGED_CONFIG,
         "--host", "127.0.0.1", "--port", str(port), "--log-format", "text"],
        cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process, timeout=60)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.parametrize("block", PROGRAMS, ids=[block.where for block in PROGRAMS])
def test_an_example_runs_against_the_mock(block: Block, mock_gateway: int, tmp_path: Path) -> None:
    skip_if_marked(block)
    code = block.text.replace(GATEWAY, f"127.0.0.1:{mock_gateway}")
    if block.language == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    missing = [line for line in block.output if line not in done.stdout]
    assert not missing, f"{block.where} did not print {missing}:\n{done.stdout}"
