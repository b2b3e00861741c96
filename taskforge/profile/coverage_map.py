"""Per-test line coverage of the project's own code: for every line, which tests executed it.

Built from one coverage run of the whole suite (coverage.py with one dynamic context per test, see
``sandboxes/runner/pytest_runner.py``). On disk (``coverage.json``), node ids are stored once and lines refer to
them by index::

    {"schema_version": 1, "tests": ["tests/test_a.py::test_x", ...],
     "files": {"pkg/mod.py": {"12": [0, 3], "13": [0]}}, "outside": {"pkg/mod.py": [1, 2, 12]}}

``outside`` holds the lines executed outside every test and outside their collection (the runner's empty
context: conftests, the import of the package, which the runner does before collecting, session hooks): a
stub of a function whose body ran there breaks every test. ``collection`` holds the lines run while the tests
were collected (``COLLECTION_CONTEXT``: test modules' module-level code, ``pytest_generate_tests``): a stub
of what ran there breaks the collection of the test files that ran it. Maps written before ``collection``
have it in ``outside``, and maps written before ``outside`` have neither.

In a large, heavily parametrized suite the runner names a context by the test *function*, not by each
instance (``pytest_runner.ReportPlugin``: packaging's 64,204 tests are 1,190 functions). Such a context is
not a node id of the run; ``from_contexts(..., nodeids=...)`` records its instances (``instances``, on disk
``{"instances": {"<index into tests>": [node ids]}}``) and every query answers with the instances: a
function's instances count as covering a line when any of them ran it (more tests to run, never fewer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskforge.core.entities import Entity
from taskforge.core.files import write_atomic

SCHEMA_VERSION = 1
COLLECTION_CONTEXT = "<collection>"  # sandboxes/runner/pytest_runner.py's context while the tests are collected


@dataclass(frozen=True, slots=True)
class CoverageMap:
    """``lines[file][line]`` = node ids of the tests that executed that line (files workspace-relative)."""

    lines: Mapping[str, Mapping[int, frozenset[str]]] = field(default_factory=dict)
    outside: Mapping[str, frozenset[int]] = field(default_factory=dict)  # lines run outside every test
    instances: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # a function's context -> node ids
    collection: Mapping[str, frozenset[int]] = field(default_factory=dict)  # lines run collecting the tests

    @classmethod
    def from_contexts(cls, contexts: Mapping[str, Mapping[int, Iterable[str]]],
                      nodeids: Iterable[str] = ()) -> CoverageMap:
        """From the runner's ``{file: {line: [contexts]}}``; the empty context goes to ``outside``, the
        collection's to ``collection``. ``nodeids``: the tests of the run, to map a test function's context
        to its instances."""
        lines: dict[str, dict[int, frozenset[str]]] = {}
        outside: dict[str, frozenset[int]] = {}
        collection: dict[str, frozenset[int]] = {}
        not_tests = {"", COLLECTION_CONTEXT}
        for f, per in contexts.items():
            name = os.path.normpath(f).replace(os.sep, "/")
            by_line = {int(ln): frozenset(ids) for ln, ids in per.items()}
            tests = {ln: ids - not_tests for ln, ids in by_line.items() if ids - not_tests}
            if tests:
                lines[name] = tests
            for context, into in (("", outside), (COLLECTION_CONTEXT, collection)):
                ran = frozenset(ln for ln, ids in by_line.items() if context in ids)
                if ran:
                    into[name] = ran
        return cls(lines, outside, _instances(lines, nodeids), collection)

    def ran_outside_tests(self, entity: Entity) -> bool:
        """Whether a line of ``entity``'s body ran outside every test: at the package's import or while the
        tests were collected (module docstring); a stub of it breaks the collection of some test file."""
        return self.ran_at_import(entity) or _ran(self.collection, entity)

    def ran_at_import(self, entity: Entity) -> bool:
        """Whether a line of ``entity``'s body ran outside every test and outside their collection: at the
        import of the package or of a conftest (module docstring); a stub of it breaks every test."""
        return _ran(self.outside, entity)

    @property
    def tests(self) -> frozenset[str]:
        return self._expand(self._contexts())

    def _contexts(self) -> set[str]:
        return {t for per in self.lines.values() for ids in per.values() for t in ids}

    def _expand(self, contexts: Iterable[str]) -> frozenset[str]:
        if not self.instances:
            return frozenset(contexts)
        out: set[str] = set()
        for c in contexts:
            out.update(self.instances.get(c, (c,)))
        return frozenset(out)

    def tests_for_lines(self, file: str, start: int, end: int,
                        among: Iterable[str] | None = None) -> frozenset[str]:
        """Tests that executed any line in ``start..end`` (inclusive) of ``file``, optionally only ``among``."""
        per = self.lines.get(file, {})
        found: set[str] = set()
        for ln, ids in per.items():
            if start <= ln <= end:
                found |= ids
        tests = self._expand(found)
        return tests if among is None else tests & frozenset(among)

    def lines_run_by(self, file: str, lines: Iterable[int], among: Iterable[str]) -> dict[str, frozenset[int]]:
        """For each test of ``among`` that executed one of ``lines`` of ``file``: the ones it executed."""
        per = self.lines.get(file, {})
        keep = frozenset(among)
        out: dict[str, set[int]] = {}
        for ln in lines:
            for test in self._expand(per.get(ln, ())) & keep:
                out.setdefault(test, set()).add(ln)
        return {t: frozenset(v) for t, v in out.items()}

    def tests_for_entity(self, entity: Entity, among: Iterable[str] | None = None) -> frozenset[str]:
        """Tests that executed the entity's *body* (not just its ``def`` line), or the body of one of its
        alternates (``if``/``else`` implementations: the one this Python runs may be either)."""
        return frozenset().union(*(self.tests_for_lines(entity.file, start, end, among)
                                   for start, end in entity.body_spans))

    def covered_lines(self, file: str) -> frozenset[int]:
        return frozenset(self.lines.get(file, {}))

    def restricted_to(self, tests: Iterable[str]) -> CoverageMap:
        """The same map with only ``tests`` (e.g. the reliable ones); lines nobody else ran drop out."""
        keep = frozenset(tests)
        instances = {c: kept for c, ids in self.instances.items() if (kept := tuple(i for i in ids if i in keep))}
        keep_contexts = keep | frozenset(instances)
        out: dict[str, dict[int, frozenset[str]]] = {}
        for f, per in self.lines.items():
            lines = {ln: ids & keep_contexts for ln, ids in per.items() if ids & keep_contexts}
            if lines:
                out[f] = lines
        return CoverageMap(out, self.outside, instances, self.collection)

    def to_dict(self) -> dict[str, Any]:
        tests = sorted(self._contexts())
        index = {t: i for i, t in enumerate(tests)}
        return {
            "schema_version": SCHEMA_VERSION, "tests": tests,
            "files": {f: {str(ln): sorted(index[t] for t in ids) for ln, ids in sorted(per.items())}
                      for f, per in sorted(self.lines.items())},
            **({"outside": {f: sorted(v) for f, v in sorted(self.outside.items())}} if self.outside else {}),
            **({"collection": {f: sorted(v) for f, v in sorted(self.collection.items())}} if self.collection else {}),
            **({"instances": {str(index[c]): list(ids) for c, ids in sorted(self.instances.items()) if c in index}}
               if self.instances else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CoverageMap:
        version = int(d.get("schema_version", SCHEMA_VERSION))
        if version != SCHEMA_VERSION:
            raise ValueError(f"coverage map schema {version} is not supported (expected {SCHEMA_VERSION})")
        tests = list(d.get("tests", ()))
        return cls({f: {int(ln): frozenset(tests[i] for i in ids) for ln, ids in per.items()}
                    for f, per in d.get("files", {}).items()},
                   {f: frozenset(int(x) for x in v) for f, v in d.get("outside", {}).items()},
                   {tests[int(i)]: tuple(ids) for i, ids in d.get("instances", {}).items()},
                   {f: frozenset(int(x) for x in v) for f, v in d.get("collection", {}).items()})

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_dict(), separators=(",", ":")))

    @classmethod
    def load(cls, path: Path) -> CoverageMap:
        return cls.from_dict(json.loads(Path(path).read_text()))


def _instances(lines: Mapping[str, Mapping[int, frozenset[str]]], nodeids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Context -> node ids, for the contexts that are a test function's (not a node id of ``nodeids``)."""
    ids = set(nodeids)
    contexts = {c for per in lines.values() for cs in per.values() for c in cs} - ids
    if not contexts or not ids:
        return {}
    by_function: dict[str, list[str]] = {}
    for n in ids:
        head, sep, tail = n.rpartition("::")
        base = head + sep + tail.split("[", 1)[0]
        if base != n and base in contexts:
            by_function.setdefault(base, []).append(n)
    return {c: tuple(sorted(v)) for c, v in by_function.items()}


