"""Hide the FAIL_TO_PASS tests from the agent's workspace (libcst), keeping the rest byte-for-byte.

``hide_tests(repo_root, fail_to_pass)`` groups the node ids by file and, per file:
- removes the whole file when every test pytest would collect from it is hidden;
- else removes the hidden test functions / methods (a parametrized id hides its whole function, a
  class whose tests are all hidden goes as a whole), then the test helpers of that file (module-level
  functions, fixtures, classes; helper methods of a test class) that only removed code used,
  transitively, then the imports that the removal made unused.
With ``index`` and ``deleted`` it also removes, from the test files that remain, module-level imports
of the deleted entities, so the remaining tests still collect. The test patch restores all of it.

A test method that a test class inherits from a base class or mixin of the same file
(``TZRangeTest(unittest.TestCase, TzFoldMixin)::testFoldPositiveUTCOffset``, python-dateutil) is hidden
by removing it from the class that defines it: every other class inheriting it loses it too, so such ids
are also returned in ``inherited`` and the caller confirms by collection which tests are left.

A test class or function that pytest collects in one file but that is defined in another, imported by name
or ``*`` (lark 1.3.1: ``python_files = "__main__.py"``, whose ``from .test_cache import TestCache`` makes
every test ``tests/__main__.py::TestCache::...``), is hidden where it is defined; the class itself stays (the
importing file still names it), and such ids are returned in ``inherited`` too, for the caller to confirm
by collection.

Node ids that name no test function found statically (doctests, generated tests) are returned in
``unmatched``: such a candidate cannot be hidden reliably and the caller should reject it.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import CodeRange

from generators import cst_edit
from generators.env_detect import collected_names, name_collected
from generators.static_index import StaticIndex
from taskforge.core import pyparse
from taskforge.core.entities import EntityKind
from taskforge.core.test_homes import defining_file, import_bases, test_homes

TestPath = tuple[str, ...]  # ("TestClass", "test_method") or ("test_function",)


@dataclass(frozen=True, slots=True)
class HiddenTests:
    hidden: tuple[str, ...]  # "file::Class::test" ids of the removed test functions (parametrization collapsed)
    files_before: Mapping[str, str | None]
    files_after: Mapping[str, str | None]
    removed_files: tuple[str, ...] = ()
    helpers: tuple[str, ...] = ()  # "file::name" test helpers removed with them
    unmatched: tuple[str, ...] = ()  # FAIL_TO_PASS ids with no statically found test function
    notes: tuple[str, ...] = field(default_factory=tuple)
    inherited: tuple[str, ...] = ()  # hidden ids defined in a base class (its other subclasses lose them too)
    along: tuple[str, ...] = ()  # kept tests that named a hidden one (``callers_of``): in ``hidden`` too

    def hides(self, nodeid: str) -> bool:
        """Whether ``nodeid`` (any parametrization) belongs to a hidden test."""
        return normalize_nodeid(nodeid) in self.hidden or any(
            normalize_nodeid(nodeid).startswith(h + "::") for h in self.hidden)

    def to_dict(self) -> dict[str, Any]:
        return {"hidden": list(self.hidden), "files_before": dict(self.files_before),
                "files_after": dict(self.files_after), "removed_files": list(self.removed_files),
                "helpers": list(self.helpers), "unmatched": list(self.unmatched), "notes": list(self.notes),
                "inherited": list(self.inherited), "along": list(self.along)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HiddenTests:
        return cls(tuple(d["hidden"]), dict(d["files_before"]), dict(d["files_after"]),
                   tuple(d.get("removed_files", ())), tuple(d.get("helpers", ())),
                   tuple(d.get("unmatched", ())), tuple(d.get("notes", ())), tuple(d.get("inherited", ())),
                   tuple(d.get("along", ())))


def normalize_nodeid(nodeid: str) -> str:
    """``tests/t.py::C::test_x[1-2]`` -> ``tests/t.py::C::test_x``."""
    return nodeid.split("[", 1)[0]


# ---------------------------------------------------------------------------------------------------
# scanning a test file
# ---------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Def:
    path: TestPath
    line: int  # first line incl. decorators
    is_test: bool
    is_class: bool
    params: tuple[str, ...] = ()
    is_assign: bool = False  # a module-level constant (NAME = ...): test data
    bases: tuple[str, ...] = ()  # of a class: the dotted names of its bases


class _Scan(cst.CSTVisitor):
    def __init__(self, positions: Mapping[cst.CSTNode, CodeRange],
                 names: tuple[tuple[str, ...], tuple[str, ...]] = (("Test",), ("test",))) -> None:
        super().__init__()
        self.positions = positions  # of the tree the hiding edits (``cst_edit.parsed``): parsed once for both
        self.classes, self.functions = names  # pytest's python_classes and python_functions
        self.defs: list[_Def] = []
        self.stack: list[tuple[str, bool]] = []  # (name, is_class)
        self.uses: list[tuple[str, TestPath]] = []  # (name, enclosing def path) ; "" path = module level
        self.attr_uses: list[tuple[str, TestPath]] = []  # self.x / cls.x inside a class
        self.other_attr_uses: list[tuple[str, TestPath]] = []  # obj.x with any other receiver (a fixture's object)
        self.strings: list[tuple[str, TestPath]] = []
        self._skip: set[int] = set()
        self._assign_frame: cst.SimpleStatementLine | None = None

    def _path(self) -> TestPath:
        return tuple(n for n, _ in self.stack)

    def _start(self, node: cst.FunctionDef | cst.ClassDef) -> int:
        first = node.decorators[0] if node.decorators else node
        return self.positions[first].start.line

    def _collectable(self) -> bool:
        """Directly at module level, or directly in a chain of classes."""
        return all(is_class for _, is_class in self.stack)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._skip.add(id(node.name))
        if self._collectable():
            in_class = bool(self.stack)
            is_test = name_collected(node.name.value, self.functions) and (not in_class or self._test_class_chain())
            params = tuple(p.name.value for p in [*node.params.posonly_params, *node.params.params,
                                                   *node.params.kwonly_params])
            self.defs.append(_Def((*self._path(), node.name.value), self._start(node), is_test, False, params))
        self.stack.append((node.name.value, False))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def _test_class_chain(self) -> bool:
        classes = [d for d in self.defs if d.is_class and d.path == self._path()]
        return bool(classes) and classes[-1].is_test

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self.stack or len(node.body) != 1:
            return
        stmt = node.body[0]
        targets: list[cst.BaseAssignTargetExpression] = []
        if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
            targets = [stmt.targets[0].target]
        elif isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        if len(targets) == 1 and isinstance(targets[0], cst.Name) and targets[0].value != "__all__":
            self._skip.add(id(targets[0]))
            line = self.positions[node].start.line
            self.defs.append(_Def((targets[0].value,), line, False, False, is_assign=True))
            self.stack.append((targets[0].value, False))
            self._assign_frame = node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        if self._assign_frame is original_node:
            self.stack.pop()
            self._assign_frame = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._skip.add(id(node.name))
        if self._collectable():
            bases = [cst.helpers.get_full_name_for_node(a.value) or "" for a in node.bases]
            is_test = name_collected(node.name.value, self.classes) or any(b.endswith("TestCase") for b in bases)
            self.defs.append(_Def((*self._path(), node.name.value), self._start(node), is_test, True,
                                  bases=tuple(bases)))
        self.stack.append((node.name.value, True))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(id(node.attr))
        if isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
            self.attr_uses.append((node.attr.value, self._path()))
        else:
            self.other_attr_uses.append((node.attr.value, self._path()))

    def visit_Param(self, node: cst.Param) -> None:
        self._skip.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._skip:
            self.uses.append((node.value, self._path()))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.strings.append((node.value, self._path()))


@functools.lru_cache(maxsize=256)  # a scan is small (defs and name uses); 16 thrashed on semver (22 test files)
def _scan(text: str, names: tuple[tuple[str, ...], tuple[str, ...]] = (("Test",), ("test",))) -> _Scan:
    """The test file's definitions and name uses (``names``: the test class and function patterns,
    ``collected_names``); cached per text (read only: every candidate of a repository scans the same test
    files again). The tree and its positions are the ones the hiding's edit of the file uses (``cst_edit``):
    libcst took 18 s for each of the two on idna 3.20's 1.4 MB test file."""
    tree, positions = cst_edit.parsed(text)
    scan = _Scan(positions, names)
    tree.visit(scan)
    scan.positions = {}  # a cached scan must not keep the file's tree alive (``cst_edit.parsed`` holds 32, this 256)
    return scan


