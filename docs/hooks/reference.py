"""MkDocs hook: adds the reference pages written from the code (gateway.cli.reference) to the site.

Registered in mkdocs.yml under `hooks:`. The pages exist only in the build: a hand-written file
at one of their paths, or anything the code leaves undescribed, fails the build.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from gateway.cli.reference.markdown import Undescribed
from gateway.cli.reference.pages import write_pages


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add reference/config.md, cli.md, metrics.md and endpoints.md, generated now."""
    try:
        pages = write_pages()
    except Undescribed as exc:
        raise PluginError(f"reference pages: {exc}") from None
    for path, content in pages.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"docs/{path} is generated from the code at build time; remove the file")
        files.append(File.generated(config, path, content=content))
    return files
