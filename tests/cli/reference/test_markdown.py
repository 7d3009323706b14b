"""Markdown for the reference pages (gateway.cli.reference.markdown): cells that survive any text, gaps named."""

from __future__ import annotations

import pytest

from gateway.cli.reference.markdown import Undescribed, cell, code, require_descriptions, table


def test_a_cell_keeps_its_row_whatever_the_text() -> None:
    assert cell("a | b\n  c") == "a \\| b c"
    assert table(("x", "y"), [[cell("1|2"), "3"]]).splitlines() == ["| x | y |", "|---|---|", "| 1\\|2 | 3 |"]


def test_inline_code_fences_around_backticks() -> None:
    assert code("--port PORT") == "`--port PORT`"
    assert code("a`b") == "`` a`b ``"


def test_every_missing_description_is_named_at_once() -> None:
    with pytest.raises(Undescribed) as caught:
        require_descriptions([("server.port", "Port to listen on."), ("server.host", ""), ("routes", None), ("x", "  ")])
    assert caught.value.missing == ("server.host", "routes", "x")
    assert "server.host, routes, x" in str(caught.value)
    require_descriptions([("ok", "described")])
