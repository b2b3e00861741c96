"""Tests that run the package's command line in a child process (``[sys.executable, '-m', 'pkg', ...]``,
or a module file as a script: ``[sys.executable, 'tabulate/__init__.py', ...]``).

Per-test coverage never sees a child process, so such a test covers nothing by coverage, yet it fails
whenever code its command runs is gone (python-slugify 9.2.0's ``test_algorithm_cli`` runs
``python -m slugify``: 10 of its stub/delete candidates were rejected with ``SUITE_RED_AFTER_DELETION``,
the test red as a PASS_TO_PASS test). Such a test covers every entity that ``pkg/__main__.py`` reaches in the
static index (what its code references, transitively; a reached class with its methods). A test that runs a
module file of the project by its path covers what that file's ``if __name__ == "__main__":`` block reaches
(every entity of the file when it has none): tabulate 0.10.0's 7 tests/test_cli.py tests run
``tabulate/__init__.py``, and 37 of its 48 decided candidates were rejected as they went red as PASS_TO_PASS.

``cli_tests(entity, profile)``: the reliable tests of that kind that cover ``entity`` (memoised on the index).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from taskforge.core import pyparse
from taskforge.core.entities import EntityKind

_REACH_KINDS = ("call", "name", "attribute", "import", "reexport")
_SPAWNS = re.compile(r"sys\.executable|subprocess|Popen|check_output|os\.system|pexpect")  # a path alone is no run


def cli_tests(entity: Any, profile: Any) -> frozenset[str]:
    """Reliable tests running ``python -m pkg`` whose command reaches ``entity`` (module docstring)."""
    index = profile.index
    memo = getattr(index, "_memo", {})
    if "cli_tests" not in memo:
        memo["cli_tests"] = _compute(index, Path(getattr(profile, "repo_dir", "") or "."),
                                     profile.baseline.reliable)
    out: frozenset[str] = frozenset()
    for reach, tests in memo["cli_tests"]:
        if entity.kind is EntityKind.MODULE:
            hit = any(e.qualname in reach for e in index.in_file(entity.file))
        else:
            hit = entity.qualname in reach
        if hit:
            out |= tests
    return out


def _compute(index: Any, root: Path, reliable: Any) -> list[tuple[frozenset[str], frozenset[str]]]:
    """``[(entities reached, reliable tests)]``: one pair for ``python -m`` runs, one per script file run."""
    out = []
    mains = [e for e in index.entities if e.kind is EntityKind.MODULE and e.qualname.endswith(".__main__")]
    if mains:
        pattern = _alternatives([rf"""['"]-m['"]\s*,\s*['"](?:{p})['"]|-m\s+(?:{p})\b"""
                                 for p in sorted(re.escape(m.qualname.rsplit(".", 1)[0]) for m in mains)])
        names = _spawning_tests(index.test_files, root, pattern)
        tests = frozenset(n for n in reliable if _test_key(n) in names)
        if tests:
            reach = index.closure((e.qualname for m in mains for e in index.in_file(m.file)), kinds=_REACH_KINDS,
                                  of_class=lambda q: [m.qualname for m in index.members(q)])
            out.append((frozenset(reach), tests))
    files = sorted({e.file for e in index.entities if e.file.endswith(".py") and not e.file.endswith("__main__.py")})
    if files:
        by_path = {f: re.compile(rf"""['"](?:\./)?{re.escape(f)}['"]""") for f in files}
        candidates = _spawning_tests(index.test_files, root, _alternatives(
            [rf"""['"](?:\./)?{re.escape(f)}['"]""" for f in files]), keep_text=True)
        for f, rx in by_path.items():
            names = {key for key, segment in candidates.items() if rx.search(segment) and _SPAWNS.search(segment)}
            tests = frozenset(n for n in reliable if _test_key(n) in names)
            if tests:
                reach = index.closure(_script_seeds(index, root, f), kinds=_REACH_KINDS,
                                      of_class=lambda q: [m.qualname for m in index.members(q)])
                out.append((frozenset(reach), tests))
    return out


def _alternatives(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _script_seeds(index: Any, root: Path, file: str) -> set[str]:
    """What running ``file`` as a script starts from: the entities its ``__main__`` block references, or
    every entity of the file when it has no such block (or the block references none)."""
    every = {e.qualname for e in index.in_file(file)}
    try:
        tree = pyparse.parse((root / file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return every
    blocks = [(n.lineno, n.end_lineno or n.lineno) for n in tree.body if isinstance(n, ast.If)
              and "__name__" in ast.dump(n.test) and "__main__" in ast.dump(n.test)]
    seeds = {e.qualname for e in index.entities for r in e.references
             if r.file == file and any(lo <= r.line <= hi for lo, hi in blocks)}
    return seeds or every


def _test_key(nodeid: str) -> tuple[str, str]:
    """``(file, innermost name without parameters)`` of a node id."""
    parts = nodeid.split("::")
    return parts[0], parts[-1].split("[", 1)[0]


def _spawning_tests(test_files: Any, root: Path, pattern: re.Pattern[str], keep_text: bool = False) -> Any:
    """``{(file, test name)}`` of the test functions whose source matches ``pattern`` (``keep_text``: a dict
    of them to their source)."""
    out: dict[tuple[str, str], str] = {}
    for rel in test_files:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not pattern.search(text):
            continue
        try:
            tree = pyparse.parse(text)
        except SyntaxError:
            continue
        segment_of = pyparse.source_segments(text)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                segment = segment_of(node) or ""
                if pattern.search(segment):
                    out[(rel, node.name)] = segment
    return out if keep_text else set(out)