def _within(path: TestPath, removed: set[TestPath]) -> bool:
    return any(path[: len(r)] == r for r in removed)


def _inherited_from(scan: _Scan, path: TestPath, seen: frozenset[TestPath] = frozenset()) -> TestPath | None:
    """Where the test method ``path`` (``(Class, method)``) is defined, following the bases of ``Class``
    (classes of the same module, in the method resolution order of a simple hierarchy); None if nowhere."""
    if len(path) < 2:
        return None
    classes = {d.path: d for d in scan.defs if d.is_class}
    methods = {d.path for d in scan.defs if not d.is_class and not d.is_assign}
    owner = classes.get(path[:-1])
    if owner is None or owner.path in seen:
        return None
    for base in owner.bases:
        base_path = (*path[:-2], *base.split(".")) if (*path[:-2], *base.split(".")) in classes else (base,)
        if base_path not in classes:
            continue
        if (*base_path, path[-1]) in methods:
            return (*base_path, path[-1])
        found = _inherited_from(scan, (*base_path, path[-1]), seen | {owner.path})
        if found is not None:
            return found
    return None


def _base_tests(scan: _Scan) -> frozenset[TestPath]:
    """Test methods defined in a base class (a mixin, not itself collected) that a test class of the file
    inherits: frozenlist 1.8.0 defines all 52 of its tests on ``FrozenListMixin``; counting only the hidden
    one as the file's tests removed the file whole, and every candidate had no test left to pass."""
    methods = [d.path for d in scan.defs if not d.is_class and not d.is_assign and len(d.path) >= 2
               and name_collected(d.path[-1], scan.functions)]
    out: set[TestPath] = set()
    for cls in (d for d in scan.defs if d.is_class and d.is_test and d.bases):
        for m in methods:
            if m[:-1] != cls.path and _inherited_from(scan, (*cls.path, m[-1])) == m:
                out.add(m)
    return frozenset(out)


