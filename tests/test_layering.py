"""The layering of the packages (ARCHITECTURE.md): a lower floor never imports a higher one.

- ``taskforge.core`` (values, errors, settings, files, processes, patches) imports nothing else of the
  project;
- ``generators`` and ``sandboxes`` import only ``taskforge.core`` (and themselves), never each other;
- ``sandboxes/runner`` (files copied into environments) imports nothing of the project at all;
- nothing but the CLI and the bench commands (each a ``taskforge bench`` sub-command) imports
  ``taskforge.cli``.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("taskforge", "generators", "sandboxes")


def project_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted module) of every import of a project module in ``path``, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PROJECT:
                yield node.lineno, name


def allowed(importer: str, imported: str) -> bool:
    """Whether module ``importer`` (a dotted name) may import ``imported``."""
    def under(name: str, pkg: str) -> bool:
        return name == pkg or name.startswith(pkg + ".")

    if under(importer, "sandboxes.runner"):
        return False
    if under(importer, "taskforge.core"):
        return under(imported, "taskforge.core") or imported == "taskforge"
    for low in ("generators", "sandboxes"):
        if under(importer, low):
            return under(imported, low) or under(imported, "taskforge.core") or imported == "taskforge"
    if under(imported, "taskforge.cli"):
        return under(importer, "taskforge.cli") or under(importer, "taskforge.bench")
    return True


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for package in PROJECT:
        for path in sorted((root / package).rglob("*.py")):
            if "vendor" in path.parts:
                continue
            importer = module_name(path) if root == ROOT else ".".join(path.relative_to(root).with_suffix("").parts)
            for line, imported in project_imports(path):
                if not allowed(importer, imported):
                    found.append(f"{path.relative_to(root)}:{line}: {importer} imports {imported}")
    return found


def test_no_import_runs_back_up_the_layers() -> None:
    assert violations() == []


@pytest.mark.parametrize(("importer", "imported", "ok"), [
    ("taskforge.core.task", "taskforge.core.environment", True),
    ("taskforge.core.patches", "sandboxes.process", False),
    ("taskforge.core.settings", "taskforge.dataset.schema", False),
    ("generators.sources", "taskforge.core.process", True),
    ("generators.sources", "sandboxes.local", False),
    ("sandboxes.local", "generators.sources", False),
    ("sandboxes.docker_images", "taskforge.audit.image_layers", False),
    ("sandboxes.runner.pytest_runner", "taskforge.core.testreport", False),
    ("taskforge.reward.reward", "sandboxes.protocol", True),
    ("taskforge.reward.reward", "taskforge.cli._common", False),
    ("taskforge.bench.generate", "taskforge.cli._common", True),
])
def test_the_rule(importer: str, imported: str, ok: bool) -> None:
    assert allowed(importer, imported) is ok


def test_a_violation_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "taskforge" / "core").mkdir(parents=True)
    (tmp_path / "generators").mkdir()
    (tmp_path / "sandboxes").mkdir()
    (tmp_path / "taskforge" / "core" / "values.py").write_text("import os\n\n\ndef f():\n    from taskforge.dataset import x\n")
    assert violations(tmp_path) == ["taskforge/core/values.py:5: taskforge.core.values imports taskforge.dataset",
                                    "taskforge/core/values.py:5: taskforge.core.values imports taskforge.dataset.x"]
