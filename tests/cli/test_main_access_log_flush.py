"""`gateway serve --access-log-flush`: the interval reaches serve, with or without workers; a negative one is refused."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.cli import main as cli


def test_the_flush_interval_flag_reaches_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[dict[str, Any]] = []
    monkeypatch.setattr(cli, "serve", lambda *args, **options: given.append(options))
    monkeypatch.setattr(cli, "serve_workers", lambda *args, **options: given.append(options) or 0)
    cli.main(["serve", "--access-log-flush", "0"])
    cli.main(["serve", "--workers", "2", "--access-log-flush", "2.5"])
    cli.main(["serve"])
    assert [options["access_log_flush"] for options in given] == [0.0, 2.5, 0.5]


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_negative_flush_interval_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "--access-log-flush", value])
    assert caught.value.code == 2
    assert "--access-log-flush must be >= 0" in capsys.readouterr().err
