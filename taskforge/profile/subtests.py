"""Tests that report more than one ``call`` record (unittest ``subTest``, the ``subtests`` fixture).

pytest 9 reports every ``with self.subTest(...)`` block as a report of its own, with the test's node id
and ``when == "call"``. The records ledger (``sandboxes/ledger.py``) takes a second call record for a
test as forged, so any grading that selects such a test is flagged as tampering and scores 0 (markdown
3.11.3: ``tests/test_syntax/extensions/test_toc.py``, ``test_autolinks.py``; every candidate's
PASS_TO_PASS holds them, so not one task was accepted). Until the ledger tells a subtest report from a
forged one, such tests are no reliable test: when a baseline run carried forged records, the tests
whose function calls ``subTest`` or takes a ``subtests`` fixture are moved to the flaky set.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from pathlib import Path

from taskforge.core import pyparse
from taskforge.profile.baseline import Baseline


def subtest_functions(repo: Path, test_files: Iterable[str]) -> frozenset[str]:
    """``file::Class::func`` / ``file::func`` of every test function that uses subtests."""
    out: set[str] = set()
    for rel, tree in pyparse.parse_files(Path(repo), test_files):
        _walk(tree, rel, (), out)
    return frozenset(out)


def _walk(node: ast.AST, rel: str, prefix: tuple[str, ...], out: set[str]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            _walk(child, rel, (*prefix, child.name), out)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and _uses_subtests(child):
            out.add("::".join((rel, *prefix, child.name)))


def _uses_subtests(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if any(a.arg == "subtests" for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)):
        return True
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "subTest"
               for n in ast.walk(fn))


def without_subtests(baseline: Baseline, repo: Path, test_files: Iterable[str]) -> Baseline:
    """``baseline`` with the reliable tests that use subtests moved to ``flaky`` (module docstring)."""
    functions = subtest_functions(repo, test_files)
    moved = frozenset(n for n in baseline.passed if n.split("[", 1)[0] in functions)
    if not moved:
        return baseline
    return dataclasses.replace(baseline, passed=baseline.passed - moved, flaky=baseline.flaky | moved)
