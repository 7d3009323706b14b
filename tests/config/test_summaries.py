"""check-config on summary windows: summaryRoute names another route, maxTokens is given, summaryMaxTokens is positive."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config.loader import ConfigError, parse_config
from gateway.core.memory.settings import MemoryType

ROUTES = """
routes:
  chat:
    provider: mock{chat}
  cheap:
    provider: mock{cheap}
"""


def problems(memory: str = "", chat: str = "", cheap: str = "") -> list[str]:
    """The config's problems (none when it loads)."""
    text = memory + ROUTES.format(chat=f"\n    memory: {{{chat}}}" if chat else "", cheap=f"\n    memory: {{{cheap}}}" if cheap else "")
    try:
        parse_config(text)
    except ConfigError as exc:
        return list(exc.errors)
    return []


def test_a_summary_window_loads_with_its_settings() -> None:
    config = parse_config(
        "memory: {defaults: {maxTokens: 3000}}"
        + ROUTES.format(chat="\n    memory: {memoryType: summary_window, summaryRoute: cheap, summaryMaxTokens: 300}", cheap="")
    )
    memory = config.routes["chat"].memory
    assert (memory.memory_type, memory.max_tokens, memory.summary_route, memory.summary_max_tokens) == (
        MemoryType.SUMMARY_WINDOW, 3000, "cheap", 300,
    )  # fmt: skip
    assert config.routes["cheap"].memory.summary_route is None


@pytest.mark.parametrize(
    ("memory", "chat", "cheap", "expected"),
    [
        ("", "memoryType: summary_window, maxTokens: 100", "",
         ["routes.chat.memory.summaryRoute: is required with memoryType summary_window (the route that writes summaries)"]),
        ("", "memoryType: summary_window, summaryRoute: cheap", "",
         ["routes.chat.memory.maxTokens: is required with memoryType summary_window (the kept window's tokens)"]),
        ("", "memoryType: summary_window, maxTokens: 100, summaryRoute: nowhere", "",
         ["routes.chat.memory.summaryRoute: no route named 'nowhere' (routes: chat, cheap)",
          ]),
        ("", "memoryType: summary_window, maxTokens: 100, summaryRoute: chat", "",
         ["routes.chat.memory.summaryRoute: names its own route 'chat': name another route (a cheaper model, say)"]),
        ("", "memoryType: token_window, summaryRoute: gone", "",
         ["routes.chat.memory.summaryRoute: no route named 'gone' (routes: chat, cheap)"]),
        ("memory: {defaults: {memoryType: summary_window, maxTokens: 100}}\n", "", "",
         ["memory.defaults.summaryRoute: is required with memoryType summary_window (the route that writes summaries)"]),
        ("memory: {defaults: {memoryType: summary_window, maxTokens: 100, summaryRoute: cheap}}\n", "", "",
         ["routes.cheap: inherits memoryType summary_window from memory.defaults, whose summaryRoute is this route: give "
          "it a memory window of its own (another memoryType, or another summaryRoute)"]),
    ],
)  # fmt: skip
def test_bad_summary_settings_are_named_by_their_path(memory: str, chat: str, cheap: str, expected: list[str]) -> None:
    assert problems(memory, chat, cheap) == expected


def test_routes_may_inherit_a_summary_window_that_another_route_writes() -> None:
    defaults = "memory: {defaults: {memoryType: summary_window, maxTokens: 100, summaryRoute: cheap}}\n"
    assert problems(defaults, cheap="memoryType: token_window") == []
    assert problems(defaults, chat="maxTokens: 50", cheap="memoryType: message_window") == []


def test_summary_max_tokens_must_be_positive() -> None:
    found = problems(chat="memoryType: summary_window, maxTokens: 100, summaryRoute: cheap, summaryMaxTokens: 0")
    assert len(found) == 1 and found[0].startswith("routes.chat.memory.summaryMaxTokens: must be")


def test_check_config_refuses_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "summary.yaml"
    path.write_text(ROUTES.format(chat="\n    memory: {memoryType: summary_window, summaryRoute: chat}", cheap=""))
    with pytest.raises(SystemExit) as caught:
        main(["check-config", str(path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "routes.chat.memory.summaryRoute: names its own route 'chat'" in err
    assert "routes.chat.memory.maxTokens: is required with memoryType summary_window" in err
