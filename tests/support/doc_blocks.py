"""The fenced code blocks of the documentation's Markdown pages, with the mark each one carries.

A block is marked by an HTML comment on the line before its fence, `<!-- example: needs-provider -->`
or `<!-- example: not-run -->` (docs/contributing.md says when to use which); each
`<!-- output: TEXT -->` line right after its closing fence is text its run must print. A line
that is only `--8<-- "path"` (pymdownx.snippets) is replaced by the file it names, as the site
build does. A language's other names are read as the one the tests know (`yml` as `yaml`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

_FENCE = re.compile(r"^```\s*([^\s`{]*)")  # its language, before any attributes (`title="..."`)
_MARK = re.compile(r"^<!--\s*example:\s*([\w-]+)\s*-->$")
_OUTPUT = re.compile(r"^<!--\s*output:\s*(.+?)\s*-->$")
ALIASES = {"yml": "yaml", "bash": "sh", "shell": "sh"}
# The languages the tests know what to do with: check (yaml, json), run (python, sh), or show (text).
KNOWN_LANGUAGES = frozenset({"yaml", "json", "python", "sh", "text"})
_SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"\s*$')


class Mark(StrEnum):
    """Why a block is not run: it needs a real provider, or it is not meant to run at all."""

    NEEDS_PROVIDER = "needs-provider"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its mark (None: it is checked)."""

    page: str
    line: int
    language: str
    text: str
    mark: Mark | None
    output: tuple[str, ...] = ()  # what its run must print

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def documentation_pages() -> list[Path]:
    """The README and every Markdown page under docs/ (the hooks' folder holds code, not pages)."""
    pages = [ROOT / "README.md"]
    pages += sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.relative_to(ROOT / "docs").parts)
    return pages


def _expand_snippets(text: str) -> str:
    lines = []
    for line in text.splitlines():
        found = _SNIPPET.match(line)
        lines.append((ROOT / found.group(1)).read_text().rstrip("\n") if found else line)
    return "\n".join(lines) + "\n"


def blocks_of(page: Path, *, root: Path = ROOT) -> Iterator[Block]:
    """Every fenced block of `page`, in order, each named by the page's path from `root`."""
    lines = page.read_text().splitlines()
    name = str(page.relative_to(root))
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if opened is None:
            index += 1
            continue
        before = lines[index - 1].strip() if index else ""
        marked = _MARK.match(before)
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        text = _expand_snippets("\n".join(lines[index + 1 : end]))
        mark = Mark(marked.group(1)) if marked else None
        output, after = [], end + 1
        while after < len(lines) and (shown := _OUTPUT.match(lines[after])):
            output.append(shown.group(1))
            after += 1
        language = ALIASES.get(opened.group(1).lower(), opened.group(1).lower())
        yield Block(page=name, line=index + 1, language=language, text=text, mark=mark, output=tuple(output))
        index = end + 1


def unknown_language(blocks: list[Block]) -> list[str]:
    """Where a block is in a language the tests do not know and is not marked not-run: it would go unchecked."""
    return [f"{b.where} ({b.language or 'no language'})" for b in blocks if b.language not in KNOWN_LANGUAGES and b.mark is not Mark.NOT_RUN]


def all_blocks() -> list[Block]:
    """The fenced blocks of every documentation page."""
    return [block for page in documentation_pages() for block in blocks_of(page)]