def _plan_file(scan: _Scan, wanted: set[TestPath], inherited: frozenset[TestPath] = frozenset(),
               keep: frozenset[str] = frozenset()) -> tuple[set[TestPath], set[TestPath], bool]:
    """``(removed test defs, removed helpers, whole file)`` for the hidden tests of one file;
    ``inherited``: methods of base classes that are removed as the tests they define; ``keep``: top-level
    names another test file imports from this one (the file and those classes stay)."""
    tests = {d.path for d in scan.defs if d.is_test and not d.is_class} | inherited
    removed = {p for p in tests if p in wanted}
    removed |= callers_of(scan, removed, tests)
    if tests and tests <= removed and not keep:
        return removed, set(), True
    # a test class whose tests are all hidden goes as a whole
    for d in scan.defs:
        if d.is_class and d.is_test and d.path[0] not in keep:
            inner = {p for p in tests if p[: len(d.path)] == d.path}
            if inner and inner <= removed and not any(n == d.path[-1] and not _within(where, {d.path})
                                                      for n, where in scan.uses):
                removed.add(d.path)
    helpers: set[TestPath] = set()
    changed = True
    while changed:
        changed = False
        gone = removed | helpers
        for d in scan.defs:
            if d.is_test or d.path in gone or _within(d.path, gone):
                continue
            name = d.path[-1]
            if len(d.path) == 1 and name in keep:  # another test module imports it
                continue
            if len(d.path) > 1 and name.startswith("__") and name.endswith("__"):
                # a special method runs without its name being written: jsonpickle 4.1.4's helper class
                # ``PickleProtocol2Thing`` lost ``__init__`` (named only in a hidden test's string), and the
                # module-level ``PickleProtocol2Thing('slotmagic')`` broke the file's collection (55 candidates)
                continue
            if len(d.path) == 1:
                uses = [where for n, where in scan.uses if n == name and not _within(where, {d.path})]
                uses += [dd.path for dd in scan.defs if name in dd.params and dd.path != d.path]
            else:  # a helper method of a class: self.name uses inside that class, and (a fixture) parameters
                uses = [where for n, where in scan.attr_uses if n == name
                        and where[: len(d.path) - 1] == d.path[:-1] and not _within(where, {d.path})]
                # and bare names in the class body itself (jsonpointer 3.12: ``Node = Node`` after ``class Node``)
                uses += [where for n, where in scan.uses if n == name and where == d.path[:-1]]
                # and ``obj.name`` anywhere (parso 0.8.7: kept tests call ``differ.parse(...)`` on a fixture's
                # ``Differ()``; the method went with the hidden tests and 11 kept tests failed): over-approximating
                # only keeps a helper
                uses += [where for n, where in scan.other_attr_uses if n == name and not _within(where, {d.path})]
                uses += [dd.path for dd in scan.defs if name in dd.params and dd.path != d.path]
            uses += [where for s, where in scan.strings if re.search(rf"\b{re.escape(name)}\b", s)
                     and not _within(where, {d.path})]
            if uses and all(w and _within(w, gone) for w in uses):
                helpers.add(d.path)
                changed = True
    return removed, helpers, False


