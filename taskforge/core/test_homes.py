"""Where a collected test is defined. Stdlib only: shipped as is into every exported Harbor verifier.

pytest names a test after the file it collects it in, and that file may import the test's class or function
from another file of the repository. lark 1.3.1 sets ``python_files = "__main__.py"``: its tests/__main__.py
imports every test class (``from .test_trees import TestTrees``), so every test id is
``tests/__main__.py::TestTrees::test_x`` while ``TestTrees`` is written in tests/test_trees.py, the test's
*home*. What reads or rewrites a test's source (hiding it, sealing its assertions, its strict equality,
planting changed copies of it) works on its home; what runs it asks pytest for the collected id.

``test_homes(root, nodeids)`` gives the home id of each id that is collected away from home; ``Homes`` maps
ids both ways. A method planted in an imported class is collected where the class is (the class object is
shared), so a copy planted next to ``TestTrees::test_x`` in its home runs as
``tests/__main__.py::TestTrees::copy``, indistinguishable by its id from the original. A new top-level function
next to an imported function is not imported with it: such tests are ``loose`` (a copy would run under its home
file's name, telling it from the original).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

if __package__:  # imported from the repository (taskforge.core)
    from . import pyparse
else:  # a Harbor verifier's tests/harbor_test_homes.py: its sibling, on the path the verifier set
    import harbor_pyparse as pyparse  # type: ignore[no-redef]

_DEFINED = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)  # names defined anywhere in a file


def _parse(text: str) -> ast.Module | None:
    try:
        return pyparse.parse(text)
    except (SyntaxError, ValueError):
        return None


def top_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements, those in a top-level ``try``/``if`` included."""
    for node in body:
        yield node
        if isinstance(node, ast.Try | ast.If):
            for block in (node.body, node.orelse, getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from top_statements(block)


def defined_names(tree: ast.Module) -> frozenset[str]:
    """The classes and functions a module defines at its top level."""
    return frozenset(n.name for n in top_statements(tree.body)
                     if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))


def import_bases(root: Path, rel: str) -> list[Path]:
    """Where an absolute import in the test file ``rel`` is looked up (relative to ``root``): the repository
    root, the file's own folder, and the folder pytest's default import mode puts on ``sys.path`` for it: the
    first ancestor without ``__init__.py`` (itsdangerous' ``tests/test_itsdangerous/test_timed.py`` imports
    ``test_itsdangerous.test_serializer``, found from ``tests/``)."""
    here = Path(rel).parent
    base = here
    while base != Path() and (root / base / "__init__.py").is_file():
        base = base.parent
    return list(dict.fromkeys((Path(), here, base)))


def defining_file(root: Path, rel: str, tree: ast.Module, name: str,
                  read: dict[str, ast.Module | None] | None = None) -> str | None:
    """The repository file that defines ``name`` at its top level, as the module ``rel`` (parsed: ``tree``)
    imports it (``from .test_cache import TestCache``, ``from tests.test_parser import *``); None when not so.
    ``read``: parsed files by relative path, filled as files are read (a cache for one caller). Of several
    imports that bind ``name``, the last one does, as in Python (pyyaml 6.0.4's ``test_yaml.py`` star-imports
    ``test_resolver`` and later ``test_schema``, both defining ``test_implicit_resolver``: the hiding removed the
    first, pytest still collected the second, and 89 of 140 decided candidates were ``transform_failed``)."""
    read = {} if read is None else read
    last: str | None = None
    for node in top_statements(tree.body):
        if isinstance(node, ast.ImportFrom) and any(a.name in (name, "*") and a.asname is None for a in node.names):
            last = _import_target(root, rel, node, name, read) or last
    return last


