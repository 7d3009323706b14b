"""The generated pages (gateway.cli.reference.pages): the four paths the docs' nav names, each written."""

from __future__ import annotations

from gateway.cli.reference.markdown import GENERATED
from gateway.cli.reference.pages import write_pages


def test_the_four_reference_pages_are_written() -> None:
    pages = write_pages()
    assert list(pages) == ["reference/config.md", "reference/cli.md", "reference/metrics.md", "reference/endpoints.md"]
    assert all(page.startswith(GENERATED) and "\n# " in page for page in pages.values())
