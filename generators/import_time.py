"""Entities that test modules use at *import time*, and which test files that makes depend on them.

Per-test coverage records what a test's own body executes; what runs while pytest imports the test
module (module-level code and class bodies: ``class BlogSchema(Schema): tags = fields.List(...)`` in
marshmallow's ``tests/base.py``) runs outside every test and is invisible to it. Deleting ``fields.List``
still breaks every test of every module that imports ``tests.base``, so those tests cover it.

``import_time_users(index, repo_root)`` maps an entity's qualified name to the test files whose import
uses it: a reference from a test file (kind ``call``, ``name`` or ``attribute``: an ``import`` alone
runs no body, except of a module, which deleting breaks the import itself) that lies at module level or in a class body, not inside a function; then, transitively,
every test file that imports such a test module (``from tests.base import Blog``) and every test file
under the directory of a ``conftest.py`` that does. Functions, classes and modules count; methods do not
(what an import-time use of a class runs is not known statically). Cached on the index.

``names_remain=True`` (a stub keeps every name): a reference that only binds the entity, an assignment whose
value is the bare name (``cls = mi.seekable`` in a mixin's class body), runs nothing of it and breaks no
import while the name exists, so it is no use; a deletion (the name gone) still breaks the import there.
more-itertools 11.2.1: two such lines made all 600 tests of tests/test_more.py "cover" ``seekable`` and
``peekable``, and each stub's first run ran them all (16-22 s instead of 1-2 s).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskforge.core import pyparse
from taskforge.core.entities import EntityKind

_RUNS_BODY = frozenset({"call", "name", "attribute"})
_KINDS = frozenset({EntityKind.FUNCTION, EntityKind.CLASS, EntityKind.MODULE})


def import_time_users(index: Any, repo_root: Path, *, names_remain: bool = False) -> Mapping[str, frozenset[str]]:
    """``{entity qualname: test files whose import runs a use of it}`` (module docstring)."""
    memo = getattr(index, "_memo", None)
    key = "import_time_users" + ("_names_remain" if names_remain else "")
    if memo is not None and key in memo:
        return memo[key]
    result = _compute(index, Path(repo_root), names_remain)
    if memo is not None:
        memo[key] = result
    return result


def _compute(index: Any, root: Path, names_remain: bool = False) -> dict[str, frozenset[str]]:
    test_files = tuple(index.test_files)
    if not test_files:
        return {}
    scans = {f: _scan(root / f) for f in test_files}
    direct: dict[str, set[str]] = defaultdict(set)  # test file -> entities its import uses
    for e in index.entities:
        if e.kind not in _KINDS:
            continue
        kinds = _RUNS_BODY | {"import"} if e.kind is EntityKind.MODULE else _RUNS_BODY
        for r in e.references:
            if r.is_test and r.kind in kinds and r.file in scans and not _in_function(r.in_entity, scans[r.file]):
                if names_remain and r.kind != "call" and r.line in scans[r.file].bindings:
                    continue
                direct[r.file].add(e.qualname)
    importers = _importers(test_files, scans)
    users: dict[str, set[str]] = defaultdict(set)
    for file, entities in direct.items():
        for user in _closure(file, importers):
            for q in entities:
                users[q].add(user)
    return {q: frozenset(files) for q, files in users.items()}


def _closure(file: str, importers: Mapping[str, set[str]]) -> set[str]:
    """``file`` and every test file that imports it, directly or through others."""
    seen = {file}
    todo = [file]
    while todo:
        for other in importers.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


class _Scan:
    def __init__(self, functions: frozenset[str], imports: tuple[tuple[str, int], ...],
                 bindings: frozenset[int] = frozenset()) -> None:
        self.functions = functions  # dotted paths of functions/methods inside the file ("Cls.meth")
        self.imports = imports  # (module, relative level) of every import statement
        self.bindings = bindings  # lines of assignments outside functions whose value is a bare (dotted) name


def _scan(path: Path) -> _Scan:
    try:
        tree = pyparse.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return _Scan(frozenset(), ())
    functions: set[str] = set()
    imports: list[tuple[str, int]] = []
    bindings: set[int] = set()

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.add(f"{prefix}{child.name}")
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                if isinstance(child, (ast.Assign, ast.AnnAssign)) and _bare_name(child.value):
                    bindings.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
                if isinstance(child, ast.Import):
                    imports.extend((a.name, 0) for a in child.names)
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    imports.append((base, child.level))
                    imports.extend((f"{base}.{a.name}" if base else a.name, child.level) for a in child.names)
                walk(child, prefix)

    walk(tree, "")
    return _Scan(frozenset(functions), tuple(imports), frozenset(bindings))


def _bare_name(value: ast.AST | None) -> bool:
    """``x`` or ``a.b.c``: evaluating it runs no code of what it names (a property aside)."""
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name)


def _in_function(in_entity: str, scan: _Scan) -> bool:
    """Whether a reference whose enclosing entity is ``in_entity`` (``tests.base.UserSchema``) lies in a
    function of the test file (its dotted path ends with a function's path), not in a class body."""
    if not in_entity:
        return False
    parts = in_entity.split(".")
    return any(".".join(parts[i:]) in scan.functions for i in range(len(parts)))


def _importers(test_files: tuple[str, ...], scans: Mapping[str, _Scan]) -> dict[str, set[str]]:
    """``{test file: test files that import it}``, plus every test file below a ``conftest.py`` for it."""
    by_module: dict[str, str] = {}
    for f in test_files:
        parts = f[:-3].split("/") if f.endswith(".py") else f.split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i in range(len(parts)):  # "tests/base.py" is "tests.base" and, with tests/ on sys.path, "base"
            by_module.setdefault(".".join(parts[i:]), f)
    out: dict[str, set[str]] = defaultdict(set)
    for f in test_files:
        package = f.split("/")[:-1]
        for module, level in scans[f].imports:
            if level:
                anchor = package[: len(package) - (level - 1)] if level > 1 else package
                module = ".".join([*anchor, module] if module else anchor)
            target = by_module.get(module)
            if target is not None and target != f:
                out[target].add(f)
        if f.endswith("conftest.py"):
            root = f[: -len("conftest.py")]
            out[f].update(t for t in test_files if t.startswith(root) and t != f)
    return out


def files_broken_by_removal(index: Any, repo_root: Path, removed: tuple[str, ...]) -> frozenset[str]:
    """Test files whose import fails once the names ``removed`` are gone (a delete or module deletion)."""
    users = import_time_users(index, repo_root)
    return frozenset().union(*(users.get(q, frozenset()) for q in removed)) if removed else frozenset()