def _import_target(root: Path, rel: str, node: ast.ImportFrom, name: str,
                   read: dict[str, ast.Module | None]) -> str | None:
    """The repository file ``node`` (an import of the module ``rel``) takes ``name`` from, when it defines it."""
    parts = (node.module or "").split(".") if node.module else []
    bases = [Path(rel).parent.joinpath(*[".."] * (node.level - 1))] if node.level else import_bases(root, rel)
    for base in bases:
        for cand in (base.joinpath(*parts).with_suffix(".py") if parts else None,
                     base.joinpath(*parts, "__init__.py")):
            if cand is None:
                continue
            try:
                target = (root / cand).resolve().relative_to(root.resolve()).as_posix()
            except ValueError:  # outside the repository
                continue
            if target not in read:
                file = root / target
                try:
                    read[target] = _parse(file.read_bytes().decode("utf-8", errors="replace")) \
                        if file.is_file() else None
                except OSError:
                    read[target] = None
            found = read[target]
            if found is not None and name in defined_names(found):
                return target
    return None


@dataclass(frozen=True)
class Homes:
    """``moved``: collected id -> home id, for the tests collected away from their home (none: an empty map)."""

    moved: Mapping[str, str] = field(default_factory=dict)

    def home(self, nodeid: str) -> str:
        return self.moved.get(nodeid, nodeid)

    def homes(self, nodeids: Iterable[str]) -> list[str]:
        return [self.home(n) for n in nodeids]

    def loose(self) -> frozenset[tuple[str, str]]:
        """(home file, test name) of the moved top-level test functions: a function planted next to one stays
        in the home file, and runs under that file's name."""
        out = set()
        for home in self.moved.values():
            rel, _, rest = home.partition("::")
            if "::" not in rest:
                out.add((rel, rest.split("[", 1)[0]))
        return frozenset(out)

    def collected(self, home_id: str, known: Iterable[str] = ()) -> list[str]:
        """The ids a test planted at ``home_id`` (``file::Class::name``) is collected under: where every moved
        test of that class is collected, and its home too when ``known`` (collected ids) has a test of that class
        at home. A top-level function, or a class nothing moved: ``[home_id]``."""
        rel, _, rest = home_id.partition("::")
        if "::" not in rest:
            return [home_id]
        top, _, tail = rest.partition("::")
        prefix = f"{rel}::{top}::"
        places = sorted({c.partition("::")[0] for c, h in self.moved.items() if h.startswith(prefix)})
        if not places:
            return [home_id]
        at_home = any(n.startswith(prefix) and n not in self.moved for n in known)
        return [*([home_id] if at_home else []), *(f"{p}::{top}::{tail}" for p in places)]


def test_homes(root: Path, nodeids: Iterable[str]) -> Homes:
    """Where each of ``nodeids`` (collected ids under ``root``) is defined, for those whose file imports their
    class or function from another file of the repository."""
    root = Path(root)
    by_file: dict[str, list[str]] = {}
    for n in dict.fromkeys(nodeids):
        rel, _, rest = n.partition("::")
        if rest:
            by_file.setdefault(rel, []).append(n)
    read: dict[str, ast.Module | None] = {}
    moved: dict[str, str] = {}
    for rel, ids in sorted(by_file.items()):
        path = root / rel
        try:
            text = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""
        except OSError:
            text = ""
        firsts = {n.partition("::")[2].split("::", 1)[0].split("[", 1)[0] for n in ids}
        if not text or firsts <= set(_DEFINED.findall(text)):
            continue  # every test is written here (the common case: no parse)
        tree = _parse(text)
        if tree is None:
            continue
        top = defined_names(tree) | {t.id for n in top_statements(tree.body) if isinstance(n, ast.Assign)
                                     for t in n.targets if isinstance(t, ast.Name)}
        targets: dict[str, str | None] = {}
        for n in ids:
            rest = n.partition("::")[2]
            first = rest.split("::", 1)[0].split("[", 1)[0]
            if first in top:
                continue
            if first not in targets:
                targets[first] = defining_file(root, rel, tree, first, read)
            target = targets[first]
            if target is not None and target != rel:
                moved[n] = f"{target}::{rest}"
    return Homes(moved)


__all__ = ["Homes", "defined_names", "defining_file", "test_homes", "top_statements"]