def callers_of(scan: _Scan, removed: set[TestPath], tests: set[TestPath]) -> set[TestPath]:
    """The kept tests that name a removed test, transitively: they go with it, neither FAIL_TO_PASS nor
    PASS_TO_PASS. ijson 3.6.0's ``test_basic_parse_threaded`` runs ``test_basic_parse`` in a thread, whose
    exception fails nothing: it passed without the feature, stayed, and failed on the missing name, which
    rejected 20 of its candidates as ``suite_red_after_deletion``. A bare name for a module-level test, ``self.``
    or ``cls.`` for a test method of the same class."""
    def enclosing(where: TestPath) -> TestPath | None:
        return next((where[:k] for k in range(len(where), 0, -1) if where[:k] in tests), None)

    along: set[TestPath] = set()
    while True:
        gone = removed | along
        names = {p[0] for p in gone if len(p) == 1}
        new = {t for n, where in scan.uses if n in names and (t := enclosing(where)) is not None}
        new |= {t for n, where in scan.attr_uses
                if (t := enclosing(where)) is not None and len(t) > 1 and (*t[:-1], n) in gone}
        new -= gone
        if not new:
            return along
        along |= new


def hide_tests(repo_root: Path, fail_to_pass: Iterable[str], index: StaticIndex | None = None,
               deleted: Iterable[str] = ()) -> HiddenTests:
    """Remove the ``fail_to_pass`` tests (and what only they used) from the files under ``repo_root``."""
    repo_root = Path(repo_root)
    wanted: dict[str, set[TestPath]] = defaultdict(set)
    for nid in fail_to_pass:
        parts = normalize_nodeid(nid).split("::")
        wanted[parts[0]].add(tuple(parts[1:]))
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}
    hidden: list[str] = []
    unmatched: list[str] = []
    helpers_out: list[str] = []
    inherited_out: list[str] = []
    along_out: list[str] = []
    removed_files: list[str] = []
    notes: list[str] = []
    import_edits = _test_import_edits(index, set(deleted)) if index is not None else {}
    patterns = collected_names(repo_root)
    modules = frozenset(q for q in deleted if index is not None and (e := index.get(q)) is not None
                        and e.kind is EntityKind.MODULE)
    moved = _follow_imports(repo_root, wanted)  # {(defining file, path): id where pytest collects it}
    across = _follow_bases(repo_root, wanted, patterns)  # {(defining file, path): ids collected from subclasses}
    keep = {rel: frozenset(p[0] for r, p in [*moved, *across] if r == rel) for rel, _ in [*moved, *across]}
    texts = python_texts(repo_root) if wanted else []  # read once for every file below
    for rel in wanted:  # helpers another test module imports (tenacity: test_asyncio.py imports from test_tenacity)
        if names := imported_elsewhere(repo_root, rel, texts=texts):
            keep[rel] = keep.get(rel, frozenset()) | names
    def collected_id(rel: str, p: TestPath) -> str:
        """The id pytest collects: where a moved test was wanted, not where it is defined (pyyaml 6.0.4's
        ``test_yaml.py::test_composer::<data file>`` items, made by its conftest from ``test_structure.py``'s
        function: the caller matches unmatched ids against the collected ones to leave such generated tests
        out, and 446 of 587 decided candidates were transform_failed)."""
        return moved.get((rel, p), f"{rel}::{'::'.join(p)}")

    for rel in sorted(set(wanted) | set(import_edits)):
        path = repo_root / rel
        if not path.is_file():
            unmatched.extend(collected_id(rel, p) for p in sorted(wanted.get(rel, ())))
            continue
        text = path.read_bytes().decode("utf-8")
        scan = _scan(text, patterns)
        want = wanted.get(rel, set())
        known = {d.path for d in scan.defs if d.is_test and not d.is_class}
        based = {p for p in want - known if (rel, p) in across}  # a mixin's method other files' classes inherit
        via_base = {p: b for p in want - known - based if (b := _inherited_from(scan, p)) is not None}
        unmatched.extend(collected_id(rel, p) for p in sorted(want - known - set(via_base) - based))
        removed, helpers, whole = _plan_file(scan, (want & known) | set(via_base.values()) | based,
                                             (frozenset(via_base.values()) | based | _base_tests(scan)) - known,
                                             keep.get(rel, frozenset()))
        hidden.extend(f"{rel}::{'::'.join(p)}" for p in sorted((want & known) | set(via_base)))
        went_along = sorted((removed & known) - want)  # callers_of: hidden, graded nowhere
        hidden.extend(f"{rel}::{'::'.join(p)}" for p in went_along)
        along_out.extend(f"{rel}::{'::'.join(p)}" for p in went_along)
        inherited_out.extend(f"{rel}::{'::'.join(p)}" for p in sorted(via_base))
        collected_as = [moved[(rel, p)] for p in sorted((want & known) | set(via_base)) if (rel, p) in moved] + \
            [n for p in sorted((want & known) | based) for n in across.get((rel, p), ())]
        hidden.extend(collected_as)
        inherited_out.extend(collected_as)
        before[rel] = text
        if whole:
            after[rel] = None
            removed_files.append(rel)
            continue
        lines = {d.path: d.line for d in scan.defs}
        removing = removed | helpers  # the outermost of them (a class, not also each of its methods); by
        # prefixes, as _within against all the others was quadratic (idna: 6,300 tests of one file, 40 M compares)
        gone = {p for p in removing if not any(p[:k] in removing for k in range(1, len(p)))}
        assigns = {d.path for d in scan.defs if d.is_assign}
        edit = cst_edit.FileEdit(
            module="", remove_defs=frozenset((".".join(p), lines[p]) for p in gone - assigns),
            remove_statement_lines=frozenset(lines[p] for p in gone & assigns),
            remove_imports=import_edits.get(rel, {}), remove_import_modules=modules)
        result = cst_edit.edit_file(text, edit)
        fin = cst_edit.finalize(text, result.text)
        new_text, dropped = fin.text, fin.dropped
        after[rel] = new_text
        helpers_out.extend(f"{rel}::{'::'.join(p)}" for p in sorted(helpers))
        if dropped:
            notes.append(f"{rel}: removed imports made unused: {', '.join(sorted(dropped))}")
    changed = {k for k in before if before[k] != after.get(k)}
    return HiddenTests(
        hidden=tuple(hidden), files_before={k: before[k] for k in sorted(changed)},
        files_after={k: after[k] for k in sorted(changed)}, removed_files=tuple(removed_files),
        helpers=tuple(helpers_out), unmatched=tuple(unmatched), notes=tuple(notes),
        inherited=tuple(inherited_out), along=tuple(along_out),
    )


_SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build",
                        "site-packages", ".eggs"})


def imported_elsewhere(repo_root: Path, rel: str, exclude: frozenset[str] = frozenset(),
                       texts: Sequence[tuple[str, str]] | None = None) -> frozenset[str]:
    """Top-level names of the module ``rel`` that another file of the repository imports (``from .test_x
    import Helper``; ``import tests.test_x`` or ``*`` count as every top-level name); ``exclude`` files do not
    count as importers. Those names must stay when ``rel``'s tests are hidden, and so must the file.
    ``texts``: the repository's python files, as ``python_texts`` reads them (read here when not given)."""
    stem = Path(rel).stem
    if stem == "__init__":
        return frozenset()
    names: set[str] = set()
    everything = False
    for other, text in (python_texts(repo_root) if texts is None else texts):
        if other == rel or other in exclude or stem not in text:
            continue
        try:
            with warnings.catch_warnings():  # invalid escapes and the like in files that are not ours
                warnings.simplefilter("ignore")
                tree = pyparse.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if _resolves_to(repo_root, other, node.module, node.level, rel):
                    if any(a.name == "*" for a in node.names):
                        everything = True
                    names.update(a.name for a in node.names)
                elif any(_resolves_to(repo_root, other, ".".join(filter(None, (node.module, a.name))), node.level,
                                      rel) for a in node.names):
                    everything = True  # from tests import test_x: the module as a whole
            elif isinstance(node, ast.Import) and any(_resolves_to(repo_root, other, a.name, 0, rel)
                                                       for a in node.names):
                everything = True
    if not everything:
        return frozenset(names - {"*"})
    try:
        top = {d.path[0] for d in _scan((repo_root / rel).read_bytes().decode("utf-8", errors="replace")).defs}
    except (OSError, cst.ParserSyntaxError):
        top = set()
    return frozenset((names | top) - {"*"})


