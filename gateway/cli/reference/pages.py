"""The generated reference pages, by their path in the docs: what the MkDocs hook (docs/hooks/reference.py) writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from gateway.cli.reference.commands import cli_page
from gateway.cli.reference.config_keys import config_page
from gateway.cli.reference.endpoints import endpoints_page
from gateway.cli.reference.metrics import metrics_page

PAGES: Final[Mapping[str, Callable[[], str]]] = {
    "reference/config.md": config_page,
    "reference/cli.md": cli_page,
    "reference/metrics.md": metrics_page,
    "reference/endpoints.md": endpoints_page,
}


def write_pages() -> dict[str, str]:
    """Each reference page's Markdown by its path; Undescribed (naming every gap) when the code lacks a description."""
    return {path: write() for path, write in PAGES.items()}