def covered_entities(entities: Iterable[Entity], coverage: CoverageMap,
                     reliable: Iterable[str]) -> tuple[Entity, ...]:
    """Entities whose body lines are executed by at least one reliable test."""
    rel = frozenset(reliable)
    return tuple(e for e in entities if coverage.tests_for_entity(e, rel))


def statement_lines(repo: Path, files: Iterable[str]) -> dict[str, frozenset[int]]:
    """Executable statement lines of each file, as coverage.py counts them (its own parser)."""
    from coverage.parser import PythonParser

    out: dict[str, frozenset[int]] = {}
    for f in files:
        try:
            parser = PythonParser(filename=str(Path(repo) / f))
            parser.parse_source()
        except Exception:  # noqa: BLE001 - coverage raises several types for unparsable files
            continue
        out[f] = frozenset(parser.statements)
    return out


def coverage_percent(coverage: CoverageMap, entities: Iterable[Entity],
                     statements: Mapping[str, frozenset[int]]) -> float:
    """Share (0-100) of the statements in function and method bodies that at least one test executed.

    Module- and class-level statements are left out: they run at import time, outside any test, so the
    per-test map cannot see them.
    """
    total: set[tuple[str, int]] = set()
    for e in entities:
        if e.kind.value not in ("function", "method"):
            continue
        stmts = statements.get(e.file, frozenset())
        total.update((e.file, ln) for start, end in e.body_spans for ln in range(start, end + 1) if ln in stmts)
    if not total:
        return 0.0
    hit = sum(1 for f, ln in total if ln in coverage.lines.get(f, {}))
    return round(100.0 * hit / len(total), 2)


def _ran(where: Mapping[str, frozenset[int]], entity: Entity) -> bool:
    return any(start <= ln <= end for ln in where.get(entity.file, frozenset()) for start, end in entity.body_spans)
