"""The shape of the code, checked: module size, aiohttp internals in their two rooms, no riddles.

The layers themselves are import-linter contracts (`.importlinter`, run as `lint-imports` in the
README's test command); these are the rules it cannot express.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gateway"
MAX_LINES = 400
# The one module per side allowed to touch aiohttp's private names (each checks the version).
INTERNALS = frozenset({PACKAGE / "server" / "aiohttp_internals.py", PACKAGE / "upstream" / "aiohttp_internals.py"})
# Underscore names that are public API: namedtuple's methods, os._exit.
PUBLIC_UNDERSCORED = frozenset({"_replace", "_asdict", "_fields", "_make", "_exit"})
# A comment that counts what the interpreter runs ("~1.5k instructions", "12 opcodes"): figures
# belong in commit messages and benchmarks, a comment says why.
COUNTS = re.compile(r"opcodes?\b|\d[\d.,]*\s*k?\s*(instructions|frames)\b|instructions (per|a) ", re.IGNORECASE)


def modules() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def is_own(value: ast.expr) -> bool:
    """`self`, `cls` or `super()`: the one object whose underscore names a method may use."""
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id == "super"
    return isinstance(value, ast.Name) and value.id in ("self", "cls")


def private_uses(tree: ast.AST) -> Iterator[ast.AST]:
    """Reads and imports of another object's or library's underscore names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if private and node.attr not in PUBLIC_UNDERSCORED and not is_own(node.value):
                yield node
        elif isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith("gateway"):
            names = [node.module, *(alias.name for alias in node.names)]
            if any(part.startswith("_") and not part.startswith("__") for name in names for part in name.split(".")):
                yield node


def test_underscore_names_of_other_objects_are_used_only_in_the_two_aiohttp_internals_modules() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
        for path in modules()
        if path not in INTERNALS
        for node in private_uses(ast.parse(path.read_text()))
    ]
    assert found == []


def test_the_scan_sees_other_objects_underscore_names_not_its_own() -> None:
    source = "self._mine = 1\nsuper()._theirs()\nrequest._payload\nentry._replace(a=1)\nfrom aiohttp.web import _x\n"
    found = sorted(private_uses(ast.parse(source)), key=lambda node: node.lineno)  # type: ignore[attr-defined]
    assert [ast.unparse(node) for node in found] == ["request._payload", "from aiohttp.web import _x"]


def test_no_tuple_new_and_no_comment_or_docstring_counts_instructions() -> None:
    found = []
    for path in modules():
        text = path.read_text()
        if "tuple.__new__" in text:
            found.append(f"{path.relative_to(PACKAGE)}: tuple.__new__")
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and COUNTS.search(token.string):
                found.append(f"{path.relative_to(PACKAGE)}:{token.start[0]}: {token.string}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node)
                if docstring and COUNTS.search(docstring):
                    found.append(f"{path.relative_to(PACKAGE)}: docstring of {getattr(node, 'name', 'the module')}")
    assert found == []


def test_the_comment_check_sees_counts_not_the_word() -> None:
    assert COUNTS.search("# ~1.5k instructions a call") and COUNTS.search("# 12 opcodes fewer")
    assert COUNTS.search("# costs 900 instructions per delta")
    assert not COUNTS.search("# instructions between turns (Claude Code's environment): chat has them too")