def python_texts(repo_root: Path) -> list[tuple[str, str]]:
    """(relative path, text) of every python file of the repository, caches and environments skipped."""
    out = []
    for path in _python_files(repo_root):
        try:
            out.append((path.relative_to(repo_root).as_posix(), path.read_bytes().decode("utf-8", errors="replace")))
        except OSError:
            continue
    return out


def _python_files(repo_root: Path) -> Iterable[Path]:
    stack = [repo_root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                if entry.name not in _SKIP_DIRS and not entry.name.endswith(".egg-info"):
                    stack.append(entry)
            elif entry.suffix == ".py":
                yield entry


def _resolves_to(repo_root: Path, importer: str, module: str | None, level: int, rel: str) -> bool:
    """Whether ``from <level dots><module> import ...`` (or ``import module``) in ``importer`` names ``rel``."""
    parts = module.split(".") if module else []
    if not parts:
        return False
    here = Path(importer).parent
    bases = [here.joinpath(*[".."] * (level - 1))] if level else [*import_bases(repo_root, importer),
                                                                  *_src_roots(repo_root)]
    for base in bases:
        cand = base.joinpath(*parts).with_suffix(".py")
        try:
            if (repo_root / cand).resolve().relative_to(repo_root.resolve()).as_posix() == rel:
                return True
        except ValueError:
            continue
    return False


def _src_roots(repo_root: Path) -> list[Path]:
    return [Path(d) for d in ("src", "lib") if (repo_root / d).is_dir()]


def _follow_imports(repo_root: Path, wanted: dict[str, set[TestPath]]) -> dict[tuple[str, TestPath], str]:
    """Move each wanted test whose class or function its file does not define, but imports from another
    file of the repository (by name, or ``*``), to that file (``taskforge.core.test_homes``):
    ``{(defining file, path): collected id}``."""
    ids = [f"{rel}::{'::'.join(p)}" for rel in sorted(wanted) for p in sorted(wanted[rel])]
    moved: dict[tuple[str, TestPath], str] = {}
    for collected, home in test_homes(repo_root, ids).moved.items():
        rel, target = collected.split("::", 1)[0], home.split("::", 1)[0]
        p = tuple(collected.split("::")[1:])
        wanted[rel].discard(p)
        wanted[target].add(p)
        moved[(target, p)] = collected
    return moved


def _follow_bases(repo_root: Path, wanted: dict[str, set[TestPath]],
                  patterns: tuple[tuple[str, ...], tuple[str, ...]]) -> dict[tuple[str, TestPath], list[str]]:
    """Move each wanted test method that its class inherits from a base class defined in another file (imported
    by name) to the class that defines it there: ``{(defining file, path there): [collected ids]}``.

    itsdangerous 2.2.0: ``test_url_safe.py``'s ``TestURLSafeSerializer(TestSerializer)`` imports its base from
    ``test_serializer.py``, so pytest collects the base's methods under the subclass; such ids were ``unmatched``
    and 6 candidates were rejected (3 ``transform_failed``, 3 ``no_fail_to_pass``). Removing the method from the
    base hides it from every class that inherits it; the caller confirms by collection what is left."""
    out: dict[tuple[str, TestPath], list[str]] = defaultdict(list)
    files = _Files(repo_root, patterns)
    for rel in sorted(wanted):
        for p in sorted(wanted[rel]):
            if len(p) != 2 or (home := _home_across(files, rel, p)) is None:
                continue
            wanted[rel].discard(p)
            wanted[home[0]].add(home[1])
            out[home].append(f"{rel}::{'::'.join(p)}")
    return dict(out)


class _Files:
    """The test files ``_home_across`` looks at, each read, scanned and parsed once per ``hide_tests`` call
    (mako: 593 FAIL_TO_PASS ids in a few files; reading and parsing per id took 4.9 s a candidate)."""

    def __init__(self, root: Path, patterns: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        self.root, self.patterns = root, patterns
        self.views: dict[str, tuple[_Scan, dict[TestPath, _Def], frozenset[TestPath], str] | None] = {}
        self.trees: dict[str, ast.Module | None] = {}  # also ``defining_file``'s cache

    def view(self, rel: str) -> tuple[_Scan, dict[TestPath, _Def], frozenset[TestPath], str] | None:
        """(scan, classes by path, methods, text) of ``rel``; None when it cannot be read or parsed."""
        if rel not in self.views:
            try:
                text = (self.root / rel).read_bytes().decode("utf-8", errors="replace")
                scan = _scan(text, self.patterns)
            except (OSError, cst.ParserSyntaxError):
                self.views[rel] = None
            else:
                self.views[rel] = (scan, {d.path: d for d in scan.defs if d.is_class},
                                   frozenset(d.path for d in scan.defs if not d.is_class and not d.is_assign), text)
        return self.views[rel]

    def tree(self, rel: str, text: str) -> ast.Module | None:
        if self.trees.get(rel) is None:
            try:
                self.trees[rel] = pyparse.parse(text)
            except (SyntaxError, ValueError):
                return None
        return self.trees[rel]


def _home_across(files: _Files, rel: str, p: TestPath, depth: int = 3) -> tuple[str, TestPath] | None:
    """Where the method ``p`` (``(Class, method)``) of ``rel`` is defined when the class inherits it, through
    its classes of the same file, from a class another file defines (followed up to ``depth`` files); None
    when it is defined or inherited in ``rel`` itself, or found nowhere."""
    view = files.view(rel)
    if view is None or depth <= 0:
        return None
    scan, classes, methods, text = view
    if p[:-1] not in classes or p in methods:
        return None
    seen, queue, outside = {p[:-1]}, [p[:-1]], []
    while queue:  # the class and its bases of this file, in order; the bases they name from elsewhere
        for base in classes[queue.pop(0)].bases:
            if (base,) in classes and (base,) not in seen:
                seen.add((base,))
                queue.append((base,))
            elif (base,) not in classes and base.isidentifier() and base not in outside:
                outside.append(base)
    if not outside or _inherited_from(scan, p) is not None or (tree := files.tree(rel, text)) is None:
        return None
    for base in outside:
        other = defining_file(files.root, rel, tree, base, files.trees)
        there = files.view(other) if other is not None and other != rel else None
        if other is None or there is None:
            continue
        if (base, p[-1]) in there[2]:
            return other, (base, p[-1])
        if (found := _inherited_from(there[0], (base, p[-1]))) is not None:
            return other, found
        if (found_across := _home_across(files, other, (base, p[-1]), depth - 1)) is not None:
            return found_across
    return None


def _test_import_edits(index: StaticIndex, deleted: set[str]) -> dict[str, dict[int, frozenset[str]]]:
    """Module-level imports of deleted entities in test files: ``{file: {line: names}}``."""
    out: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for q in deleted:
        e = index.get(q)
        if e is None:
            continue
        for r in e.references:
            if r.is_test and r.kind == "import" and not r.in_entity:
                out[r.file][r.line].update({q.rsplit(".", 1)[-1], q})
    return {f: {line: frozenset(names) for line, names in d.items()} for f, d in out.items()}
