"""Features: the code that one group of related tests reaches and no other passing test needs.

A *test group* is the reliable tests of one test class (``path::Class``), of one test module
(``path``), or every reliable test that reaches one public entity (``reach:pkg.mod.name``: the tests
of that entry point, across test files). Its *feature*, from the per-test coverage map and the static
index:

1. *exclusive* entities: functions, methods and classes of the project's own code whose body some test
   of the group executes and no reliable test outside the group executes (dunder methods only as part
   of a class; test-support modules never);
2. a class goes only with all of its members (each exclusive or never executed); otherwise it stays
   and its exclusive methods may go one by one;
3. pruned to a fixpoint: an entity still used (call, name, attribute, function-local import) by code
   that stays, or at module level, stays, and so does everything it uses;
4. private helpers that no test executes and only the feature uses, transitively, go with it.

Code a test module runs when it is collected (a schema class defined at its top level runs the
metaclass, field constructors, ``__init_subclass__``) belongs to no test in the coverage map; it is
attributed to every test of that module (``collection_needs``), since without it none of them collects;
what a test-support module (no tests of its own: ``conftest.py``, a shared ``base.py``) runs at import is
attributed to every test. A method that implements an abstract method (a name some class declares with
``@abstractmethod``) only goes with its class: alone, its removal would make the class abstract.

Before the pruning, a top-level entity is *pinned* (kept) when some ``from <project module> import
<its name>`` or ``<imported project module>.<its name>`` resolves to no entity in the index (a name
re-exported through ``import *``, which the index cannot follow) in code that stays: a non-test file,
or a test file with tests outside the group. Deleting it would break that import.

Module-level imports, re-exports and ``__all__`` entries of the deleted names are the deletion's
business (``generators.strategy_delete.deletion_edits``), as for the other strategies. The feature is
deterministic in the profile and the group key, so a validation worker recomputes it from the key.
``FeatureBounds`` keeps features within a size (top-level entities, lines, files).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from generators.candidates import Candidate, skip_reason
from generators.deletion_build import USE_KINDS, is_use, top_level
from generators.static_index import StaticIndex
from taskforge.core import pyparse
from taskforge.core.entities import Entity, EntityKind
from taskforge.core.outcomes import RejectReason

_DELETABLE = (EntityKind.FUNCTION, EntityKind.METHOD, EntityKind.CLASS)
MAX_ROUNDS = 200
REACH = "reach:"


@dataclass(frozen=True, slots=True)
class FeatureBounds:
    """Size limits of one feature (top-level entities, their source lines, their files)."""

    min_entities: int = 2
    max_entities: int = 40
    max_lines: int = 2000
    max_files: int = 20

    @classmethod
    def from_settings(cls, settings: Any) -> FeatureBounds:
        return cls(settings.feature_min_entities, settings.feature_max_entities, settings.feature_max_lines,
                   settings.feature_max_files)

    def admits(self, feature: Feature) -> bool:
        return (self.min_entities <= len(feature.interface) <= self.max_entities
                and feature.lines <= self.max_lines and len(feature.files) <= self.max_files)


@dataclass(frozen=True, slots=True)
class Feature:
    key: str  # the test group: "tests/test_x.py" or "tests/test_x.py::TestY"
    anchor: str  # the largest public top-level entity (the candidate's entity)
    entities: tuple[str, ...]  # everything deleted, anchor first
    interface: tuple[str, ...]  # top-level deleted entities (what the statement lists)
    helpers: tuple[str, ...]  # private helpers no test executes, deleted because only the feature used them
    tests: tuple[str, ...]  # reliable tests executing the feature (all in the group)
    files: tuple[str, ...]
    lines: int  # source lines of the top-level deleted definitions


def group_key(nodeid: str, level: str) -> str:
    """``path::Class`` (level ``class``; a module-level test function: its ``path``) or ``path``."""
    parts = nodeid.split("[", 1)[0].split("::")
    if level == "class" and len(parts) >= 3:
        return "::".join(parts[:2])
    return parts[0]


def group_tests(tests: Iterable[str]) -> dict[str, frozenset[str]]:
    """Every class-level and module-level group of ``tests``, by key (a key may be both: one group)."""
    groups: dict[str, set[str]] = defaultdict(set)
    for n in tests:
        for level in ("class", "module"):
            groups[group_key(n, level)].add(n)
    return {k: frozenset(v) for k, v in sorted(groups.items())}


class FeatureIndex:
    """Coverage of every deletable entity by reliable tests, computed once per profile."""

    def __init__(self, profile: Any) -> None:
        self.index: StaticIndex = profile.index
        self.reliable = frozenset(profile.baseline.reliable)
        self.groups = group_tests(self.reliable)
        self.unresolved = unresolved_imports(profile.repo_dir, self.index)
        self.abstract = frozenset(e.qualname.rsplit(".", 1)[-1] for e in profile.entities
                                  if any("abstractmethod" in d for d in e.decorators))
        self.covered: dict[str, frozenset[str]] = {}
        for e in profile.entities:
            if e.kind not in _DELETABLE or e.statements <= 0:
                continue
            tests = _tests_for(e, profile.coverage, self.reliable)
            if skip_reason(e, frozenset({"-"})) is not RejectReason.TEST_ONLY_CODE:
                self.covered[e.qualname] = tests
        for file, needs in collection_needs(self.index).items():
            tests = self.groups.get(file) or self.reliable  # a support module: every test imports it
            for q in needs & set(self.covered):
                self.covered[q] = self.covered[q] | tests

    def group(self, key: str) -> frozenset[str]:
        if key.startswith(REACH):
            return self.covered.get(key[len(REACH):], frozenset())
        return self.groups.get(key, frozenset())

    def keys(self) -> list[str]:
        """Every group key: class groups, module groups, then the reach of each public entity."""
        reach = [REACH + q for q, tests in sorted(self.covered.items())
                 if tests and not self.index.entity(q).is_private and not _dunder(self.index.entity(q))]
        return sorted(self.groups, key=lambda k: (k.count("::") == 0, k)) + reach

    def feature(self, key: str) -> Feature | None:
        """The feature of test group ``key`` (None: the group reaches no code of its own)."""
        group = self.group(key)
        if not group:
            return None
        index = self.index
        size = len(group)
        chosen = {q for q, tests in self.covered.items() if tests and len(tests) <= size and tests <= group
                  and not _dunder(index.entity(q))}
        chosen -= self._pinned(chosen, group)
        chosen = _whole_classes(chosen, self.covered, group, index)
        chosen = {q for q in chosen if q.rsplit(".", 1)[-1] not in self.abstract or _owner(q, index) in chosen
                  or index.entity(q).kind is not EntityKind.METHOD}
        chosen = _prune(chosen, index)
        if not chosen:
            return None
        helpers = _helpers(chosen, self.covered, index)
        chosen |= set(helpers)
        ents = [index.entity(q) for q in chosen]
        tops = sorted(top_level(ents, index), key=lambda e: (e.file, e.start_line))
        public = [e for e in tops if not e.is_private]
        if not public:
            return None
        anchor = max(public, key=lambda e: (e.end_line - e.start_line, e.qualname))
        ordered = [anchor.qualname] + sorted(q for q in chosen if q != anchor.qualname)
        tests = frozenset().union(*(self.covered.get(q, frozenset()) for q in chosen))
        return Feature(key, anchor.qualname, tuple(ordered), tuple(e.qualname for e in tops), tuple(sorted(helpers)),
                       tuple(sorted(tests)), tuple(sorted({e.file for e in tops})),
                       sum(e.end_line - e.start_line + 1 for e in tops))

    def _pinned(self, chosen: set[str], group: frozenset[str]) -> set[str]:
        """Chosen top-level entities that an unresolved import in code that stays needs (docstring)."""
        pinned = set()
        for q in chosen:
            e = self.index.entity(q)
            mod = self.index.module_for_file(e.file)
            if mod is None or q != f"{mod.qualname}.{q.rsplit('.', 1)[-1]}":
                continue
            for file, is_test in self.unresolved.get(q.rsplit(".", 1)[-1], ()):
                if not is_test or self._file_tests(file) - group:
                    pinned.add(q)
                    break
        return pinned

    def _file_tests(self, file: str) -> frozenset[str]:
        return self.groups.get(file, frozenset())

    def features(self, bounds: FeatureBounds) -> list[Feature]:
        """The distinct features within ``bounds``, one per entity set (the smaller group key wins)."""
        seen: set[tuple[str, ...]] = set()
        out: list[Feature] = []
        for key in self.keys():  # class groups first: the smaller group key wins
            f = self.feature(key)
            if f is None or not bounds.admits(f) or len(f.tests) >= len(self.reliable):  # no test left to pass
                continue
            ident = tuple(sorted(f.entities))
            if ident in seen:
                continue
            seen.add(ident)
            out.append(f)
        return sorted(out, key=lambda f: f.key)


_CLASS_HOOKS = ("__init_subclass__", "__new__", "__init__", "__set_name__", "__class_getitem__", "__call__")


def collection_needs(index: StaticIndex) -> dict[str, set[str]]:
    """``test file -> entities its module-level code runs`` (at collection, outside every test)."""
    seeds: dict[str, set[str]] = defaultdict(set)
    for e in index.entities:
        for r in e.references:
            if r.is_test and r.kind in USE_KINDS and _collection_time(r.in_entity):
                seeds[r.file].add(e.qualname)
    memo: dict[str, set[str]] = {}
    return {f: set().union(*(_runs_with(q, index, memo) for q in qs)) for f, qs in seeds.items()}


def _collection_time(in_entity: str) -> bool:
    """Module level, or a class body of the test module (a class name is capitalised; a test is not)."""
    return not in_entity or in_entity.rsplit(".", 1)[-1][:1].isupper()


def _runs_with(q: str, index: StaticIndex, memo: dict[str, set[str]]) -> set[str]:
    """What using ``q`` at import time runs: a function with everything it uses; a class with its
    header and body outside the methods, and its construction hooks."""
    if q in memo:
        return memo[q]
    done: set[str] = set()
    todo = [q]
    while todo:
        cur = todo.pop()
        if cur in done or cur not in index:
            continue
        done.add(cur)
        e = index.entity(cur)
        if e.kind is EntityKind.CLASS:
            methods = [m for m in index.members(cur) if m.kind is EntityKind.METHOD]
            todo.extend(f"{cur}.{h}" for h in _CLASS_HOOKS)
            for dq in index.dependencies(cur, kinds=USE_KINDS):
                refs = index.entity(dq).references
                if any(index.ref_inside(r, e) and not any(index.ref_inside(r, m) for m in methods) for r in refs):
                    todo.append(dq)
        elif e.kind is not EntityKind.MODULE:
            todo.extend(index.dependencies(cur, kinds=USE_KINDS))
    memo[q] = done
    return done


def unresolved_imports(root: Any, index: StaticIndex) -> dict[str, set[tuple[str, bool]]]:
    """``name -> {(file, is_test)}`` of ``from <project module> import name`` and ``<project module>.name``
    that no entity records."""
    import ast
    from pathlib import Path

    tops = {q.split(".", 1)[0] for q in (e.qualname for e in index.entities if e.kind is EntityKind.MODULE)}
    recorded = {(r.file, r.line, e.qualname.rsplit(".", 1)[-1]) for e in index.entities for r in e.references
                if r.kind != "dynamic"}
    out: dict[str, set[tuple[str, bool]]] = defaultdict(set)
    for rel, is_test in [(f, False) for f in index.source_files] + [(f, True) for f in index.test_files]:
        try:
            tree = pyparse.parse((Path(root) / rel).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        modules = {(a.asname or a.name).split(".", 1)[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                   for a in n.names if a.name.split(".", 1)[0] in tops}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                if (rel, node.lineno, node.attr) not in recorded:
                    out[node.attr].add((rel, is_test))
                continue
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 0 and (node.module or "").split(".", 1)[0] not in tops:
                continue
            for alias in node.names:
                if alias.name != "*" and (rel, node.lineno, alias.name) not in recorded \
                        and (rel, alias.lineno, alias.name) not in recorded:
                    out[alias.name].add((rel, is_test))
    return dict(out)


def _tests_for(e: Entity, coverage: Any, among: frozenset[str]) -> frozenset[str]:
    if e.kind is EntityKind.CLASS:  # any line of the class: its methods' bodies and its own body
        return coverage.tests_for_lines(e.file, e.start_line, e.end_line, among=among)
    return coverage.tests_for_entity(e, among=among)


def _dunder(e: Entity) -> bool:
    name = e.qualname.rsplit(".", 1)[-1]
    return e.kind is EntityKind.METHOD and name.startswith("__") and name.endswith("__")


def _whole_classes(chosen: set[str], covered: Mapping[str, frozenset[str]], group: frozenset[str],
                   index: StaticIndex) -> set[str]:
    """Classes go with all their members; a class with a member other tests run stays (members may go)."""
    out = set(chosen)
    for q in sorted(chosen):
        e = index.entity(q)
        if e.kind is not EntityKind.CLASS:
            continue
        members = index.members(q)
        if all(covered.get(m.qualname, frozenset()) <= group for m in members):
            out.update(m.qualname for m in members)
        else:
            out.discard(q)
    # a method whose class stays must not be a dunder (it would go on its own)
    return {q for q in out if not (_dunder(index.entity(q)) and _owner(q, index) not in out)}


def _owner(q: str, index: StaticIndex) -> str:
    parent = q.rsplit(".", 1)[0]
    return parent if parent in index else ""


def _prune(chosen: set[str], index: StaticIndex) -> set[str]:
    """Drop entities that remaining code (or module-level code) uses, until nothing changes."""
    s = set(chosen)
    for _ in range(MAX_ROUNDS):
        owners = [index.entity(q) for q in s]
        drop: set[str] = set()
        for q in s:
            for r in index.entity(q).references:
                if not is_use(r):
                    continue
                if not r.in_entity or not any(index.ref_inside(r, o) for o in owners):
                    drop.add(q)
                    break
        # a class that stays keeps its members' owner; a member that stays keeps its class
        for q in list(s - drop):
            e = index.entity(q)
            if e.kind is EntityKind.CLASS and any(m.qualname not in s or m.qualname in drop
                                                  for m in index.members(q)):
                drop.add(q)
        if not drop:
            return s
        s -= drop
        s = {q for q in s if not (_dunder(index.entity(q)) and _owner(q, index) not in s)}
    return s


def _helpers(chosen: set[str], covered: Mapping[str, frozenset[str]], index: StaticIndex) -> list[str]:
    """Private functions/classes no test executes that only the chosen code uses (transitively)."""
    s = set(chosen)
    found: list[str] = []
    changed = True
    while changed:
        changed = False
        owners = [index.entity(q) for q in s]
        for q in sorted(s):
            for dq in index.dependencies(q, kinds=USE_KINDS):
                if dq in s or covered.get(dq):
                    continue
                h = index.entity(dq)
                if not h.is_private or h.kind not in _DELETABLE or _dunder(h) or h.statements <= 0:
                    continue
                uses = [r for r in h.references if is_use(r) and not index.ref_inside(r, h)]
                if uses and all(r.in_entity and any(index.ref_inside(r, o) for o in owners) for r in uses):
                    s.add(dq)
                    s.update(m.qualname for m in index.members(dq))
                    found.append(dq)
                    changed = True
                    break
            if changed:
                break
    return found


def feature_candidates(fidx: FeatureIndex, bounds: FeatureBounds, strategy: str = "feature") -> list[Candidate]:
    """One candidate per feature; rank as for single entities, on the whole feature."""
    out = []
    for f in fidx.features(bounds):
        rank = math.log2(1 + len(f.tests)) + math.log2(1 + f.lines) + 0.5 * math.log2(1 + len(f.interface))
        why = (f"feature of {f.key}: {len(f.interface)} entities ({len(f.entities)} with members), "
               f"{f.lines} lines over {len(f.files)} files, {len(f.tests)} tests")
        out.append(Candidate(f"{strategy}:{f.key}", strategy, f.anchor, f.tests, round(rank, 4), why))
    return out
