"""gateway.observe.metrics.shared: the directory the workers' metric files live in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.observe.metrics.shared import MULTIPROC_ENV, multiprocess_dir, workers_share_files


def test_the_directory_is_named_in_the_environment_while_it_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    assert not workers_share_files()
    with multiprocess_dir() as folder:
        assert folder.is_dir() and os.environ[MULTIPROC_ENV] == str(folder)
        assert workers_share_files()
        (folder / "counter_1.db").write_bytes(b"")
    assert not folder.exists()
    assert MULTIPROC_ENV not in os.environ


def test_a_directory_named_before_is_named_again_after(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    with multiprocess_dir() as folder:
        assert os.environ[MULTIPROC_ENV] == str(folder) != str(tmp_path)
    assert os.environ[MULTIPROC_ENV] == str(tmp_path)
