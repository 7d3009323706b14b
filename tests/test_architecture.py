"""The shape of the code, checked: module size, third-party internals in their own rooms, no riddles.

The layers themselves are import-linter contracts (`.importlinter`, run as `lint-imports` in the
README's test command); these are the rules it cannot express.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import sys
import tokenize
import types
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gateway"
MAX_LINES = 400
# The modules allowed to touch a library's private names (each checks the release): aiohttp's,
# one per side, and litellm's.
INTERNALS = frozenset(
    {
        PACKAGE / "server" / "aiohttp_internals.py",
        PACKAGE / "upstream" / "aiohttp_internals.py",
        PACKAGE / "upstream" / "providers" / "litellm_internals.py",
    }
)
# The calls that take an attribute's name as a string.
BY_NAME = frozenset({"getattr", "setattr", "hasattr", "delattr", "attrgetter", "methodcaller"})
# Underscore names that are public API: namedtuple's methods, os._exit.
PUBLIC_UNDERSCORED = frozenset({"_replace", "_asdict", "_fields", "_make", "_exit"})
# A comment that counts what the interpreter runs ("~1.5k instructions", "12 opcodes"): figures
# belong in commit messages and benchmarks, a comment says why.
COUNTS = re.compile(
    r"opcodes?\b|\d[\d.,]*\s*k?\s*(instructions|frames)\b|instructions (per|a) "
    # ...and in words: "two calls less", "a frame less", "at half the cost", "a tenth of the time"
    r"|\b(a|one|two|three|four|five)\s+(\w+\s+)?(calls?|frames?)\s+(less|fewer)\b"
    r"|\b(a|one|two|three|four|five)\s+(\w+\s+)?(calls?|frames?),?\s+not\s+(one|two|three|four|five)\b"
    r"|\b(half|a third|a quarter|a tenth|twice|[\d.]+\s*x|\d+\s*%)\s+(of\s+)?(the\s+)?(cost|time)\b"
    r"|\bcosts?\s+(half|a third|a quarter|a tenth)\b|\bin\s+(a third|a quarter|a tenth)\b",
    re.IGNORECASE,
)


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


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def private_strings(node: ast.AST) -> list[str]:
    """The string constants in `node` that spell an underscore name."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str) and is_private(n.value)]


def by_name(node: ast.AST) -> ast.Call | None:
    """`node` as a call of getattr, setattr, hasattr, delattr, attrgetter or methodcaller."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else ""
    return node if name in BY_NAME else None


def names_by_string(tree: ast.AST) -> Iterator[ast.AST]:
    """Underscore names of another object spelt as strings: `getattr(x, "_y")`, and tables of names.

    A table is a module-level tuple, list or set of strings, in a module that also reaches an
    attribute by a name it does not spell out (`getattr(x, name)`): its underscore entries count.
    """
    computed = False
    for node in ast.walk(tree):
        if (call := by_name(node)) is None:
            continue
        if isinstance(call.func, ast.Name) and call.func.id in ("getattr", "setattr", "hasattr", "delattr"):
            if len(call.args) < 2 or is_own(call.args[0]):
                continue
            names = call.args[1:2]
        else:
            names = call.args
        if any(private_strings(name) for name in names):
            yield call
        computed = computed or not all(isinstance(name, ast.Constant) for name in names)
    if computed and isinstance(tree, ast.Module):
        for statement in tree.body:
            value = statement.value if isinstance(statement, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Tuple | ast.List | ast.Set) and private_strings(value):
                yield statement


TESTS = PACKAGE.parent / "tests"
# Calls that reach an attribute by a name given as a string, the dunder way: `object.__getattribute__(o, "_x")`
# (the name second), or `o.__getattribute__("_x")` (the name first).
DUNDER_ACCESS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})


def is_third_party(module: str) -> bool:
    return module.split(".")[0] not in ("gateway", "tests")


def private_module(name: str) -> bool:
    """Whether a dotted module name has an underscore part: `aiohttp._http_parser`."""
    return any(is_private(part) for part in name.split("."))


def instance_dict(node: ast.expr) -> ast.expr | None:
    """The object whose attribute dict `node` is (`vars(o)`, `o.__dict__`); None when it is no such dict."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and len(node.args) == 1:
        return node.args[0]
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    return None


