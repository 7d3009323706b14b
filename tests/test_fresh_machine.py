"""What a fresh machine needs: the packaged default config, `--version`, every import declared."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import openai
import pytest

from gateway.cli import main as cli
from tests.support.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run([sys.executable, "-m", "gateway", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"gateway {metadata.version('gateway')}"


def test_the_packaged_default_is_the_checkouts_offline_default() -> None:
    assert Path(cli.PACKAGED_CONFIG).is_file()
    assert (ROOT / "configs" / "gateway.yaml").resolve() == Path(cli.PACKAGED_CONFIG).resolve()


def test_the_wheel_ships_the_default_config(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("gateway-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "gateway/default.yaml" in archive.namelist()


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """A working directory with no configs/ in it."""
    workdir = tmp_path / "anywhere"
    workdir.mkdir()
    yield workdir


def test_serve_with_no_config_anywhere_runs_the_packaged_offline_default(elsewhere: Path) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_CONFIG"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port", str(port), "--log-format", "text"],
        cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for_port(port, process, timeout=60)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(model="mock-1", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content is not None and "Mock reply" in reply.choices[0].message.content
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=60)
    started = next(line for line in output.decode().splitlines() if " listening on " in line)
    assert started.endswith(f"from {Path(cli.PACKAGED_CONFIG).resolve()}"), started


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalized(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])


def _declared_closure() -> set[str]:
    """The distributions pyproject.toml names (all extras) and everything they require in turn."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    todo = [_requirement_name(r) for r in wanted]
    closure: set[str] = set()
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            todo += [_requirement_name(r) for r in metadata.requires(name) or [] if "extra ==" not in r]
        except metadata.PackageNotFoundError:
            continue
    return closure


def test_every_third_party_import_comes_from_a_declared_dependency() -> None:
    """A package installed here by hand but declared nowhere would fail the README's command on a fresh machine."""
    closure = _declared_closure()
    providers = {module: {_normalized(d) for d in dists} for module, dists in metadata.packages_distributions().items()}
    own = {path.name for path in ROOT.iterdir() if path.is_dir()}
    own |= {path.stem for path in (ROOT / "bench").glob("*.py")}  # bench's scripts import their neighbours
    undeclared: dict[str, str] = {}
    for folder in ("gateway", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top in own:
                        continue
                    if not providers.get(top, set()) & closure:
                        undeclared.setdefault(top, str(path.relative_to(ROOT)))
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
