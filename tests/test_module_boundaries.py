"""No module of ``sketch_core`` calls a private method or function of another of its modules.

A leading underscore says "only this module relies on it": a call from elsewhere is a hidden
dependency that a change inside the module breaks without warning. Checked on the source (AST),
so it covers code no test happens to run.

A call ``x._name(...)`` is a violation when ``_name`` is defined (as a function, a method, or
an attribute assigned in a method) in some module of ``sketch_core`` but not in the module that
calls it. Private names of third-party libraries (``pc.Expression._call``) are not ours to
judge: a receiver rooted at a name imported from outside ``sketch_core`` is skipped, and so is
a name no module of ours defines.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sketch_core"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree: ast.Module) -> set[str]:
    """Private functions, methods and ``self._x = ...`` attributes the module defines."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
            names.add(node.attr)
    return names


def _foreign_imports(tree: ast.Module) -> set[str]:
    """Names the module binds by importing from outside ``sketch_core``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {
                (a.asname or a.name).split(".")[0] for a in node.names if not a.name.startswith("sketch_core")
            }
        elif (
            isinstance(node, ast.ImportFrom)
            and not (node.module or "").startswith("sketch_core")
            and node.level == 0
        ):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree. CPython 3.11 keeps one AST recursion counter per interpreter, so a
    traceback formatted on another thread meanwhile (3.11 parses source lines for its carets; a
    Py4J thread logging a closed gateway) can fail the parse with a spurious "AST constructor
    recursion depth mismatch" SystemError (python/cpython#106905): the parse is tried again."""
    for attempt in range(3):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def private_calls_across_modules(package: Path) -> list[str]:
    trees = {path: _parsed(path) for path in sorted(package.rglob("*.py"))}
    defined_in: dict[str, set[Path]] = defaultdict(set)
    for path, tree in trees.items():
        for name in _defined_names(tree):
            defined_in[name].add(path)
    found = []
    for path, tree in trees.items():
        foreign = _foreign_imports(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            homes = defined_in.get(name, set())
            if not _private(name) or not homes or path in homes or _root(node.func.value) in foreign:
                continue
            where = ", ".join(str(home.relative_to(package.parent)) for home in sorted(homes))
            found.append(
                f"{path.relative_to(package.parent)}:{node.lineno}: {ast.unparse(node.func)} ({where})"
            )
    return found


def test_no_module_calls_a_private_name_of_another() -> None:
    assert private_calls_across_modules(PACKAGE) == []


def test_the_check_finds_such_a_call(tmp_path: Path) -> None:
    package = tmp_path / "sketch_core"
    package.mkdir()
    (package / "a.py").write_text("class A:\n    def _helper(self):\n        return 1\n")
    (package / "b.py").write_text(
        "import pyarrow.compute as pc\ndef use(a):\n    return a._helper() + pc.Expression._helper()\n"
    )
    (found,) = private_calls_across_modules(package)
    assert found.startswith("sketch_core/b.py:3: a._helper") and "sketch_core/a.py" in found


def test_a_call_within_its_module_passes(tmp_path: Path) -> None:
    package = tmp_path / "sketch_core"
    package.mkdir()
    (package / "a.py").write_text(
        "class A:\n    def _helper(self):\n        return 1\n\ndef run(a: A):\n    return a._helper()\n"
    )
    assert private_calls_across_modules(package) == []