def reads_another_dict(node: ast.Subscript) -> bool:
    """`vars(o)["_x"]` or `o.__dict__["_x"]`, with `o` not our own."""
    owner = instance_dict(node.value)
    return owner is not None and not is_own(owner) and bool(private_strings(node.slice))


def dunder_access_names(node: ast.Call) -> list[ast.expr]:
    """The name argument of `object.__getattribute__(o, name)` or `o.__getattribute__(name)`, unless `o` is our own."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr in DUNDER_ACCESS):
        return []
    owner = node.func.value
    if isinstance(owner, ast.Name) and owner.id in ("object", "type") and len(node.args) >= 2:
        return [] if is_own(node.args[0]) else [node.args[1]]
    return [] if is_own(owner) or not node.args else [node.args[0]]


def private_uses(tree: ast.AST) -> Iterator[ast.AST]:
    """Reads, imports and keyword arguments of another object's or library's underscore names, as names or strings."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if is_private(node.attr) and not is_own(node.value):
                yield node
        elif isinstance(node, ast.Call) and any(keyword.arg and is_private(keyword.arg) for keyword in node.keywords):
            if not (isinstance(node.func, ast.Attribute) and is_own(node.func.value)):
                yield node
        elif isinstance(node, ast.Call) and any(private_strings(name) for name in dunder_access_names(node)):
            yield node
        elif isinstance(node, ast.ImportFrom) and node.module and is_third_party(node.module):
            if private_module(node.module) or any(is_private(alias.name) for alias in node.names):
                yield node
        elif isinstance(node, ast.Import):
            if any(is_third_party(alias.name) and private_module(alias.name) for alias in node.names):
                yield node
        elif isinstance(node, ast.Subscript) and reads_another_dict(node):
            yield node
    yield from names_by_string(tree)


def test_underscore_names_of_other_objects_are_used_only_in_the_internals_modules() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
        for path in modules()
        if path not in INTERNALS
        for node in private_uses(ast.parse(path.read_text()))
    ]
    assert found == []


def scanned(source: str) -> list[str]:
    found = sorted(private_uses(ast.parse(source)), key=lambda node: node.lineno)  # type: ignore[attr-defined]
    return [ast.unparse(node) for node in found]


def test_the_scan_sees_other_objects_underscore_names_not_its_own() -> None:
    source = "self._mine = 1\nsuper()._theirs()\nrequest._payload\nentry._replace(a=1)\nfrom aiohttp.web import _x\n"
    assert scanned(source) == ["request._payload", "from aiohttp.web import _x"]


def test_the_scan_sees_underscore_names_spelt_as_strings() -> None:
    source = """
getattr(self, "_mine")
getattr(response, "_hidden_params", None)
setattr(litellm, "_async_success_callback", [])
hasattr(thing, "__dunder__") and hasattr(thing, "public") and hasattr(entry, "_asdict")
attrgetter("_closed" if fast else "closed")
litellm.acompletion(model="m", _skip_mcp_handler=True)
self._call(_mine=1)
"""
    assert scanned(source) == [
        "getattr(response, '_hidden_params', None)",
        "setattr(litellm, '_async_success_callback', [])",
        "attrgetter('_closed' if fast else 'closed')",
        "litellm.acompletion(model='m', _skip_mcp_handler=True)",
    ]


def test_the_scan_sees_a_table_of_underscore_names_only_where_names_are_looked_up() -> None:
    table = "NAMES = ('callbacks', '_async_input_callback')\nRAW = {'_raw': 1}\n"
    assert scanned(table) == []  # strings, no attribute of anything
    looked_up = table + "for name in NAMES:\n    setattr(litellm, name, [])\n"
    assert scanned(looked_up) == ["NAMES = ('callbacks', '_async_input_callback')"]


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
    for counted in ("two calls less on every attempt", "costs a frame less", "one frame, not two",
                    "at half the cost of a startswith", "costs a tenth of the pattern match",
                    "read in a tenth of a field's time", "two property calls less"):  # fmt: skip
        assert COUNTS.search(counted), counted
    for reason in ("no frame more on the common path", "cheaper than round()", "Milliseconds to a tenth, half up",
                   "cannot cut the write in half"):  # fmt: skip
        assert not COUNTS.search(reason), reason


