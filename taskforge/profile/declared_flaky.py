"""Tests their own project marks flaky are no reliable test, whatever the baseline runs saw.

zipp 4.1.2's ``test_implied_dirs_performance`` (``@pytest.mark.flaky``) measures big-O timing. It passed in
the profile's runs on a quiet machine, so it became PASS_TO_PASS of every task, and with a CI run on the same
two cores it failed: 2 of 6 tasks scored 0 on their gold patch in ``taskforge validate``, and an agent's
correct patch would have too. The project said so: ``pytest.mark.flaky`` (pytest-rerunfailures), ``flaky``
and ``flaky.flaky`` (the flaky plugin), on the test, on its class or in a module's ``pytestmark``. Such tests
are moved to the baseline's flaky set: never FAIL_TO_PASS nor PASS_TO_PASS.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from pathlib import Path

from taskforge.core import pyparse
from taskforge.profile.baseline import Baseline


def declared_flaky(repo: Path, test_files: Iterable[str]) -> frozenset[str]:
    """``file::Class::func``, ``file::func`` (or ``file`` for a whole module) of every test marked flaky."""
    out: set[str] = set()
    for rel, tree in pyparse.parse_files(Path(repo), test_files):
        if any(_flaky(v) for n in tree.body if isinstance(n, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
               for v in _items(n.value)):
            out.add(rel)
            continue
        _walk(tree, rel, (), False, out)
    return frozenset(out)


def without_declared_flaky(baseline: Baseline, repo: Path, test_files: Iterable[str]) -> Baseline:
    """``baseline`` with the reliable tests their project marks flaky moved to ``flaky`` (module docstring)."""
    marked = declared_flaky(repo, test_files)
    if not marked:
        return baseline
    moved = frozenset(n for n in baseline.passed
                      if n.split("::", 1)[0] in marked or n.split("[", 1)[0] in marked)
    if not moved:
        return baseline
    return dataclasses.replace(baseline, passed=baseline.passed - moved, flaky=baseline.flaky | moved)


def _walk(node: ast.AST, rel: str, prefix: tuple[str, ...], inherited: bool, out: set[str]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            marked = inherited or any(_flaky(d) for d in child.decorator_list) or any(
                _flaky(v) for n in child.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets) for v in _items(n.value))
            _walk(child, rel, (*prefix, child.name), marked, out)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                inherited or any(_flaky(d) for d in child.decorator_list)):
            out.add("::".join((rel, *prefix, child.name)))


def _items(value: ast.expr) -> list[ast.expr]:
    return list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]


def _flaky(decorator: ast.expr) -> bool:
    """``flaky``, ``flaky(...)``, ``flaky.flaky``, ``pytest.mark.flaky(...)``, ``mark.flaky``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id == "flaky"
    return isinstance(target, ast.Attribute) and target.attr == "flaky"
