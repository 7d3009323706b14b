"""Markdown as the reference pages need it: tables whose cells survive any text, and inline code."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

GENERATED = "<!-- Generated from the code by gateway.cli.reference at docs build time: do not edit. -->"


class Undescribed(ValueError):
    """Something the reference lists has no description in the code; the message names each."""

    def __init__(self, missing: Sequence[str]) -> None:
        super().__init__(f"no description in the code for: {', '.join(missing)}")
        self.missing = tuple(missing)


def cell(text: str) -> str:
    """`text` fit for a table cell: pipes escaped, line breaks as spaces."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as inline code in a table cell (doubled backticks when it holds one)."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{cell(text)}{pad}{fence}"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table: `headers`, then one line per row (cells as given, already fit)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def require_descriptions(found: Iterable[tuple[str, str | None]]) -> None:
    """Raise Undescribed naming every `(name, description)` pair whose description is empty."""
    missing = [name for name, description in found if not (description or "").strip()]
    if missing:
        raise Undescribed(missing)