# Factories that take every field by keyword and build their class by position, in field order
# (a class called with keywords builds a dict of them on every call): the only calls that may
# pass more than three arguments by position.
FIELD_ORDER_FACTORIES = frozenset({("upstream/results.py", "replied"), ("upstream/results.py", "streamed"),
                                   ("core/memory/policies.py", "make_plan")})  # fmt: skip
MAX_POSITIONAL = 3


def positional_capacity(tree: ast.AST) -> dict[str, int]:
    """For each function and class name defined in `tree`: how many arguments it takes by position (-1: any)."""
    taken: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            capacity = -1 if args.vararg else len(args.posonlyargs) + len(args.args)
            if args.args and args.args[0].arg in ("self", "cls"):
                capacity = capacity if capacity < 0 else capacity - 1
            taken[node.name] = max(taken.get(node.name, 0), capacity) if capacity >= 0 else -1
        elif isinstance(node, ast.ClassDef):
            taken.setdefault(node.name, MAX_POSITIONAL + 1)  # a dataclass or NamedTuple takes its fields by position
    return taken


def long_positional_calls(tree: ast.AST, ours: dict[str, int], *, allowed: frozenset[str] = frozenset()) -> Iterator[ast.Call]:
    """Calls of our own functions and classes that pass more than MAX_POSITIONAL arguments by position."""
    scopes: list[ast.AST] = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in allowed
    ]  # fmt: skip
    exempt = {id(call) for scope in scopes for call in ast.walk(scope)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in exempt:
            continue
        func, args = node.func, node.args
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name == "partial" and args:  # functools.partial(f, a, b, ...): the arguments f will get
            func, args = args[0], args[1:]
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if len(args) <= MAX_POSITIONAL or any(isinstance(arg, ast.Starred) for arg in args):
            continue
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if isinstance(receiver, ast.Name) and receiver.id in ("log", "logger", "logging"):
            continue  # logging's own calls: a format string and its values
        if name == "cls" or (name in ours and ours[name] != -1):  # cls(...): a class of ours, in its classmethod
            yield node


def test_calls_name_their_arguments_past_the_third() -> None:
    ours: dict[str, int] = {}
    for path in modules():
        for name, capacity in positional_capacity(ast.parse(path.read_text())).items():
            ours[name] = -1 if -1 in (capacity, ours.get(name, 0)) else max(capacity, ours.get(name, 0))
    found = []
    for path in modules():
        relative = str(path.relative_to(PACKAGE))
        allowed = frozenset(function for module, function in FIELD_ORDER_FACTORIES if module == relative)
        for call in long_positional_calls(ast.parse(path.read_text()), ours, allowed=allowed):
            found.append(f"{relative}:{call.lineno}: {ast.unparse(call)[:100]}")
    assert found == []


def test_the_call_check_sees_positional_runs_of_our_own_callables() -> None:
    source = """
def ours(a, b, c, d=None): ...
def spread(*values): ...
class Row: ...
def factory(*, a, b, c, d):
    return Row(a, b, c, d)
ours(1, 2, 3, 4)
ours(1, 2, 3, d=4)
spread(1, 2, 3, 4)
Row(1, 2, 3, 4)
log.error("%s %s %s", 1, 2, 3)
theirs(1, 2, 3, 4)
functools.partial(ours, 1, 2, 3, 4)
functools.partial(ours, 1, 2, 3)
cls(1, 2, 3, 4)
"""
    tree = ast.parse(source)
    found = long_positional_calls(tree, positional_capacity(tree), allowed=frozenset({"factory"}))
    assert sorted(ast.unparse(call) for call in found) == sorted(
        ["ours(1, 2, 3, 4)", "Row(1, 2, 3, 4)", "functools.partial(ours, 1, 2, 3, 4)", "cls(1, 2, 3, 4)"]
    )


# What the pure core may import besides itself (the import-linter contract names packages to
# forbid; this names the few to allow).
CORE_MAY_IMPORT = frozenset({"orjson"})


def imported_packages(tree: ast.AST) -> Iterator[str]:
    """The top-level packages `tree` imports, absolutely (`import a.b`, `from a.b import c`: `a`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def outside_imports(tree: ast.AST) -> Iterator[str]:
    """The top-level packages `tree` imports that are neither the standard library's nor gateway's."""
    return (name for name in imported_packages(tree) if name not in sys.stdlib_module_names and name != "gateway")


def test_the_core_imports_only_the_standard_library_and_orjson() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        for name in outside_imports(ast.parse(path.read_text()))
        if name not in CORE_MAY_IMPORT
    }
    assert found == set()


def test_the_core_import_check_sees_any_other_package() -> None:
    source = "import json\nimport orjson\nfrom pydantic import BaseModel\nimport yaml.nodes\nfrom . import x\nfrom gateway.core import y\n"
    assert sorted(outside_imports(ast.parse(source))) == ["orjson", "pydantic", "yaml"]


def test_the_scan_sees_private_modules_however_imported() -> None:
    source = """
import aiohttp._http_parser
import multidict._multidict as md
import os, json
import gateway._x
import aiohttp.web
from aiohttp._websocket import reader
from gateway._own import x
from aiohttp import web
"""
    assert scanned(source) == [
        "import aiohttp._http_parser",
        "import multidict._multidict as md",
        "from aiohttp._websocket import reader",
    ]


def test_the_scan_sees_underscore_names_read_from_an_instance_dict() -> None:
    source = """
vars(request)["_payload"]
request.__dict__["_state"]
vars(self)["_mine"]
self.__dict__["_mine"]
vars(request)["public"]
data["_key"]
vars(request)[name]
"""
    assert scanned(source) == ["vars(request)['_payload']", "request.__dict__['_state']"]


def test_the_scan_sees_dunder_attribute_access_by_string() -> None:
    source = """
object.__getattribute__(response, "_closed")
object.__setattr__(response, "_closed", True)
object.__setattr__(self, "_mine", 1)
type.__getattribute__(cls, "_mine")
response.__getattribute__("_closed")
super().__getattribute__("_mine")
self.__setattr__("_mine", 2)
object.__getattribute__(response, "closed")
"""
    assert scanned(source) == [
        "object.__getattribute__(response, '_closed')",
        "object.__setattr__(response, '_closed', True)",
        "response.__getattribute__('_closed')",
    ]


# The test side: tests may use our own underscore names (white-box tests), never a library's.


def suite_files() -> Iterator[Path]:
    yield from sorted(path for path in TESTS.rglob("*.py") if "node_modules" not in path.parts)


def own_private_names() -> frozenset[str]:
    """The underscore names our own code defines, in gateway/ and tests/: functions, classes, assigned names, attributes of self."""
    names: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), *suite_files()]:
        if path.stem.startswith("_"):
            names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and is_own(node.value):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update(alias.asname for alias in node.names if alias.asname)
    return frozenset(name for name in names if is_private(name))


def own_bindings(tree: ast.Module) -> frozenset[str]:
    """The names a test module binds to our own code (`from gateway.x import y`, `import gateway.x as y`) and its classes."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not is_third_party(node.module):
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names if not is_third_party(alias.name))
        elif isinstance(node, ast.ClassDef):
            bound.add(node.name)
    return frozenset(bound)


