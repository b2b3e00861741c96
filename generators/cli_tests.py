"""Tests that run the package's command line in a child process (``[sys.executable, '-m', 'pkg', ...]``).

Per-test coverage never sees a child process, so such a test covers nothing by coverage, yet it fails
whenever code its command runs is gone (python-slugify 9.2.0's ``test_algorithm_cli`` runs
``python -m slugify``: 10 of its stub/delete candidates were rejected with ``SUITE_RED_AFTER_DELETION``,
the test red as a PASS_TO_PASS test). Such a test covers every entity that ``pkg/__main__.py`` reaches in the
static index (what its code references, transitively; a reached class with its methods).

``cli_tests(entity, profile)``: the reliable tests of that kind that cover ``entity`` (memoised on the index).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from taskforge.core.entities import EntityKind

_REACH_KINDS = ("call", "name", "attribute", "import", "reexport")


def cli_tests(entity: Any, profile: Any) -> frozenset[str]:
    """Reliable tests running ``python -m pkg`` whose command reaches ``entity`` (module docstring)."""
    index = profile.index
    memo = getattr(index, "_memo", {})
    if "cli_tests" not in memo:
        memo["cli_tests"] = _compute(index, Path(getattr(profile, "repo_dir", "") or "."),
                                     profile.baseline.reliable)
    reach, tests = memo["cli_tests"]
    if not tests:
        return frozenset()
    if entity.kind is EntityKind.MODULE:
        hit = any(e.qualname in reach for e in index.in_file(entity.file))
    else:
        hit = entity.qualname in reach
    return tests if hit else frozenset()


def _compute(index: Any, root: Path, reliable: Any) -> tuple[frozenset[str], frozenset[str]]:
    mains = [e for e in index.entities if e.kind is EntityKind.MODULE and e.qualname.endswith(".__main__")]
    if not mains:
        return frozenset(), frozenset()
    packages = {m.qualname.rsplit(".", 1)[0] for m in mains}
    names = _spawning_tests(index.test_files, root, packages)
    tests = frozenset(n for n in reliable if _test_key(n) in names)
    if not tests:
        return frozenset(), frozenset()
    reach = index.closure((e.qualname for m in mains for e in index.in_file(m.file)), kinds=_REACH_KINDS,
                          of_class=lambda q: [m.qualname for m in index.members(q)])
    return frozenset(reach), tests


def _test_key(nodeid: str) -> tuple[str, str]:
    """``(file, innermost name without parameters)`` of a node id."""
    parts = nodeid.split("::")
    return parts[0], parts[-1].split("[", 1)[0]


def _spawning_tests(test_files: Any, root: Path, packages: set[str]) -> set[tuple[str, str]]:
    alternatives = "|".join(re.escape(p) for p in sorted(packages))
    pattern = re.compile(rf"""['"]-m['"]\s*,\s*['"](?:{alternatives})['"]|-m\s+(?:{alternatives})\b""")
    out: set[tuple[str, str]] = set()
    for rel in test_files:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not pattern.search(text):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                segment = ast.get_source_segment(text, node) or ""
                if pattern.search(segment):
                    out.add((rel, node.name))
    return out