def third_party_private_uses(tree: ast.Module, own: frozenset[str]) -> Iterator[ast.AST]:
    """private_uses, less our own underscore names (`own`) and names read off what the module bound to our code."""
    bound = own_bindings(tree)
    for node in private_uses(tree):
        if isinstance(node, ast.Attribute):
            root = node.value
            while isinstance(root, ast.Attribute | ast.Call | ast.Subscript):
                root = root.func if isinstance(root, ast.Call) else root.value
            if node.attr in own or (isinstance(root, ast.Name) and root.id in bound):
                continue
        elif not isinstance(node, ast.Import | ast.ImportFrom):
            keywords = getattr(node, "keywords", ())
            spelt = set(private_strings(node)) | {k.arg for k in keywords if k.arg and is_private(k.arg)}
            if spelt <= own:
                continue
        yield node


def test_tests_use_no_underscore_name_of_a_library_s_object() -> None:
    own = own_private_names()
    found = [
        f"{path.relative_to(TESTS.parent)}:{node.lineno}: {ast.unparse(node)}"  # type: ignore[attr-defined]
        for path in suite_files()
        for node in third_party_private_uses(ast.parse(path.read_text()), own)
    ]
    assert found == []


def test_the_test_side_scan_skips_our_own_names() -> None:
    source = """
from gateway.upstream import aiohttp_internals
from gateway.server import connections as c
aiohttp_internals._CONNECTION_PARTS
c._anything
events._held
request._payload
stream._raw_stream.response
getattr(response, "_hidden_params")
getattr(thing, "_held")
import aiohttp._http_parser
"""
    found = sorted(third_party_private_uses(ast.parse(source), frozenset({"_held"})), key=lambda node: node.lineno)  # type: ignore[attr-defined]
    assert [ast.unparse(node) for node in found] == [
        "request._payload", "stream._raw_stream", "getattr(response, '_hidden_params')", "import aiohttp._http_parser",
    ]  # fmt: skip


def unlisted_imports(tree: ast.AST) -> Iterator[ast.ImportFrom]:
    """`from lib.mod import name` where lib.mod lists its public names in __all__ and `name` is neither one nor a submodule."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        if not is_third_party(node.module) or node.module == "__future__":
            continue
        module = importlib.import_module(node.module)
        public = getattr(module, "__all__", None)
        if public is not None and any(alias.name not in public and not is_submodule(module, alias.name) for alias in node.names):
            yield node


def is_submodule(module: types.ModuleType, name: str) -> bool:
    """Whether `name` is a submodule of the package `module` (`from aiohttp import web`)."""
    if isinstance(getattr(module, name, None), types.ModuleType):
        return True
    return hasattr(module, "__path__") and importlib.util.find_spec(f"{module.__name__}.{name}") is not None


def test_names_imported_from_a_library_are_among_its_public_ones() -> None:
    """A name a library module leaves out of its __all__ is its internals (aiohttp.helpers.parse_mimetype was one)."""
    import gateway.upstream.providers.litellm  # noqa: F401  # litellm as the gateway sets it up: no fetch at import

    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}"
        for path in modules()
        if path not in INTERNALS
        for node in unlisted_imports(ast.parse(path.read_text()))
    ]
    assert found == []
    old = "from aiohttp.helpers import parse_mimetype\nfrom aiohttp import web, hdrs\nfrom aiohttp.multipart import parse_content_disposition\n"
    assert [ast.unparse(node) for node in unlisted_imports(ast.parse(old))] == ["from aiohttp.helpers import parse_mimetype"]


# The core computes: no network, files, processes, event loop, clock or random numbers (the layers
# around it pass in ids and times). Its one effect is the standard library's logging, configured
# by the CLI: what a translation leaves out is told there.
CORE_MAY_NOT_IMPORT = frozenset({"asyncio", "socket", "os", "io", "time", "random", "secrets", "uuid", "subprocess",
                                 "threading", "sqlite3", "shutil", "pathlib", "tempfile", "select", "signal"})  # fmt: skip


def stdlib_imports(tree: ast.AST) -> Iterator[str]:
    """The top-level standard library modules `tree` imports."""
    return (name for name in imported_packages(tree) if name in sys.stdlib_module_names)


def test_the_core_reads_no_clock_draws_no_random_number_and_does_no_io() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        for name in stdlib_imports(ast.parse(path.read_text()))
        if name in CORE_MAY_NOT_IMPORT
    }
    assert found == set()
    assert list(stdlib_imports(ast.parse("import time\nfrom secrets import token_hex\nimport orjson\n"))) == ["time", "secrets"]


def crowded_signatures(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions that take more than MAX_POSITIONAL arguments by position (self and cls aside, *args aside)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.args.vararg:
            positional = [arg.arg for arg in (*node.args.posonlyargs, *node.args.args) if arg.arg not in ("self", "cls")]
            if len(positional) > MAX_POSITIONAL:
                yield node


def test_functions_take_their_arguments_past_the_third_by_keyword_only() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.name}"
        for path in modules()
        for node in crowded_signatures(ast.parse(path.read_text()))
    ]
    assert found == []
    sample = "def f(a, b, c, d): ...\ndef g(a, b, c, *, d): ...\ndef h(self, a, b, c): ...\ndef i(*values): ...\n"
    assert [node.name for node in crowded_signatures(ast.parse(sample))] == ["f"]
